"""The state of one rank's run that the trainer's parts share: :class:`RunState` (who runs,
what it trains, where it resumed) and :class:`Counters` (what the run has measured, carried
through every checkpoint)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from empirical.algorithms import DistributedAlgorithm
from empirical.algorithms.fsdp import WorkerMesh
from empirical.config import TrainConfig
from empirical.timing import Totals
from empirical.train.prepare import Prepared

__all__ = ["Counters", "RunState"]


@dataclass
class Counters:
    """What the run has measured: the time totals, the loss window since the last train
    record (a device scalar and a count), the tokens seen, the last train loss and the last
    eval record. A checkpoint's ``trainer`` entry (:meth:`state_dict`)."""

    totals: Totals
    loss_sum: torch.Tensor
    loss_count: int = 0
    tokens: int = 0
    last_loss: float | None = None
    last_eval: dict[str, Any] | None = None

    @classmethod
    def fresh(cls, device: torch.device) -> Counters:
        """Counters at step 0 (the loss window's sum on ``device``)."""
        return cls(Totals(), torch.zeros((), dtype=torch.float64, device=device))

    def state_dict(self, metrics_position: dict[str, int] | None) -> dict[str, Any]:
        """The checkpoint's ``trainer`` entry (``metrics_position``: where the metrics files
        end, rank 0's)."""
        return {
            "totals": self.totals.state_dict(),
            "loss_sum": self.loss_sum.detach().cpu(),
            "loss_count": self.loss_count,
            "tokens": self.tokens,
            "last_loss": self.last_loss,
            "last_eval": self.last_eval,
            "metrics_position": metrics_position,
        }

    def load_state_dict(self, tr: dict[str, Any], device: torch.device) -> None:
        """Restore :meth:`state_dict` (the metrics position is the caller's)."""
        self.totals.load_state_dict(tr["totals"])
        self.loss_sum = tr["loss_sum"].to(device)
        self.loss_count = int(tr["loss_count"])
        self.tokens = int(tr["tokens"])
        self.last_loss = tr.get("last_loss")
        self.last_eval = tr.get("last_eval")


@dataclass
class RunState:
    """One rank's run as its parts (:mod:`~empirical.train.checkpoints`,
    :mod:`~empirical.train.monitor`, :mod:`~empirical.train.records`) see it.

    Who runs (``prep``, ``rank``, ``world``, ``device``), what it trains (``model``,
    ``optimizer``, ``algo``, ``stream``, ``scaler``; ``mesh`` with sharded workers), what
    it has measured (``counters``, ``lr``: the inner learning rate of the last step) and
    where it resumed (``start_step``, ``resumed_from``, ``changed``: the hyperparameters
    changed on resume, ``metrics_position``) and last saved (``last_checkpoint``).
    """

    prep: Prepared
    rank: int
    world: int
    device: torch.device
    model: nn.Module
    optimizer: torch.optim.Optimizer
    algo: DistributedAlgorithm
    stream: Any
    scaler: Any  # torch.amp.GradScaler (fp16) or None
    mesh: WorkerMesh | None
    counters: Counters
    lr: float = 0.0
    start_step: int = 0
    resumed_from: str | None = None
    last_checkpoint: Path | None = None
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    metrics_position: dict[str, int] | None = None

    @property
    def cfg(self) -> TrainConfig:
        """The run's configuration."""
        return self.prep.cfg

    @property
    def stacked(self) -> bool:
        """True when this process runs several workers (``--workers-per-process W > 1``:
        ``algo`` is a :class:`~empirical.algorithms.stacked_run.StackedAlgorithm`)."""
        return self.prep.cfg.workers_per_process > 1

    @property
    def main(self) -> bool:
        """True on rank 0 (the rank that writes the records)."""
        return self.rank == 0
