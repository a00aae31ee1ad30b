"""``W`` PALSGD workers in ONE process: the workers' parameters stacked along a leading
worker axis (:class:`~empirical.algorithms.stacked_model.StackedModel`), their step
vmapped, the sync a mean over the worker axis on the device. For one GPU: ``K`` ranks
on one GPU over gloo spend their syncs copying through the host; here nothing leaves the
device.

In a process group of ``P`` ranks (``K = P W`` workers; rank ``r``'s rows are the workers
``rW .. rW + W - 1``) each mean over the workers sums this process's rows, then ONE
all-reduce (:class:`~empirical.algorithms.base.Communicator`) sums over the ranks.

The algorithm is :class:`~empirical.algorithms.local.LocalAlgorithm`'s (Naganuma et al.
2025, Algorithm 1), for every worker ``k`` (of the ``K``) at once, step ``t``:

* warm-up (``t < T0``): every worker a gradient step on the MEAN of the ``K`` gradients
  (the gradient all-reduce), learning rate ``alpha``;
* local phase: worker ``k``'s coin is ``coin_source([t], k)``, by default
  ``theory.coins.pull_coins(seed, p, step=t, worker=k, replica=0, shared=coins ==
  "shared")``: the coin rank ``k`` of a ``K``-rank run draws
  (:func:`empirical.algorithms.coins.as_coin_source`, the source
  :class:`~empirical.algorithms.pulls.Pulls` uses). Pull (``b = 1``): ``x_k <- x_k -
  (alpha*eta/p)(x_k - z)``, no forward/backward. Gradient step (``b = 0``): the inner
  optimizer (:mod:`empirical.algorithms.stacked_inner`) with learning rate
  ``alpha/(1-p)``;
* sync after step ``t`` when :func:`theory.sync.is_sync_step`: ``z <- mean_k x_k``
  (outer ``"average"``) or one step of the project's
  :class:`~empirical.algorithms.outer.OuterOptimizer` on ``Delta = mean_k (z - x_k)``
  (``"sgd"``/``"nesterov"``: ``gamma``, ``mu``, ``outer_steps_per_sync``), then
  ``x_k <- z``; the buffer policy (``"average"``: floating-point buffers averaged,
  ``"anchor"``: reset to the snapshot of the warm-up's end, ``"local"``: left).

The coins are drawn on the host in blocks of steps (a pure function of ``t``), moved to
the device once per block; only the workers taking a gradient step run forward and
backward (their rows gathered when some pull). A step reads nothing back from the
device: no ``.item()``, no branch on a tensor. Not supported (refused): the overlapped sync
(``sync_delay``), ``interleave_outer_steps`` with ``outer_steps_per_sync > 1`` (with one
outer step per sync it changes nothing), a ``torch.amp.GradScaler``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from core.errors import UserInputError
from core.transfer import to_device_async
from empirical.algorithms.base import Communicator
from empirical.algorithms.coins import as_coin_source
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.local import sync_part
from empirical.algorithms.outer import OuterOptimizer
from empirical.algorithms.slowlink import link_delay_fn
from empirical.algorithms.stacked_inner import StackedInner
from empirical.algorithms.stacked_model import StackedModel
from empirical.timing import DeviceClock
from theory.sync import is_sync_step

__all__ = ["StackedWorkers", "StackedStep", "check_supported"]

_COIN_BLOCK = 1024  # steps of coins drawn (and moved to the device) at once


@dataclass
class StackedStep:
    """Result of :meth:`StackedWorkers.step`: ``pulls`` (host bool ``(W,)``: which of this
    process's workers pulled), ``synced`` (a sync followed the step), ``t`` (steps done),
    ``losses`` (device float64 ``(W,)``, NaN for a pulling worker; ``None`` when every
    worker here pulled)."""

    pulls: np.ndarray
    synced: bool
    t: int
    losses: torch.Tensor | None


class StackedWorkers:
    """``W`` workers of ``config``'s local algorithm on copies of ``model`` (module
    docstring). ``inner``: a :class:`StackedInner` or the ``torch.optim`` optimizer a
    rank would use (its hyperparameters are read; it is not stepped). ``loss_fn(module,
    batch)``: the mean loss of one micro-batch. ``coin_source``: as for
    :func:`~empirical.algorithms.build_algorithm`. ``randomness``: vmap's (dropout).
    ``process_group``: the ranks of ``W`` workers each averaged together (default: the
    world, when initialised). ``K``, ``first``: the workers in all, the first one here.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        model: nn.Module,
        W: int,
        inner: StackedInner | torch.optim.Optimizer,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        *,
        coin_source: Any = None,
        randomness: str = "different",
        process_group: Any = None,
    ) -> None:
        check_supported(config)
        self.config, self.W, self.t = config, int(W), 0
        self.model = StackedModel(model, self.W, loss_fn, randomness)
        self.inner = inner if isinstance(inner, StackedInner) else StackedInner.from_torch(inner)
        self.lr = self.inner.lr
        self.T0 = config.warmup_steps
        self.coin_source = as_coin_source(
            coin_source, config.seed, config.p, config.coins == "shared"
        )
        self._block: tuple[int, np.ndarray, torch.Tensor] | None = None
        fm = self.model
        self.z = torch.zeros(fm.n, dtype=fm.dtype, device=fm.device)
        self.outer: OuterOptimizer | None = None
        if config.outer != "average":
            self.outer = OuterOptimizer(
                self.z, config.outer, float(config.gamma), float(config.mu),
                config.outer_steps_per_sync, offload=config.offload_outer_state,
            )  # fmt: skip
        self.anchor_buffers: dict[str, torch.Tensor] | None = None
        self.local_started = False
        self.last_consensus: torch.Tensor | None = None  # device scalar of the last sync
        self.stats = {"grad_steps": np.zeros(W, np.int64), "pull_steps": np.zeros(W, np.int64),
                      "warmup_steps": 0, "syncs": 0, "outer_steps": 0, "allreduce_calls": 0,
                      "broadcast_calls": 0, "bytes_communicated": 0,
                      "time_comm_s": 0.0, "time_sync_s": 0.0}  # fmt: skip
        self.clock = DeviceClock(fm.device, self.stats)
        delay = link_delay_fn(config.comm_delay_s, config.comm_delay_per_byte_s)
        self.comm = Communicator(process_group, self.stats, delay=delay, clock=self.clock)
        self.K, self.first = self.W * self.comm.size, self.W * self.comm.rank
        self._broadcast_initial_state()
        if self.T0 == 0:
            self._start_local_phase()

    @property
    def x(self) -> torch.Tensor:
        """This process's workers' parameters, ``(W, n)`` (row ``k``: worker
        ``first + k``)."""
        return self.model.x

    @torch.no_grad()
    def _broadcast_initial_state(self) -> None:
        """Every rank's workers start from rank 0's parameters and buffers (as
        :func:`~empirical.algorithms.collectives.broadcast_initial_state` on a rank)."""
        if self.comm.active:
            for t in (self.x, *self.model.buffers.values()):
                self.comm.broadcast(t)

    @torch.no_grad()
    def mean_over_workers(self, local_sum: torch.Tensor) -> torch.Tensor:
        """``local_sum`` (the sum over this process's workers) made the mean over all ``K``
        workers, in place: one all-reduce over the ranks (none with one process)."""
        self.comm.all_reduce_sum(local_sum)
        return local_sum.div_(self.K)

    # ------------------------------------------------------------------ coins
    def coins(self, t: int) -> np.ndarray:
        """The pull coins of step ``t`` of this process's workers (host bool ``(W,)``; all
        False in the warm-up or without pulls)."""
        if t < self.T0 or not self.config.has_pulls:
            return np.zeros(self.W, dtype=bool)
        return self._coin_row(t)[0]

    def _coin_row(self, t: int) -> tuple[np.ndarray, torch.Tensor]:
        """Step ``t``'s coins (host ``(W,)``) and the order of the workers on the device
        (``(W,)`` int64: the gradient workers first, ascending)."""
        length = getattr(self.coin_source, "length", None)
        if length is not None and t >= length:
            raise UserInputError(
                f"the recorded coin trace holds {length} steps; step {t} has no coin"
            )
        if self._block is None or not self._block[0] <= t < self._block[0] + _COIN_BLOCK:
            steps = np.arange(t, t + _COIN_BLOCK)
            host = np.stack(
                [
                    np.asarray(self.coin_source(steps, self.first + k), dtype=bool)
                    for k in range(self.W)
                ],
                1,  # fmt: skip
            )
            order = np.argsort(host, axis=1, kind="stable")  # False (gradient) first
            dev = self.model.device
            self._block = (t, host, to_device_async(order, dev))
        start, host, dev_order = self._block
        return host[t - start], dev_order[t - start]

    # ------------------------------------------------------------------ the step
    def step(self, batch: Any, lr: float | None = None, *, micro_batches: int = 1) -> StackedStep:
        """Local step ``t`` of every worker on ``batch`` (leaves with a leading axis of
        size ``W``; a pulling worker's micro-batch is not used). ``lr``: the inner learning
        rate ``alpha`` from this step on (a schedule), else the current one.
        ``micro_batches = A > 1``: ``batch`` is a sequence of ``A`` such batches, the
        gradient their mean (gradient accumulation; losses: the mean over them)."""
        if lr is not None:
            self.lr = float(lr)
        s, K = self.t, self.W
        warm = s < self.T0
        if warm or not self.config.has_pulls:
            pulls, order = np.zeros(K, dtype=bool), None
        else:
            pulls, order = self._coin_row(s)
        m = int(K - pulls.sum())
        losses = None
        if m:
            batches = list(batch) if micro_batches > 1 else [batch]
            losses = self._grad_step(batches, pulls, order, m, warm)
        if m < K:
            self._pull(np.flatnonzero(pulls).tolist())
        self.stats["pull_steps"] += pulls
        self.stats["grad_steps"] += ~pulls
        self.t = s + 1
        if not self.local_started and self.t >= self.T0:
            self._start_local_phase()
            return StackedStep(pulls, False, self.t, losses)
        synced = bool(is_sync_step(s, self.T0, self.config.H, self.config.sync_offset))
        if synced:
            self.sync()
        return StackedStep(pulls, synced, self.t, losses)

    def _grad_step(
        self,
        batches: list[Any],
        pulls: np.ndarray,
        order: torch.Tensor | None,
        m: int,
        warm: bool,
    ) -> torch.Tensor:
        """Gradients of the ``m`` workers not pulling (the mean over the micro-batches
        ``batches``), then their inner step."""
        K, fm = self.W, self.model
        workers = np.flatnonzero(~pulls).tolist()
        idx = host = None
        if m < K:
            assert order is not None
            idx, host = order[:m], torch.tensor(workers)
        g, losses = fm.gradients(batches[0], idx, host)
        for more in batches[1:]:  # gradient accumulation, buffers updated in turn
            g_more, l_more = fm.gradients(more, idx, host)
            g.add_(g_more)
            losses = losses + l_more
        if len(batches) > 1:
            g.div_(len(batches))
            losses = losses / len(batches)
        if warm:  # the warm-up's gradient all-reduce: every worker the mean gradient
            self.stats["warmup_steps"] += 1
            g.copy_(self.mean_over_workers(g.sum(0, keepdim=True)).expand_as(g))
        self._clip(g)
        p = 0.0 if warm else self.config.p
        self.inner.step(fm.x, g, workers, self.lr / (1.0 - p))
        return losses

    @torch.no_grad()
    def _clip(self, g: torch.Tensor) -> None:
        """Per worker, ``torch.nn.utils.clip_grad_norm_`` of its row (``clip_grad_norm``)."""
        cap = self.config.clip_grad_norm
        if cap is None:
            return
        norm = torch.linalg.vector_norm(g, dim=1, keepdim=True)
        g.mul_(torch.clamp(cap / (norm + 1e-6), max=1.0))

    @torch.no_grad()
    def _pull(self, workers: list[int]) -> None:
        """``x_k <- x_k - c (x_k - z)``, ``c = alpha*eta/p``, on the pulling workers (one
        ``torch._foreach_lerp_`` over their rows, as :meth:`Pulls.pull` on a rank)."""
        cfg = self.config
        if cfg.eta == 0 or not workers:
            return
        c = self.lr * cfg.eta / cfg.p
        cols = self.model.first_numel() if cfg.pull_first_tensor_only else self.model.n
        z = self.z[:cols]
        torch._foreach_lerp_([self.x[k, :cols] for k in workers], [z] * len(workers), c)

    # ------------------------------------------------------------------ the sync
    def _start_local_phase(self) -> None:
        """End of the warm-up: ``z <- x`` (the workers are identical) and the buffers'
        snapshot."""
        with torch.no_grad():
            self.z.copy_(self.x[0])
        if self.config.buffers != "local":
            self.anchor_buffers = {n: b[0].clone() for n, b in self.model.buffers.items()}
        self.local_started = True

    @torch.no_grad()
    def sync(self) -> None:
        """The outer step (or the average) on the workers' mean (one all-reduce over the
        ranks), ``x_k <- z``, the consensus statistic (a device scalar: the mean over the
        workers of ``||x_k - xbar||^2``) and the buffer policy."""
        with self.clock.region("time_sync_s"):  # CUDA events on a GPU: no wait
            self._sync()

    def _sync(self) -> None:
        cfg, x = self.config, self.x
        xbar = torch.sum(x, 0, out=self.z) if self.outer is None else x.sum(0)
        self.mean_over_workers(xbar)  # no (W, n) temporary
        every = cfg.consensus_interval
        if every and self.stats["syncs"] % every == 0:
            self.last_consensus = self.mean_over_workers((x - xbar).square().sum())
        if self.outer is None:
            self.stats["outer_steps"] += 1
        else:
            delta = torch.sub(self.z, xbar, out=xbar)  # mean_k (z - x_k)
            self.stats["outer_steps"] += self.outer.step(delta)
        x.copy_(self.z.expand_as(x))
        self.stats["syncs"] += 1
        self._buffer_policy()

    def _buffer_policy(self) -> None:
        """After a sync: ``"average"`` averages the floating-point buffers over the workers
        (integer ones stay per worker) and keeps them as the anchor's; ``"anchor"`` resets
        every buffer to the snapshot; ``"local"`` leaves them."""
        bufs, policy = self.model.buffers, self.config.buffers
        if policy == "average":
            for b in bufs.values():
                if b.is_floating_point():
                    b.copy_(self.mean_over_workers(b.sum(0)).expand_as(b))
            self.anchor_buffers = {n: b[0].clone() for n, b in bufs.items()}
        elif policy == "anchor" and self.anchor_buffers is not None:
            for n, b in bufs.items():
                b.copy_(self.anchor_buffers[n].expand_as(b))

    # ------------------------------------------------------------------ state
    def anchor_state_dict(self) -> dict[str, torch.Tensor]:
        """The global model: the module's state dict with ``z`` (copies); before the
        warm-up ends, worker 0's parameters."""
        flat = self.z if self.local_started else self.x[0]
        bufs = self.anchor_buffers or self.model.worker_buffers(0)
        return self.model.state_dict_of(flat, bufs)

    def worker_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Worker ``k``'s model state dict (copies)."""
        return self.model.state_dict_of(self.x[k], self.model.worker_buffers(k))

    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs (copies): step, parameters, buffers, anchor, inner and
        outer state, statistics."""
        return {
            "t": self.t, "local_started": self.local_started, "lr": self.lr,
            "x": self.x.clone(), "z": self.z.clone(),
            "buffers": {n: b.clone() for n, b in self.model.buffers.items()},
            "anchor_buffers": None if self.anchor_buffers is None
            else {n: b.clone() for n, b in self.anchor_buffers.items()},
            "inner": self.inner.state_dict(),
            "outer": {} if self.outer is None else self.outer.state_dict(),
            "stats": {k: np.copy(v) for k, v in self.stats.items()},
        }  # fmt: skip

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (same ``W`` and model)."""
        if tuple(state["x"].shape) != tuple(self.x.shape):
            raise UserInputError(
                f"the state holds {tuple(state['x'].shape)} stacked parameters, this run "
                f"{tuple(self.x.shape)}"
            )
        self.t, self.local_started = int(state["t"]), bool(state["local_started"])
        self.lr = float(state["lr"])
        self.x.copy_(state["x"])
        self.z.copy_(state["z"])
        for n, b in self.model.buffers.items():
            b.copy_(state["buffers"][n])
        ab = state["anchor_buffers"]
        self.anchor_buffers = None if ab is None else {n: v.clone() for n, v in ab.items()}
        self.inner.load_state_dict(state["inner"])
        if self.outer is not None:
            self.outer.load_state_dict(state["outer"])
        self.stats = {k: np.copy(v) if isinstance(v, np.ndarray) else v
                      for k, v in state["stats"].items()}  # fmt: skip
        self._block = None

    def memory_bytes(self) -> dict[str, int]:
        """Bytes on the device: stacked parameters, inner state, anchor, outer state."""
        size = self.x.numel() * self.x.element_size()
        return {
            "stacked_params": size,
            "inner_state": self.inner.state_bytes(),
            "anchor": self.z.numel() * self.z.element_size(),
            "outer_state": 0 if self.outer is None else self.outer.state_bytes(),
        }


def check_supported(config: AlgorithmConfig) -> None:
    """Refuse what the stacked workers do not run (module docstring)."""
    row = config.spec.definition
    sync_part(row)  # a row with local steps and a sync part
    if row.elastic:
        raise UserInputError(
            f"stacked workers run the average and outer sync rules, not {row.name}'s elastic "
            "mixing (run it with one worker per process)"
        )
    if config.sync_delay:
        raise UserInputError("stacked workers run the blocking sync only (sync_delay = 0)")
    if config.interleave_outer_steps and config.outer_steps_per_sync > 1:
        # with one outer step per sync there is nothing to interleave (the authors' A = 1)
        raise UserInputError("stacked workers take the outer steps at once (no interleaving)")
