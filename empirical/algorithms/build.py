"""Construction of a distributed algorithm: :data:`IMPLEMENTATIONS` and
:func:`build_algorithm` (re-exported by :mod:`empirical.algorithms`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from core.errors import UserInputError
from core.validation import check_type
from empirical.algorithms.base import DistributedAlgorithm
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.ddp import DDPAlgorithm
from empirical.algorithms.local import LocalAlgorithm
from theory.algorithm import LOCAL_NAMES

__all__ = ["IMPLEMENTATIONS", "implementation_of", "build_algorithm"]


#: the class of each implementation of a distributed algorithm: torch's DDP, or rounds of
#: local steps and a sync (every name of :data:`theory.algorithm.LOCAL_NAMES`)
IMPLEMENTATIONS: dict[str, type[DistributedAlgorithm]] = {
    "ddp": DDPAlgorithm,
    "local": LocalAlgorithm,
}


def implementation_of(name: str) -> str:
    """The key of :data:`IMPLEMENTATIONS` that runs the algorithm ``name``."""
    return "local" if name in LOCAL_NAMES else "ddp"


def build_algorithm(
    config: AlgorithmConfig,
    model: nn.Module,
    inner_optimizer: torch.optim.Optimizer,
    *,
    process_group: Any = None,
    coin_source: Any = None,
) -> DistributedAlgorithm:
    """The algorithm named by ``config`` around ``model`` and ``inner_optimizer``.

    ``process_group`` defaults to the world group (or to a single process when no group is
    initialised). Rank 0's parameters and buffers are broadcast to all ranks here.
    ``coin_source`` (PALSGD only): ``None`` (the counter-based coins of
    :func:`theory.coins.pull_coins`), a callable ``(steps, worker) -> bool array``, or a
    recorded trace of shape ``(T,)`` or ``(T, K)`` (:func:`recorded_coins`). Move the model
    to its device first: the local algorithms make its parameters views of one flat buffer.
    """
    check_type("config", config, AlgorithmConfig, "an AlgorithmConfig")
    check_type("model", model, nn.Module, "a torch.nn.Module")
    check_type("inner_optimizer", inner_optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    cls = IMPLEMENTATIONS[implementation_of(config.name)]
    kw: dict[str, Any] = {"process_group": process_group}
    if coin_source is not None:
        if cls is not LocalAlgorithm:
            raise UserInputError(f"'coin_source' is used by 'palsgd' only, not {config.name!r}")
        kw["coin_source"] = coin_source
    return cls(config, model, inner_optimizer, **kw)
