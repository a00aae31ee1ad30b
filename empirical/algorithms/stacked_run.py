""":class:`StackedAlgorithm`: the ``K`` workers of
:class:`~empirical.algorithms.stacked.StackedWorkers` behind the interface the trainer
drives a rank's algorithm through (:class:`~empirical.algorithms.base.DistributedAlgorithm`:
``train_step``, ``t``, ``stats``, ``outer``, ``anchor_state_dict``, ``state_dict``), so
that ``palsgd train --workers-per-process W`` runs ``W`` workers in one process with the
trainer's schedules, evaluation, records and checkpoints (docs/stacked_workers.md).

What a step does, as ``K`` ranks would: worker ``k`` draws its ``A`` micro-batches from
its own stream (``next_batch(k)``: the stream rank ``k`` of a ``K``-rank run reads) only
when it takes a gradient step, or also on a pull with ``discard_batch_on_pull`` (drawn and
dropped, as a rank's ``train_step`` does); a pulling worker's rows of the stacked batches
are another worker's micro-batches (they are not read). The gradient is the mean over the
``A`` micro-batches (gradient accumulation). The loss handed to the monitor is the SUM
of the stepping workers' losses with their count (:class:`StackedStepResult`), so that the
train record's window mean is the mean over worker-steps, the mean a ``K``-rank run's
records hold.

Statistics (:attr:`StackedAlgorithm.stats`, the keys of
:func:`~empirical.algorithms.base.new_stats`): ``grad_steps`` and ``pull_steps`` are summed
over this process's ``W`` workers (all ``K`` with one process); ``warmup_steps``, ``syncs``
and ``outer_steps`` are counted once (every worker takes them together);
``allreduce_calls``, ``broadcast_calls``, ``bytes_communicated`` and ``time_comm_s`` count
the collectives across processes (none with one process); ``time_sync_s`` is the time in
the syncs (device-timed on a GPU).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils._pytree import tree_map

from core.errors import UserInputError
from empirical.algorithms.base import DistributedAlgorithm, StepInfo, StepResult, new_stats
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.outer import OuterOptimizer
from empirical.algorithms.stacked import StackedWorkers
from empirical.algorithms.stacked_inner import StackedInner

__all__ = ["StackedAlgorithm", "StackedStepResult"]

#: the inner optimizer's hyperparameters re-read before every step (a resume may change them)
_INNER_FIELDS = ("momentum", "dampening", "nesterov", "weight_decay", "betas", "eps")


@dataclass
class StackedStepResult(StepResult):
    """:class:`~empirical.algorithms.base.StepResult` of ``K`` workers: ``loss`` is the
    SUM of the ``count`` stepping workers' losses (``None`` when every worker pulled)."""

    count: int = 1


class StackedAlgorithm(DistributedAlgorithm):
    """``W`` workers of ``config``'s local algorithm on copies of ``model`` in this process
    (module docstring), of ``K = W x ranks`` in all (``process_group``: as for
    :class:`~empirical.algorithms.stacked.StackedWorkers`). ``inner_optimizer``: the
    ``torch.optim`` optimizer a rank would use; it is never stepped, its param group carries
    the scheduled learning rate and the hyperparameters (re-read before every step).
    ``loss_fn(module, batch)``: one micro-batch's mean loss. ``coin_source``: as for
    :func:`~empirical.algorithms.build_algorithm` (a ``(T, K)`` trace: column ``k``)."""

    def __init__(
        self,
        config: AlgorithmConfig,
        model: nn.Module,
        inner_optimizer: torch.optim.Optimizer,
        W: int,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        *,
        coin_source: Any = None,
        process_group: Any = None,
    ) -> None:
        self.config, self.model, self.inner_optimizer = config, model, inner_optimizer
        self.sw = StackedWorkers(
            config, model, W, inner_optimizer, loss_fn, coin_source=coin_source,
            process_group=process_group,
        )  # fmt: skip
        self._consensus: float | None = None

    # ------------------------------------------------------------------ the rank's view
    @property
    def t(self) -> int:  # type: ignore[override]
        """Local steps done (every worker's)."""
        return self.sw.t

    @property
    def params(self) -> list[torch.Tensor]:  # type: ignore[override]
        """The stacked parameters ``(K, n)`` and the anchor ``(n,)`` (the finiteness check)."""
        return [self.sw.x, self.sw.z]

    @property
    def outer(self) -> OuterOptimizer | None:
        """The outer optimizer acting on the anchor (``None`` for averaging)."""
        return self.sw.outer

    @property
    def stats(self) -> dict[str, Any]:  # type: ignore[override]
        """Rank-style statistics (module docstring), plain Python numbers."""
        s = self.sw.stats
        out = new_stats()
        counts = ("warmup_steps", "syncs", "outer_steps", "allreduce_calls", "broadcast_calls",
                  "bytes_communicated")  # fmt: skip
        out.update({k: int(s[k]) for k in counts})
        out.update(
            grad_steps=int(np.sum(s["grad_steps"])),
            pull_steps=int(np.sum(s["pull_steps"])),
            time_comm_s=float(s["time_comm_s"]),
            time_sync_s=float(s["time_sync_s"]),
            last_consensus=self._consensus,
        )
        return out

    def next_action(self) -> str:
        """``"pull"`` when every worker of this process pulls at step ``t``, else
        ``"grad"``."""
        return "pull" if bool(self.sw.coins(self.sw.t).all()) else "grad"

    def anchorless(self) -> bool:
        """True for Local SGD with averaging after the warm-up: the global model is the
        workers' current average (formed by :meth:`anchor_state_dict`)."""
        return not self.config.uses_anchor and self.sw.local_started

    def evaluated(self) -> str:
        """What :meth:`anchor_state_dict` is: ``"average"`` or ``"anchor"``."""
        return "average" if self.anchorless() else "anchor"

    # ------------------------------------------------------------------ the step
    def train_step(
        self,
        next_batch: Callable[..., Any],
        loss_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
        *,
        micro_batches: int = 1,
        scaler: Any = None,
        autocast: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> StackedStepResult:
        """Step ``t`` of every worker (module docstring); ``next_batch(k)``: worker ``k``'s
        next micro-batch. ``loss_fn`` is the one given at construction (ignored here)."""
        if scaler is not None:
            raise UserInputError("stacked workers take no GradScaler (fp16): use bf16 or fp32")
        sw, K, a = self.sw, self.sw.W, int(micro_batches)
        self._refresh_inner()
        pulls = sw.coins(sw.t)
        rows: list[list[Any] | None] = [None] * K
        drawn = 0
        for k in range(K):  # a rank's draws: A micro-batches on a gradient step
            if not pulls[k] or self.config.discard_batch_on_pull:
                own = [next_batch(k) for _ in range(a)]
                drawn += a
                rows[k] = None if pulls[k] else own
        stacked = [self._stack([r and r[i] for r in rows]) for i in range(a)]
        lr = float(self.inner_optimizer.param_groups[0]["lr"])
        with autocast() if autocast is not None else contextlib.nullcontext():
            res = sw.step(stacked if a > 1 else stacked[0], lr=lr, micro_batches=a)
        m = int(K - pulls.sum())
        loss = None if res.losses is None else _sum_of_steppers(res.losses, K - m)
        info = StepInfo(action="grad" if m else "pull", synced=res.synced, t=res.t)
        return StackedStepResult(info=info, loss=loss, batches=drawn, count=m)

    def _stack(self, rows: list[Any]) -> Any:
        """The workers' micro-batches stacked leaf by leaf on the device (a pulling
        worker's row: another worker's batch); ``None`` when every worker pulls."""
        filler = next((r for r in rows if r is not None), None)
        if filler is None:
            return None
        full = [filler if r is None else r for r in rows]
        device = self.sw.model.device
        return tree_map(lambda *leaves: torch.stack(leaves).to(device), *full)

    def _refresh_inner(self) -> None:
        """The inner optimizer's hyperparameters from the torch optimizer's param group."""
        fresh = StackedInner.from_torch(self.inner_optimizer)
        for name in _INNER_FIELDS:
            setattr(self.sw.inner, name, getattr(fresh, name))

    def resolve_timings(self) -> None:
        """The device-timed collectives and the consensus statistic of the last sync into
        :attr:`stats` (one device read)."""
        self.sw.clock.resolve()
        c = self.sw.last_consensus
        self._consensus = None if c is None else float(c)

    # ------------------------------------------------------------------ state
    @torch.no_grad()
    def anchor_state_dict(
        self, device: torch.device | str | None = None
    ) -> dict[str, torch.Tensor]:
        """Collective with several processes: the global model's state (copies, on
        ``device`` when given): the anchor ``z``, or for Local SGD with averaging the
        workers' mean (floating-point buffers averaged too unless a snapshot of the last
        sync is kept)."""
        sw = self.sw
        if self.anchorless():
            fm = sw.model
            bufs = sw.anchor_buffers or {
                n: sw.mean_over_workers(b.sum(0)) if b.is_floating_point() else b[0]
                for n, b in fm.buffers.items()
            }
            state = fm.state_dict_of(sw.mean_over_workers(sw.x.sum(0)), bufs)
        else:
            state = sw.anchor_state_dict()
        return {k: v.to(device or v.device) for k, v in state.items()}

    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs, loadable with ``torch.load(weights_only=True)`` (the
        host arrays as tensors)."""
        return {
            "version": 1,
            "kind": "stacked",
            "config": self.config.to_dict(),
            "K": self.sw.K,
            "W": self.sw.W,
            "t": self.sw.t,
            "local_started": self.sw.local_started,
            "z": self.sw.z.clone(),
            "stats": self.stats,
            "stacked": _tensors(self.sw.state_dict()),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (same ``K`` and ``W``, model and algorithm)."""
        self._check_state_name(state)
        sw, stacked = self.sw, state.get("kind") == "stacked"
        saved = (int(state.get("K", -1)), int(state.get("W", state.get("K", -1))))
        if not stacked or saved != (sw.K, sw.W):
            held = f"{saved[0]} ({saved[1]} per process)" if stacked else "no stacked"
            raise UserInputError(
                f"the checkpoint holds {held} workers, this run {sw.K} ({sw.W} per "
                "process): --nproc and --workers-per-process must match"
            )
        inner = dict(state["stacked"])
        inner["stats"] = {k: _array(v) for k, v in inner["stats"].items()}
        inner["inner"] = {**inner["inner"], "steps": _array(inner["inner"]["steps"])}
        self.sw.load_state_dict(inner)
        self._consensus = state.get("stats", {}).get("last_consensus")

    def memory_bytes(self) -> dict[str, int]:
        """Bytes on the device (:meth:`StackedWorkers.memory_bytes`)."""
        return self.sw.memory_bytes()


def _sum_of_steppers(losses: torch.Tensor, pulling: int) -> torch.Tensor:
    """The sum of the stepping workers' losses (``losses``: NaN for the ``pulling``
    workers), NaN when a stepping worker's loss is NaN itself (the monitor's divergence
    check sees it); no host read."""
    nan = torch.isnan(losses)
    total = torch.where(nan, 0.0, losses).sum()
    own_nan = nan.sum() > pulling
    return torch.where(own_nan, torch.nan, total)


def _tensors(x: Any) -> Any:
    """``x`` with every numpy array a tensor (``torch.load(weights_only=True)``)."""
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    if isinstance(x, dict):
        return {k: _tensors(v) for k, v in x.items()}
    return x


def _array(x: Any) -> Any:
    """A statistics entry saved as a tensor back as a numpy array."""
    return x.numpy().copy() if torch.is_tensor(x) else x
