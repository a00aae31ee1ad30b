"""``python -m empirical.train``: one rank of a torchrun job (see :mod:`empirical.train`)."""

from empirical.train.cli import entry

if __name__ == "__main__":  # pragma: no cover
    entry()
