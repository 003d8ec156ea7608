"""``python -m nrp.service [options]``: the same as ``nrp serve [options]``."""

from __future__ import annotations

import sys

from nrp.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
