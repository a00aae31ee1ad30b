"""``python -m empirical.probe [options]``: the same as ``palsgd probe [options]``."""

import argparse
import sys

from core.guard import guarded
from empirical.probe.cli import add_arguments, run

parser = argparse.ArgumentParser(prog="python -m empirical.probe", description=__doc__)
add_arguments(parser)
args = parser.parse_args()
sys.exit(guarded("palsgd probe", lambda: run(args)))
