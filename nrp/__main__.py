"""``python -m nrp [COMMAND ...]``: the same as the ``nrp`` command."""

import sys

from nrp.cli import main

sys.exit(main())
