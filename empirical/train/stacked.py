"""The trainer's part of ``--workers-per-process W > 1`` (docs/stacked_workers.md): the
``W`` workers of each process (``K = nproc x W`` in all; rank ``r``'s are the workers
``r*W .. r*W + W - 1``) as :class:`~empirical.algorithms.stacked_run.StackedAlgorithm` and
their data as :class:`StackedStreams`, the batch streams those ranks of a ``K``-rank run
read. The validation that refuses what a stacked run does not support is
:func:`empirical.config.checks.check_workers_per_process` (options) and
:func:`check_stacked_algorithm` (the resolved algorithm)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from core.errors import UserInputError
from empirical import data as data_mod
from empirical import models
from empirical.algorithms import AlgorithmConfig
from empirical.algorithms.stacked import check_supported
from empirical.algorithms.stacked_run import StackedAlgorithm
from empirical.config import TrainConfig

__all__ = ["StackedStreams", "build_stacked", "check_stacked_algorithm"]


class StackedStreams:
    """The batch streams of this process's workers: :meth:`next` of its worker ``k`` is
    the next micro-batch of rank ``first + k`` of a ``K``-rank run; the state is every
    stream's, in worker order."""

    def __init__(self, streams: list[Any]) -> None:
        self.streams = list(streams)

    def next(self, worker: int) -> Any:
        """Worker ``worker``'s next micro-batch."""
        return self.streams[worker].next()

    def state_dict(self) -> dict[str, Any]:
        """Every worker's stream position (JSON-safe)."""
        return {"workers": [s.state_dict() for s in self.streams]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the same number of workers)."""
        saved = state.get("workers")
        if not isinstance(saved, list) or len(saved) != len(self.streams):
            have = len(saved) if isinstance(saved, list) else "no per-worker"
            raise UserInputError(
                f"the checkpoint holds {have} data streams, this run {len(self.streams)} "
                "workers (--workers-per-process must match)"
            )
        for stream, s in zip(self.streams, saved, strict=True):
            stream.load_state_dict(s)


def check_stacked_algorithm(cfg: TrainConfig, alg: AlgorithmConfig) -> None:
    """Refuse, naming the flag, a resolved algorithm the stacked workers do not run (the
    overlapped sync, interleaved outer steps with ``outer_steps_per_sync > 1``, as
    ``--reference-faithful`` sets them)."""
    if cfg.workers_per_process == 1:
        return
    try:
        check_supported(alg)
    except UserInputError as exc:
        raise UserInputError(
            f"--workers-per-process {cfg.workers_per_process} does not run this algorithm: {exc}"
        ) from None


def build_stacked(
    cfg: TrainConfig,
    alg: AlgorithmConfig,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    task: str,
    train_set: Any,
    coin_source: Any,
    device: torch.device,
) -> tuple[StackedAlgorithm, StackedStreams]:
    """The ``W = workers_per_process`` workers of this process on copies of ``model`` and
    their batch streams (the sync averages over every process of the default group)."""
    W = cfg.workers_per_process

    def loss(m: nn.Module, batch: Any) -> torch.Tensor:
        return models.compute_loss(m, batch, task)

    algo = StackedAlgorithm(alg, model, optimizer, W, loss, coin_source=coin_source)
    first, K = algo.sw.first, algo.sw.K
    streams = [
        data_mod.BatchStream(
            train_set,
            cfg.batch_size,
            rank=k,
            world_size=K,
            seed=cfg.seed,
            iid=cfg.iid,
            num_workers=cfg.num_workers,
            pin_memory=cfg.pin_memory and device.type == "cuda",
        )
        for k in range(first, first + W)
    ]
    return algo, StackedStreams(streams)
