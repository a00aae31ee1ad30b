"""Wall-clock accounting of a training step: compute, communication, pull.

On a GPU, kernels run asynchronously, so a timer read without synchronising measures only
the launch; :class:`StepTimer` calls ``torch.cuda.synchronize`` before every reading
when ``device`` is a CUDA device. Times are in seconds (``time.perf_counter``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

__all__ = ["StepTimer", "Totals"]


@dataclass
class Totals:
    """Cumulative seconds of one rank (see :data:`empirical.metrics.TRAIN_FIELDS`)."""

    compute_s: float = 0.0
    comm_s: float = 0.0
    pull_s: float = 0.0
    wall_s: float = 0.0

    def state_dict(self) -> dict[str, float]:
        """For checkpoints."""
        return asdict(self)

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Inverse of :meth:`state_dict`."""
        for key, val in state.items():
            setattr(self, key, float(val))


class StepTimer:
    """Times regions of the training loop, synchronising CUDA when needed."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.cuda = torch.device(device).type == "cuda"

    def now(self) -> float:
        """Current time after all queued device work has finished."""
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()
