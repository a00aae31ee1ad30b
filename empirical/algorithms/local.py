"""Local SGD, Post-Local SGD, DiLoCo, PALSGD and EASGD: local steps, periodic syncs.

One class, :class:`LocalAlgorithm`, runs the five; the configuration
(:mod:`empirical.algorithms.config`) decides which parts it owns and what its step does:

* :class:`~empirical.algorithms.flat_model.FlatModel`: the parameters as views of one
  flat buffer, the buffers' layout, the work buffer;
* :class:`~empirical.algorithms.anchor.Anchor`: the anchor ``z``, the outer optimizer
  (:mod:`empirical.algorithms.outer`), the buffers' snapshot and policy;
* the sync: the part of the row's sync rule (:data:`SYNC_PARTS`, keyed by
  :attr:`theory.algorithm.Algorithm.sync`): :class:`~empirical.algorithms.sync.Sync`
  (blocking) or, with ``sync_delay``, :class:`~empirical.algorithms.overlap.OverlappedSync`;
  EASGD's :class:`~empirical.algorithms.elastic.ElasticSync` (elastic mixing, blocking);
* :class:`~empirical.algorithms.pulls.Pulls`: PALSGD's coins and pull;
* the warm-up's gradient all-reduce and the initial broadcast
  (:mod:`empirical.algorithms.collectives`), over one
  :class:`~empirical.algorithms.base.Communicator`.

The step (:meth:`LocalAlgorithm.step`):

* warm-up (``t < T0``; ``T0 = 0`` for ``local_sgd``): gradients all-reduced as ONE flat
  buffer each step, then the inner step. Equivalent to DDP (a test shows equality).
* local phase, step ``t``: PALSGD draws the coin ``theory.coins.pull_coins(seed, p, step=t,
  worker=rank, replica=0, shared=coins == "shared")``. Pull (Naganuma et al. 2025,
  Algorithm 1): ``x <- x - (alpha*eta/p)(x - z)`` on every parameter tensor (``alpha`` = the
  tensor's param-group learning rate), no forward/backward. Gradient step: the inner
  optimizer with learning rate ``alpha/(1-p)`` (restored afterwards); the expected update is
  ``alpha*(g + eta*(x - z))``. Other algorithms (``p = 0``): a plain inner step.
* sync, right after step ``t >= T0`` with ``(t - T0 + 1 + sync_offset) % H == 0``
  (:func:`theory.algorithm.is_sync_step`): ONE flat all-reduce, the outer step (or the
  average), every worker restarts from ``z``, the buffer policy
  (:mod:`empirical.algorithms.sync`). EASGD instead mixes the workers and the centre
  elastically, no restart (:mod:`empirical.algorithms.elastic`).

  With ``outer_steps_per_sync = A > 1`` the authors' code also issues ``A - 1`` extra
  all-reduces of zero outer gradients; here the zero steps are taken locally (they carry
  no data), so a sync is always ONE all-reduce.

Memory (beyond model and inner optimizer): a work buffer of the model's size (plus a few
scalars and the floating-point buffers) when the warm-up or the ``Delta`` path needs one
(allocated on first use), the anchor ``z`` (one model copy) when it must persist between
syncs (PALSGD, SGD/Nesterov outer, the overlapped sync), and the outer momentum (one more
copy, optionally offloaded to pinned CPU memory) for ``mu > 0``. Plain Local SGD stores no
anchor.

Mixed precision: the parameters (the master weights), the anchor and the outer state keep
the model's dtype (fp32 for an fp32 model under ``torch.autocast``); :meth:`step` accepts
a ``torch.amp.GradScaler`` (unscale, clip, skip a step with inf/NaN gradients, update).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from core.errors import UserInputError
from empirical.algorithms.anchor import Anchor
from empirical.algorithms.base import Communicator, DistributedAlgorithm, StepInfo
from empirical.algorithms.collectives import average_gradients, broadcast_initial_state
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.elastic import ElasticSync
from empirical.algorithms.flat_model import FlatModel
from empirical.algorithms.fsdp import full_tensor, is_dtensor
from empirical.algorithms.outer import OuterOptimizer
from empirical.algorithms.overlap import OverlappedSync
from empirical.algorithms.pulls import Pulls
from empirical.algorithms.slowlink import link_delay_fn
from empirical.algorithms.sync import Sync
from empirical.timing import DeviceClock
from theory.algorithm import Algorithm, is_sync_step

__all__ = ["LocalAlgorithm", "SYNC_PARTS", "sync_part"]

#: the sync part of each sync rule (:attr:`theory.algorithm.Algorithm.sync`) a row with local
#: steps may have: (blocking, overlapped with ``sync_delay``). Averaging is the outer step
#: ``z <- z - Delta`` of one part (the configuration's ``outer`` picks the update). EASGD's
#: elastic mixing is blocking only (:class:`ElasticSync` refuses ``sync_delay > 0``). A row
#: whose rule has no part here is refused (:func:`sync_part`), never run with another rule.
SYNC_PARTS: dict[str, tuple[type[Sync], type[Sync]]] = {
    "average": (Sync, OverlappedSync),
    "outer": (Sync, OverlappedSync),
    "elastic": (ElasticSync, ElasticSync),
}


def sync_part(row: Algorithm, sync_delay: int = 0) -> type[Sync]:
    """The sync part that runs the sync rule of the table row ``row`` (the overlapped one
    with ``sync_delay > 0``); :class:`~core.errors.UserInputError` for a row without local
    steps or whose sync rule has no part in :data:`SYNC_PARTS`."""
    if not row.local:
        raise UserInputError(
            f"{row.name!r} takes no local steps (its sync rule {row.sync!r} acts at every "
            "step): LocalAlgorithm, rounds of local steps closed by a sync, does not run it"
        )
    parts = SYNC_PARTS.get(row.sync)
    if parts is None:
        raise UserInputError(
            f"{row.name!r} syncs by the rule {row.sync!r}, which has no sync part on "
            f"torch.distributed (empirical.algorithms.local.SYNC_PARTS: {sorted(SYNC_PARTS)}); "
            "add one before giving the row a distributed implementation"
        )
    return parts[1 if sync_delay else 0]


class LocalAlgorithm(DistributedAlgorithm):
    """The rows with local steps and a sync part (:func:`sync_part`): ``local_sgd``,
    ``post_local_sgd``, ``diloco``, ``palsgd`` and ``easgd`` (see the module docstring).

    ``model`` must be identical on all ranks or is made so: at construction rank 0's
    parameters and buffers are broadcast (as torch DDP does). Parameters that are not in
    any param group of ``inner_optimizer`` are synchronised but never pulled.

    ``coin_source`` (PALSGD): ``None`` for the counter-based coins of
    :func:`theory.coins.pull_coins`, a callable ``(steps, worker) -> bool array`` or a
    recorded trace (:func:`empirical.algorithms.coins.recorded_coins`).

    Parts (module docstring): ``flat_model``, ``anchor``, ``sync``, ``pulls``, ``comm``.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        model: nn.Module,
        inner_optimizer: torch.optim.Optimizer,
        *,
        process_group: Any = None,
        coin_source: Callable[[np.ndarray, int], np.ndarray] | np.ndarray | None = None,
    ) -> None:
        sync = sync_part(config.spec.definition, config.sync_delay)
        self._start(config, model, inner_optimizer)
        self.model = model
        fm = self.flat_model = FlatModel(model, average_buffers=config.buffers == "average")
        self.clock = DeviceClock(fm.device, self.stats)
        delay = link_delay_fn(config.comm_delay_s, config.comm_delay_per_byte_s)
        self.comm = Communicator(process_group, self.stats, delay=delay, clock=self.clock)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.T0 = config.warmup_steps
        self.anchor = Anchor(fm, config)
        self.sync: Sync = sync(fm, self.anchor, self.comm, config, self.stats, self.clock)
        self.pulls = Pulls(config, inner_optimizer, fm, self.anchor, coin_source, self.rank)
        self.local_started = False
        broadcast_initial_state(fm, self.comm)
        if self.T0 == 0:
            self._start_local_phase()

    @property
    def z(self) -> torch.Tensor | None:
        """The anchor ``z`` as one flat tensor (``None`` when it is not stored)."""
        return self.anchor.z

    @property
    def outer(self) -> OuterOptimizer | None:
        """The outer optimizer (``None`` for averaging)."""
        return self.anchor.outer

    def _start_local_phase(self) -> None:
        """End of warm-up: ``z <- x`` and the buffers' snapshot."""
        self.anchor.start()
        self.local_started = True

    # ------------------------------------------------------------------ decisions
    def next_action(self) -> str:
        """``"pull"`` iff PALSGD in the local phase (``t >= T0``) and the coin of step ``t``
        says so; else ``"grad"``."""
        t = self.t
        if t < self.T0 or not self.config.has_pulls:
            return "grad"
        return "pull" if self.pulls.coin(t) else "grad"

    def sync_due_after(self, t: int) -> bool:
        """True when a sync follows local step ``t`` (:func:`theory.algorithm.is_sync_step`)."""
        return bool(is_sync_step(t, self.T0, self.config.H, self.config.sync_offset))

    @property
    def in_warmup(self) -> bool:
        return self.t < self.T0

    def anchorless(self) -> bool:
        """True when the global model is stored nowhere: Local SGD with blocking
        averaging after its start, whose global model is the workers' average."""
        return self.anchor.z is None and self.local_started

    # ------------------------------------------------------------------ the step
    def micro_batch_done(self) -> None:
        """After each micro-batch's backward: with ``interleave_outer_steps``, take one of
        the zero-gradient outer steps left by the last sync and reset ``x <- z`` (the
        authors' code, docs/reference-faithful.md). A no-op otherwise."""
        if self.anchor.pending_outer > 0 and self.config.interleave_outer_steps:
            self.anchor.take_pending(1, self.stats)

    def step(self, scaler: Any = None) -> StepInfo:
        """Finish local step ``t``: the update (:meth:`_local_update`: warm-up all-reduce,
        pull or (scaled) inner step), ``zero_grad``, ``t += 1``, and a sync when due.

        ``scaler``: an optional ``torch.amp.GradScaler`` that scaled the loss (unscaled
        before the clip; a step with inf/NaN gradients is skipped by the scaler).
        Zero-gradient outer steps still pending from the last sync are taken first. With an
        overlapped sync (``sync_delay``) the outer step in flight lands after its step and
        a due sync starts instead of completing (:mod:`empirical.algorithms.overlap`).
        """
        s = self.t
        action = self.next_action()
        if self.anchor.pending_outer:
            self.anchor.take_pending(self.anchor.pending_outer, self.stats)
        self._local_update(s, action, scaler)
        self.inner_optimizer.zero_grad(set_to_none=True)
        self.t = s + 1
        if not self.local_started and self.t >= self.T0:
            self._start_local_phase()
            return StepInfo(action=action, synced=False, t=self.t)
        landed = self.sync.lands_after(s) and self.sync.finish()
        synced = self.sync_due_after(s)
        if synced:
            self.sync.run(s)
        return StepInfo(action=action, synced=synced, t=self.t, landed=landed)

    def _local_update(self, s: int, action: str, scaler: Any) -> None:
        """The update of step ``s`` (``action``: :meth:`next_action`)."""
        if s < self.T0:
            average_gradients(self.flat_model, self.comm)
            self._inner_step(0.0, scaler)
            self.stats["warmup_steps"] += 1
            self.stats["grad_steps"] += 1
        elif action == "pull":
            self._warn_if_gradients(s)
            with self.clock.region("time_pull_s"):
                self.pulls.pull()
            self.stats["pull_steps"] += 1
        else:
            self._inner_step(self.config.p, scaler)  # alpha / (1 - p)
            self.stats["grad_steps"] += 1

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

    def finish(self) -> bool:
        """Land an overlapped sync's outer step still in flight (after the last step);
        ``True`` if one landed."""
        return self.sync.finish()

    def resolve_timings(self) -> None:
        """Add the device-timed intervals recorded so far and the consensus statistic of
        the last sync to ``stats`` (waits once on a GPU; steps and syncs never wait)."""
        super().resolve_timings()
        self.sync.resolve_consensus()

    # ------------------------------------------------------------------ state
    @torch.no_grad()
    def anchor_state_dict(
        self, device: torch.device | str | None = None
    ) -> dict[str, torch.Tensor]:
        """Model state with ``z`` as parameters and the anchor's buffers (a copy; on
        ``device`` when given, each tensor copied there directly: no second model copy on
        the model's device).

        Without a stored anchor (Local SGD with averaging, or before the warm-up ends)
        the parameters are this rank's current ones, which equal the global model right
        after a sync. Buffers: the values kept at the last sync (policies ``"average"``,
        ``"anchor"``) or the current local ones (``"local"``). With sharded workers
        (:mod:`empirical.algorithms.fsdp`) the full tensors are gathered over the shard
        group: a collective, every rank of the worker calls it.
        """
        sd = self.model.state_dict(keep_vars=True)
        index = {id(p): i for i, p in enumerate(self.params)}
        bufs = self.anchor.buffers or {}
        out: dict[str, torch.Tensor] = {}
        use_z = self.anchor.z is not None and self.local_started
        for key, val in sd.items():
            i = index.get(id(val))
            if i is not None and use_z:
                src = full_tensor(self.anchor.z_views[i], val)  # gathered when sharded
            elif key in bufs:
                src = bufs[key]
            elif is_dtensor(val):
                src = val.detach().full_tensor()
            else:
                src = val.detach()
            out[key] = src.to(device or src.device, dtype=val.dtype, copy=True)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Counters, anchor, outer-optimizer state, buffer snapshot, statistics and a sync
        in flight (copies).

        The coins need only ``t`` (counter-based); the position in the round follows from
        ``t``, ``T0``, ``H`` and ``sync_offset``.
        """
        self.sync.resolve_consensus()
        anchor = self.anchor.state_dict()
        return {
            "version": 1,
            "config": self.config.to_dict(),
            "t": self.t,
            "local_started": self.local_started,
            "pending_outer": anchor["pending_outer"],
            "world_size": self.world_size,
            "z": anchor["z"],
            "outer": anchor["outer"],
            "anchor_buffers": anchor["anchor_buffers"],
            "stats": dict(self.stats),
            "in_flight": self.sync.state_dict(),
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_state_name(state)
        z, here = state.get("z"), self.anchor.z
        n = self.flat_model.n
        if (z is None) != (here is None) or (z is not None and z.numel() != n):
            raise UserInputError(
                "checkpoint anchor does not match this model/algorithm "
                f"(checkpoint: {None if z is None else z.numel()} values, here: "
                f"{None if here is None else n})"
            )
        self.t = int(state["t"])
        self.local_started = bool(state.get("local_started", self.t >= self.T0))
        self.anchor.load_state_dict(state)
        self.stats.update(state.get("stats", {}))
        self.pulls.forget_coins()
        self.sync.load_state_dict(state.get("in_flight"))

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held by the algorithm on the model's device: work buffer (0 until first
        used), anchor, outer state, buffer snapshot, the flat parameter buffer's room for
        averaged buffers and the consensus scalar (the parameters themselves are the
        model's); ``outer_state_offloaded`` is in host memory."""
        fm = self.flat_model
        return {
            "work_buffer": fm.work_bytes(),
            **self.anchor.memory_bytes(),
            "flat_extra": fm.extra_bytes(),
        }
