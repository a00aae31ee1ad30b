"""``python -m palsgd``: the same as the ``palsgd`` console script."""

import sys

from palsgd.cli import main

sys.exit(main())
