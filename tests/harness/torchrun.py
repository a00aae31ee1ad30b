"""What the tests that launch ``palsgd`` or ``torchrun`` in a subprocess share: the
repository root, an environment that finds the checkout with one thread per process, and
the launch prefix of a 2-rank torchrun run on this node."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}

#: a torchrun launch of 2 ranks on this node
TORCHRUN_2 = [
    sys.executable,
    "-m",
    "torch.distributed.run",
    "--standalone",
    "--nproc-per-node",
    "2",
]
