"""``python -m palsgd``: the same as the ``palsgd`` console script."""

from palsgd.cli import entry

entry()
