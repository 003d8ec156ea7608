"""``python -m nrp.cli [COMMAND ...]``: the same as ``nrp [COMMAND ...]``."""

import sys

from nrp.cli import main

sys.exit(main())
