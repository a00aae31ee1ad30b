"""The four local algorithms, each step on its own (Naganuma et al. 2025, Algorithm 1 for
PALSGD; the shared frame, syncs and state are :class:`~empirical.algorithms.local.
LocalAlgorithm`'s):

* :class:`LocalSGD`: a local inner step every step; a sync every ``H`` steps.
* :class:`PostLocalSGD`: ``T0`` warm-up steps of averaged gradients (DDP), then Local SGD.
* :class:`DiLoCo`: Post-Local SGD whose syncs take an outer optimizer step (SGD or
  Nesterov) on ``Delta = z - mean_k x_k``.
* :class:`PALSGD`: after the warm-up, each step is a pull ``x <- x - (alpha*eta/p)(x - z)``
  with probability ``p`` (no forward/backward) or an inner step with learning rate
  ``alpha/(1-p)``; syncs as configured (averaging or an outer optimizer).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from empirical.algorithms.local import LocalAlgorithm
from theory.validation import UserInputError

__all__ = ["LocalSGD", "PostLocalSGD", "DiLoCo", "PALSGD"]

_COIN_BLOCK = 1024  # coins drawn per vectorised call of theory.coins.pull_coins


class LocalSGD(LocalAlgorithm):
    """``local_sgd``: local steps from the start (no warm-up)."""

    name = "local_sgd"

    def _local_update(self, s: int, action: str, scaler: Any) -> None:
        self._local_step(scaler)


class PostLocalSGD(LocalAlgorithm):
    """``post_local_sgd``: DDP for ``T0`` steps, then local steps."""

    name = "post_local_sgd"

    def _local_update(self, s: int, action: str, scaler: Any) -> None:
        if s < self.T0:
            self._warmup_step(scaler)
        else:
            self._local_step(scaler)


class DiLoCo(PostLocalSGD):
    """``diloco``: Post-Local SGD's steps; each sync is an outer optimizer step on the
    averaged ``Delta`` (``empirical.algorithms.local_comm``)."""

    name = "diloco"


class PALSGD(LocalAlgorithm):
    """``palsgd``: warm-up, then pull steps (coin ``p``) and scaled inner steps."""

    name = "palsgd"

    def _local_update(self, s: int, action: str, scaler: Any) -> None:
        if s < self.T0:
            self._warmup_step(scaler)
        elif action == "pull":
            self._warn_if_gradients(s)
            with self.clock.region("time_pull_s"):
                self._pull()
            self.stats["pull_steps"] += 1
        else:
            self._local_step(scaler, self.config.p)  # alpha / (1 - p)

    def next_action(self) -> str:
        """``"pull"`` iff the local phase (``t >= T0``) and the coin of step ``t`` says so."""
        t = self.t
        if t < self.T0 or not self.config.has_pulls:
            return "grad"
        length = getattr(self.coin_source, "length", None)
        if length is not None and t >= length:
            raise UserInputError(
                f"the recorded coin trace holds {length} steps; step {t} has no coin"
            )
        start, coins = self._coins
        if not start <= t < start + len(coins):
            # one vectorised call per block of steps; still a pure function of t
            block = np.arange(t, t + _COIN_BLOCK)
            coins = np.asarray(self.coin_source(block, self.rank), dtype=bool).tolist()
            if len(coins) != _COIN_BLOCK:
                raise UserInputError(
                    f"the coin source returned {len(coins)} coins for {_COIN_BLOCK} steps"
                )
            self._coins = (t, coins)
            start = t
        return "pull" if coins[t - start] else "grad"

    def _warn_if_gradients(self, s: int) -> None:
        if any(q.grad is not None for q in self.params):
            self.stats["discarded_backward_steps"] += 1
            warnings.warn(
                f"step {s} is a pull step but the parameters hold gradients: a pull uses no "
                "gradient, so that backward pass is discarded; run forward/backward only when "
                "next_action() == 'grad', or use train_step()",
                RuntimeWarning,
                stacklevel=4,
            )

    @torch.no_grad()
    def _pull(self) -> None:
        """``x <- x - c (x - z)``, ``c = alpha*eta/p`` per param group (``alpha``: its lr)."""
        cfg = self.config
        if cfg.eta == 0:
            return
        groups = self.inner_optimizer.param_groups
        for gi, ps, zs in self.pull_groups:
            c = float(groups[gi]["lr"]) * cfg.eta / cfg.p
            if all(zv.dtype == pp.dtype for pp, zv in zip(ps, zs, strict=True)):
                torch._foreach_lerp_(ps, zs, c)
            else:
                for pp, zv in zip(ps, zs, strict=True):
                    pp.lerp_(zv.to(pp.dtype), c)
