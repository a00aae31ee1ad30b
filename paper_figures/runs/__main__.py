"""``python -m paper_figures.runs --plan FILE``: run by torchrun, one process per rank."""

import sys

from paper_figures.runs.launch import main

sys.exit(main())
