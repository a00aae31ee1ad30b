"""``python -m empirical.probe [options]``: the same as ``palsgd probe [options]``."""

import sys

from theory.cli import main

sys.exit(main(["probe", *sys.argv[1:]]))
