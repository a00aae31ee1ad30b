"""PALSGD's pull steps (Naganuma et al. 2025, Algorithm 1): which local steps pull (the
coins) and the pull itself, ``x <- x - (alpha*eta/p)(x - z)`` on every parameter tensor
(``alpha``: the tensor's param-group learning rate), no forward/backward.

The coin of step ``t`` on worker ``k`` is ``coin_source([t], k)`` (by default
``theory.coins.pull_coins(seed, p, step=t, worker=k, replica=0, shared=coins == "shared")``,
:mod:`empirical.algorithms.coins`), drawn in blocks of steps (one vectorised call per
block, still a pure function of ``t``). Parameters that are in no param group of the inner
optimizer are never pulled; ``pull_first_tensor_only`` pulls the first tensor alone (the
authors' code, Q1).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from core.errors import UserInputError
from empirical.algorithms.anchor import Anchor
from empirical.algorithms.coins import as_coin_source
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat_model import FlatModel

__all__ = ["Pulls"]

_COIN_BLOCK = 1024  # coins drawn per vectorised call of theory.coins.pull_coins


class Pulls:
    """The coins of worker ``worker`` and the pull of ``model`` toward ``anchor``.

    ``coin_source``: ``None`` for the counter-based coins of :func:`theory.coins.pull_coins`,
    a callable ``(steps, worker) -> bool array`` or a recorded trace
    (:func:`empirical.algorithms.coins.recorded_coins`).
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        inner_optimizer: torch.optim.Optimizer,
        model: FlatModel,
        anchor: Anchor,
        coin_source: Callable[[np.ndarray, int], np.ndarray] | np.ndarray | None,
        worker: int,
    ) -> None:
        self.config, self.inner_optimizer, self.worker = config, inner_optimizer, worker
        self.groups = self._groups(model, anchor) if config.has_pulls else []
        self.coin_source = as_coin_source(
            coin_source, config.seed, config.p, config.coins == "shared"
        )
        self._coins: tuple[int, list[bool]] = (0, [])

    def _groups(
        self, model: FlatModel, anchor: Anchor
    ) -> list[tuple[int, list[torch.Tensor], list[torch.Tensor]]]:
        """Pull groups: (param-group index, params, anchor views), in model order."""
        if self.config.pull_first_tensor_only:
            return [(0, [model.local_params[0]], [anchor.z_views[0]])]
        group_of = {
            id(p): gi for gi, g in enumerate(self.inner_optimizer.param_groups) for p in g["params"]
        }
        by_group: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for p, lp, zv in zip(model.params, model.local_params, anchor.z_views, strict=True):
            gi = group_of.get(id(p))
            if gi is not None:
                ps, zs = by_group.setdefault(gi, ([], []))
                ps.append(lp)
                zs.append(zv)
        return [(gi, ps, zs) for gi, (ps, zs) in sorted(by_group.items())]

    def coin(self, t: int) -> bool:
        """Whether local step ``t`` (of the local phase) is a pull step."""
        length = getattr(self.coin_source, "length", None)
        if length is not None and t >= length:
            raise UserInputError(
                f"the recorded coin trace holds {length} steps; step {t} has no coin"
            )
        start, coins = self._coins
        if not start <= t < start + len(coins):
            # one vectorised call per block of steps; still a pure function of t
            block = np.arange(t, t + _COIN_BLOCK)
            coins = np.asarray(self.coin_source(block, self.worker), dtype=bool).tolist()
            if len(coins) != _COIN_BLOCK:
                raise UserInputError(
                    f"the coin source returned {len(coins)} coins for {_COIN_BLOCK} steps"
                )
            self._coins = (t, coins)
            start = t
        return coins[t - start]

    def forget_coins(self) -> None:
        """Drop the block of coins drawn so far (after a checkpoint is loaded)."""
        self._coins = (0, [])

    @torch.no_grad()
    def pull(self) -> None:
        """``x <- x - c (x - z)``, ``c = alpha*eta/p`` per param group (``alpha``: its lr)."""
        cfg = self.config
        if cfg.eta == 0:
            return
        groups = self.inner_optimizer.param_groups
        for gi, ps, zs in self.groups:
            c = float(groups[gi]["lr"]) * cfg.eta / cfg.p
            if all(zv.dtype == pp.dtype for pp, zv in zip(ps, zs, strict=True)):
                torch._foreach_lerp_(ps, zs, c)
            else:
                for pp, zv in zip(ps, zs, strict=True):
                    pp.lerp_(zv.to(pp.dtype), c)
