"""Local SGD, Post-Local SGD, DiLoCo and PALSGD: local steps, periodic syncs.

:class:`LocalAlgorithm` holds what the four share (flat parameters, anchor, outer
optimizer, the step's frame, state); each algorithm's own step is a subclass in
:mod:`empirical.algorithms.local_variants` (:class:`LocalSGD`, :class:`PostLocalSGD`,
:class:`DiLoCo`, :class:`PALSGD`), and the collectives are in
:mod:`empirical.algorithms.local_comm`. The configuration
(:mod:`empirical.algorithms.config`) fixes the rest:

* warm-up (``t < T0``, not ``local_sgd``): gradients all-reduced as ONE flat buffer each
  step, then the inner step. Equivalent to DDP (a test shows equality).
* local phase, step ``t``: PALSGD draws the coin ``theory.coins.pull_coins(seed, p, step=t,
  worker=rank, replica=0, shared=coins == "shared")``. Pull (Naganuma et al. 2025,
  Algorithm 1): ``x <- x - (alpha*eta/p)(x - z)`` on every parameter tensor (``alpha`` = the
  tensor's param-group learning rate), no forward/backward. Gradient step: the inner
  optimizer with learning rate ``alpha/(1-p)`` (restored afterwards); the expected update is
  ``alpha*(g + eta*(x - z))``. Other algorithms: a plain inner step.
* sync, right after step ``t >= T0`` with ``(t - T0 + 1 + sync_offset) % H == 0``
  (:func:`theory.algorithm.is_sync_step`): ONE flat all-reduce, then

  - outer ``"average"``: the buffer carries ``x_k``; ``z <- mean_k x_k``;
  - outer ``"sgd"``/``"nesterov"``: the buffer carries ``Delta_k = z - x_k``; one outer step
    on ``z`` with ``Delta = mean_k Delta_k`` (``outer_steps_per_sync - 1`` more on zero);

  then every worker sets ``x_k <- z`` and applies the buffer policy: ``"average"``
  averages the floating-point buffers (BatchNorm statistics) in the same all-reduce and
  leaves integer buffers (``num_batches_tracked``) local; ``"anchor"`` resets every buffer
  to its value at the end of the warm-up (the authors' code, Q10); ``"local"`` leaves
  buffers alone. The buffer also carries one scalar for the consensus distance
  ``mean_k ||x_k - xbar||^2`` (``stats["last_consensus"]``, read from the device by
  :meth:`~LocalAlgorithm.resolve_timings`, so a sync never waits for it), computed as
  ``mean_k ||x_k - r||^2 - ||xbar - r||^2`` with ``r = z`` (exact up to rounding of the
  small quantities) or, for Local SGD without an anchor, ``r = 0`` (absolute error about
  ``1e-7 * ||x||^2`` in fp32).

  With ``outer_steps_per_sync = A > 1`` the authors' code also issues ``A - 1`` extra
  all-reduces of zero outer gradients; here the zero steps are taken locally (they carry
  no data), so a sync is always ONE all-reduce.

Flat parameters: when every trainable parameter has the buffer dtype and one device, the
parameters are re-pointed to views of ONE flat buffer at construction (as torch's
``model_averaging.utils.average_parameters`` re-points them after its all-reduce). A sync
then all-reduces the parameters in place (outer ``"average"``) or forms ``Delta_k = z - x_k``
in one pass, with no gather or scatter copies; the outer step acts on the flat anchor.
Move the model to its device BEFORE building the algorithm (``module.to`` would allocate
new parameter tensors and break the views).

Memory (beyond model and inner optimizer): a work buffer of the model's size (plus a few
scalars and the floating-point buffers) when the warm-up or the ``Delta`` path needs one
(allocated on first use), the anchor ``z`` (one model copy) when it must persist between
syncs (PALSGD, SGD/Nesterov outer), and the outer momentum (one more copy, optionally
offloaded to pinned CPU memory) for ``mu > 0``. Plain Local SGD stores no anchor.

Mixed precision: the parameters (the master weights), the anchor and the outer state keep
the model's dtype (fp32 for an fp32 model under ``torch.autocast``); :meth:`step` accepts
a ``torch.amp.GradScaler`` (unscale, clip, skip a step with inf/NaN gradients, update).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from empirical.algorithms.base import Communicator, DistributedAlgorithm, StepInfo
from empirical.algorithms.coins import as_coin_source
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat import FlatLayout, flat_dtype
from empirical.algorithms.fsdp import full_tensor, is_dtensor, local_view
from empirical.algorithms.local_comm import _CHUNK, LocalCommunication, sq_norm
from empirical.algorithms.outer import OuterOptimizer
from empirical.algorithms.overlap import OverlappedSync
from empirical.algorithms.slowlink import link_delay_fn
from empirical.timing import DeviceClock
from theory.algorithm import is_sync_step
from theory.validation import UserInputError

__all__ = ["LocalAlgorithm", "sq_norm", "_CHUNK"]


class LocalAlgorithm(OverlappedSync, LocalCommunication, DistributedAlgorithm):
    """``local_sgd``, ``post_local_sgd``, ``diloco`` and ``palsgd`` (see the module docstring).

    ``LocalAlgorithm(config, ...)`` builds the subclass of ``config.name``
    (:mod:`empirical.algorithms.local_variants`); a subclass supplies
    :meth:`_local_update`, the algorithm's own part of the step.

    ``model`` must be identical on all ranks or is made so: at construction rank 0's
    parameters and buffers are broadcast (as torch DDP does). Parameters that are not in
    any param group of ``inner_optimizer`` are synchronised but never pulled.

    ``coin_source`` (PALSGD): ``None`` for the counter-based coins of
    :func:`theory.coins.pull_coins`, a callable ``(steps, worker) -> bool array`` or a
    recorded trace (:func:`empirical.algorithms.coins.recorded_coins`).
    """

    #: the algorithm name each subclass runs, and the subclass of each name
    name: ClassVar[str | None] = None
    _variants: ClassVar[dict[str, type[LocalAlgorithm]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.name is not None:
            LocalAlgorithm._variants[cls.name] = cls

    def __new__(cls, config: AlgorithmConfig | None = None, *args: Any, **kw: Any) -> Any:
        if config is None:  # copy and pickle protocols
            return super().__new__(cls)
        if not config.spec.local:
            raise UserInputError(
                f"LocalAlgorithm does not run {config.name!r}; use build_algorithm"
            )
        if cls is LocalAlgorithm or cls.name != config.name:
            cls = LocalAlgorithm._variants[config.name]
        return super().__new__(cls)

    def __init__(
        self,
        config: AlgorithmConfig,
        model: nn.Module,
        inner_optimizer: torch.optim.Optimizer,
        *,
        process_group: Any = None,
        coin_source: Callable[[np.ndarray, int], np.ndarray] | np.ndarray | None = None,
    ) -> None:
        self._start(config, model, inner_optimizer)
        self.model = model
        if not self.params:
            raise UserInputError("the model has no trainable parameters")
        # this rank's tensors: the parameters, or their chunks when FSDP2 shards them
        self.sharded = any(is_dtensor(p) for p in self.params)
        self.local_params = [local_view(p) for p in self.params]
        self.dtype = flat_dtype(self.local_params)
        self.device = self.local_params[0].device
        self.clock = DeviceClock(self.device, self.stats)
        delay = link_delay_fn(config.comm_delay_s, config.comm_delay_per_byte_s)
        self.comm = Communicator(process_group, self.stats, delay=delay, clock=self.clock)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.T0 = config.warmup_steps
        self._build_flat(model)
        self._build_anchor()
        self.pull_groups = self._pull_groups()
        self.coin_source = as_coin_source(
            coin_source, config.seed, config.p, config.coins == "shared"
        )
        self._coins: tuple[int, list[bool]] = (0, [])
        self._consensus_pending: torch.Tensor | None = None  # the last sync's, on the device
        self.local_started = False
        self._broadcast_initial_state()
        if self.T0 == 0:
            self._start_local_phase()

    # ------------------------------------------------------------------ construction
    def _build_flat(self, model: nn.Module) -> None:
        """Layouts of parameters and buffers; the parameters become views of ONE flat
        buffer when they share dtype and device."""
        self.named_buffers: list[tuple[str, torch.Tensor]] = list(model.named_buffers())
        self.float_buffers = [b for _, b in self.named_buffers if b.is_floating_point()]
        self.layout = FlatLayout(self.local_params)
        n = self.n = self.layout.numel
        self.avg_buffers = self.config.buffers == "average" and bool(self.float_buffers)
        self.buf_layout = FlatLayout(self.float_buffers, offset=n)
        nb = self.buf_layout.numel if self.avg_buffers else 0
        self.n_sync = n + nb + 1  # params (or Delta), averaged buffers, consensus scalar
        self.n_warm = n + len(self.params)  # gradients, presence flags
        self._work: torch.Tensor | None = None
        self.flat: torch.Tensor | None = None
        same = all(p.dtype == self.dtype and p.device == self.device for p in self.local_params)
        if same and not self.sharded:  # FSDP2 owns the storage of sharded parameters
            self.flat = torch.zeros(self.n_sync, dtype=self.dtype, device=self.device)
            with torch.no_grad():
                self.layout.gather(self.params, self.flat)
                for p, view in zip(self.params, self.layout.views(self.flat), strict=True):
                    p.data = view

    def _build_anchor(self) -> None:
        """The anchor ``z`` (when it persists between syncs) and the outer optimizer."""
        cfg = self.config
        self.z: torch.Tensor | None = None
        self.outer: OuterOptimizer | None = None
        self.pending_outer = 0  # interleaved zero-gradient outer steps still to take
        if cfg.uses_anchor:
            self.z = torch.zeros(self.n, dtype=self.dtype, device=self.device)
            if cfg.outer != "average":
                self.outer = OuterOptimizer(
                    self.z,
                    cfg.outer,
                    float(cfg.gamma),
                    float(cfg.mu),
                    cfg.outer_steps_per_sync,
                    offload=cfg.offload_outer_state,
                )
            self.z_views = self.layout.views(self.z)
        self.anchor_buffers: dict[str, torch.Tensor] | None = None

    def _pull_groups(self) -> list[tuple[int, list[torch.Tensor], list[torch.Tensor]]]:
        """Pull groups (PALSGD): (param-group index, params, anchor views), in model order."""
        if not self.config.has_pulls:
            return []
        if self.config.pull_first_tensor_only:
            return [(0, [self.local_params[0]], [self.z_views[0]])]
        group_of = {
            id(p): gi for gi, g in enumerate(self.inner_optimizer.param_groups) for p in g["params"]
        }
        by_group: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for p, lp, zv in zip(self.params, self.local_params, self.z_views, strict=True):
            gi = group_of.get(id(p))
            if gi is not None:
                ps, zs = by_group.setdefault(gi, ([], []))
                ps.append(lp)
                zs.append(zv)
        return [(gi, ps, zs) for gi, (ps, zs) in sorted(by_group.items())]

    def _work_buffer(self) -> torch.Tensor:
        """The work buffer (gradients in the warm-up, ``Delta`` at syncs), made on first use."""
        if self._work is None:
            size = max(self.n_sync, self.n_warm)
            self._work = torch.zeros(size, dtype=self.dtype, device=self.device)
        return self._work

    @property
    def work(self) -> torch.Tensor:
        """The work buffer (allocated on first access)."""
        return self._work_buffer()

    # ------------------------------------------------------------------ decisions
    def next_action(self) -> str:
        """``"grad"``: only PALSGD has pull steps (:class:`~empirical.algorithms.
        local_variants.PALSGD`)."""
        return "grad"

    def sync_due_after(self, t: int) -> bool:
        """True when a sync follows local step ``t`` (:func:`theory.algorithm.is_sync_step`)."""
        return bool(is_sync_step(t, self.T0, self.config.H, self.config.sync_offset))

    @property
    def in_warmup(self) -> bool:
        return self.t < self.T0

    # ------------------------------------------------------------------ the step
    def micro_batch_done(self) -> None:
        """After each micro-batch's backward: with ``interleave_outer_steps``, take one of
        the zero-gradient outer steps left by the last sync and reset ``x <- z`` (the
        authors' code, docs/reference-faithful.md). A no-op otherwise."""
        if self.pending_outer > 0 and self.config.interleave_outer_steps:
            self._pending_outer_steps(1)

    def step(self, scaler: Any = None) -> StepInfo:
        """Finish local step ``t``: the algorithm's update (:meth:`_local_update`: warm-up
        all-reduce, pull or (scaled) inner step), ``zero_grad``, ``t += 1``, and a sync when
        due.

        ``scaler``: an optional ``torch.amp.GradScaler`` that scaled the loss (unscaled
        before the clip; a step with inf/NaN gradients is skipped by the scaler).
        Zero-gradient outer steps still pending from the last sync are taken first. With an
        overlapped sync (``sync_delay``) the outer step in flight lands after its step and
        a due sync starts instead of completing (:mod:`empirical.algorithms.overlap`).
        """
        s = self.t
        action = self.next_action()
        if self.pending_outer:
            self._pending_outer_steps(self.pending_outer)
        self._local_update(s, action, scaler)
        self.inner_optimizer.zero_grad(set_to_none=True)
        self.t = s + 1
        synced = landed = False
        if not self.local_started and self.t >= self.T0:
            self._start_local_phase()
            return StepInfo(action=action, synced=False, t=self.t)
        if self.in_flight is not None and s == self.in_flight.land_after:
            landed = self.finish()
        if self.sync_due_after(s):
            with self.clock.region("time_sync_s"):
                if self.config.sync_delay:
                    self._start_sync(s)
                else:
                    self._sync()
            synced = True
        return StepInfo(action=action, synced=synced, t=self.t, landed=landed)

    def _local_update(self, s: int, action: str, scaler: Any) -> None:
        """The algorithm's update of step ``s`` (``action``: :meth:`next_action`)."""
        raise NotImplementedError

    def _warmup_step(self, scaler: Any) -> None:
        """A warm-up step (``t < T0``): gradients averaged over ranks, then the inner step."""
        self._allreduce_grads()
        self._inner_step(0.0, scaler)
        self.stats["warmup_steps"] += 1
        self.stats["grad_steps"] += 1

    def _local_step(self, scaler: Any, p: float = 0.0) -> None:
        """A local gradient step: the inner step with learning rate ``alpha/(1-p)``."""
        self._inner_step(p, scaler)
        self.stats["grad_steps"] += 1

    def resolve_timings(self) -> None:
        """Add the device-timed intervals recorded so far and the consensus statistic of
        the last sync to ``stats`` (waits once on a GPU; steps and syncs never wait)."""
        super().resolve_timings()
        self._resolve_consensus()

    def _resolve_consensus(self) -> None:
        if self._consensus_pending is not None:
            self.stats["last_consensus"] = float(self._consensus_pending)
            self._consensus_pending = None

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
        bufs = self.anchor_buffers or {}
        out: dict[str, torch.Tensor] = {}
        use_z = self.z is not None and self.local_started
        for key, val in sd.items():
            i = index.get(id(val))
            if i is not None and use_z:
                assert self.z is not None
                src = full_tensor(self.z_views[i], val)  # gathered when sharded
            elif key in bufs:
                src = bufs[key]
            elif is_dtensor(val):
                src = val.detach().full_tensor()
            else:
                src = val.detach()
            out[key] = src.to(device or src.device, dtype=val.dtype, copy=True)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Counters, anchor, outer-optimizer state, buffer snapshot and statistics (copies).

        The coins need only ``t`` (counter-based); the position in the round follows from
        ``t``, ``T0``, ``H`` and ``sync_offset``.
        """
        self._resolve_consensus()
        return {
            "version": 1,
            "config": self.config.to_dict(),
            "t": self.t,
            "local_started": self.local_started,
            "pending_outer": self.pending_outer,
            "world_size": self.world_size,
            "z": None if self.z is None else self.z.detach().clone(),
            "outer": copy.deepcopy(self.outer.state_dict()) if self.outer is not None else {},
            "anchor_buffers": (
                None
                if self.anchor_buffers is None
                else {k: v.clone() for k, v in self.anchor_buffers.items()}
            ),
            "stats": dict(self.stats),
            "in_flight": self._in_flight_state(),
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_state_name(state)
        z = state.get("z")
        if (z is None) != (self.z is None) or (z is not None and z.numel() != self.n):
            raise UserInputError(
                "checkpoint anchor does not match this model/algorithm "
                f"(checkpoint: {None if z is None else z.numel()} values, here: "
                f"{None if self.z is None else self.n})"
            )
        self.t = int(state["t"])
        self.local_started = bool(state.get("local_started", self.t >= self.T0))
        self.pending_outer = int(state.get("pending_outer", 0))
        if z is not None and self.z is not None:
            self.z.copy_(z)
        if self.outer is not None:
            self.outer.load_state_dict(copy.deepcopy(state.get("outer", {})))
        ab = state.get("anchor_buffers")
        self.anchor_buffers = None if ab is None else {k: v.clone() for k, v in ab.items()}
        self.stats.update(state.get("stats", {}))
        self._consensus_pending = None
        self._coins = (0, [])
        flight = state.get("in_flight")
        if flight is not None and flight["sum"].numel() != self.n_sync:
            raise UserInputError(
                f"checkpoint's sync in flight holds {flight['sum'].numel()} values, this "
                f"model's sync buffer {self.n_sync}"
            )
        self._load_in_flight(flight)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held by the algorithm on the model's device: work buffer (0 until first
        used), anchor, outer state, buffer snapshot, the flat parameter buffer's room for
        averaged buffers and the consensus scalar (the parameters themselves are the
        model's); ``outer_state_offloaded`` is in host memory."""

        def size(t: torch.Tensor | None) -> int:
            return 0 if t is None else t.numel() * t.element_size()

        extra = 0 if self.flat is None else (self.n_sync - self.n) * self.flat.element_size()
        return {
            "work_buffer": size(self._work),
            "anchor": size(self.z),
            "outer_state": 0 if self.outer is None else self.outer.state_bytes(),
            "outer_state_offloaded": 0 if self.outer is None else self.outer.offloaded_bytes(),
            "anchor_buffers": sum(size(v) for v in (self.anchor_buffers or {}).values()),
            "flat_extra": extra,
        }
