"""Distributed algorithms on ``torch.distributed``: DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD.

Each wraps any ``nn.Module`` and any ``torch.optim`` optimizer (the inner optimizer), in
the shape of PyTorch's ``PostLocalSGDOptimizer``/``PeriodicModelAverager`` but with an
explicit decision point for PALSGD's pull steps::

    from empirical.algorithms import AlgorithmConfig, build_algorithm
    algo = build_algorithm(AlgorithmConfig(name="palsgd", H=32, p=0.2, eta=1.0, T0=32,
                                           outer="nesterov", gamma=0.1, mu=0.9),
                           model, torch.optim.AdamW(model.parameters(), lr=1e-2))
    while training:
        if algo.next_action() == "grad":
            loss_fn(algo.model(batch)).backward()
        info = algo.step()        # StepInfo(action, synced, t)

See :mod:`empirical.algorithms.local` for the exact per-step semantics and
``docs/reference-implementation.md`` for the authors' code's quirks (available as named
switches of :class:`AlgorithmConfig`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from empirical.algorithms.base import DistributedAlgorithm, StepInfo
from empirical.algorithms.config import (
    BUFFERS,
    COINS,
    NAMES,
    OUTERS,
    AlgorithmConfig,
    StabilityReport,
    check_stability,
)
from empirical.algorithms.ddp import DDPAlgorithm
from empirical.algorithms.flat import FlatLayout
from empirical.algorithms.local import LocalAlgorithm
from empirical.algorithms.outer import OuterOptimizer

__all__ = [
    "AlgorithmConfig",
    "StabilityReport",
    "check_stability",
    "build_algorithm",
    "DistributedAlgorithm",
    "DDPAlgorithm",
    "LocalAlgorithm",
    "StepInfo",
    "FlatLayout",
    "OuterOptimizer",
    "NAMES",
    "OUTERS",
    "COINS",
    "BUFFERS",
]


def build_algorithm(
    config: AlgorithmConfig,
    model: nn.Module,
    inner_optimizer: torch.optim.Optimizer,
    *,
    process_group: Any = None,
) -> DistributedAlgorithm:
    """The algorithm named by ``config`` around ``model`` and ``inner_optimizer``.

    ``process_group`` defaults to the world group (or to a single process when no group is
    initialised). Rank 0's parameters and buffers are broadcast to all ranks here.
    """
    if not isinstance(config, AlgorithmConfig):
        raise TypeError("config must be an AlgorithmConfig")
    if config.name == "ddp":
        return DDPAlgorithm(config, model, inner_optimizer, process_group=process_group)
    return LocalAlgorithm(config, model, inner_optimizer, process_group=process_group)
