"""Local SGD, Post-Local SGD, DiLoCo and PALSGD: local steps, periodic syncs.

One class covers the four algorithms; they differ only in the configuration
(:mod:`empirical.algorithms.config`):

* warm-up (``t < T0``, not ``local_sgd``): gradients all-reduced as ONE flat buffer each
  step, then the inner step. Equivalent to DDP (a test shows equality).
* local phase, step ``t``: PALSGD draws the coin ``theory.coins.pull_coins(seed, p, step=t,
  worker=rank, replica=0, shared=coins == "shared")``. Pull (Naganuma et al. 2025,
  Algorithm 1): ``x <- x - (alpha*eta/p)(x - z)`` on every parameter tensor (``alpha`` = the
  tensor's param-group learning rate), no forward/backward. Gradient step: the inner
  optimizer with learning rate ``alpha/(1-p)`` (restored afterwards); the expected update is
  ``alpha*(g + eta*(x - z))``. Other algorithms: a plain inner step.
* sync, right after step ``t >= T0`` with ``(t - T0 + 1 + sync_offset) % H == 0``: ONE
  flat all-reduce, then

  - outer ``"average"``: the buffer carries ``x_k``; ``z <- mean_k x_k``;
  - outer ``"sgd"``/``"nesterov"``: the buffer carries ``Delta_k = z - x_k``; one outer step
    on ``z`` with ``Delta = mean_k Delta_k`` (``outer_steps_per_sync - 1`` more on zero);

  then every worker sets ``x_k <- z`` and applies the buffer policy: ``"average"``
  averages the floating-point buffers (BatchNorm statistics) in the same all-reduce and
  leaves integer buffers (``num_batches_tracked``) local; ``"anchor"`` resets every buffer
  to its value at the end of the warm-up (the authors' code, Q10); ``"local"`` leaves
  buffers alone. The buffer also carries one scalar for the consensus distance
  ``mean_k ||x_k - xbar||^2`` (``stats["last_consensus"]``), computed as
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
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from empirical.algorithms.base import (
    Communicator,
    DistributedAlgorithm,
    StepInfo,
    new_stats,
)
from empirical.algorithms.coins import as_coin_source
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat import FlatLayout, flat_dtype, foreach_copy
from empirical.algorithms.outer import OuterOptimizer
from empirical.algorithms.slowlink import link_delay_fn
from empirical.timing import DeviceClock
from theory.validation import UserInputError

__all__ = ["LocalAlgorithm"]

_COIN_BLOCK = 1024  # coins drawn per vectorised call of theory.coins.pull_coins
_CHUNK = 1 << 16  # elements per row of the squared norms (row sums added in float64)


def sq_norm(v: torch.Tensor) -> torch.Tensor:
    """``||v||^2`` of a 1-D tensor as a float64 0-d tensor on ``v``'s device.

    One reduction kernel over ``v`` viewed as rows of ``_CHUNK`` elements (norms in the
    buffer dtype), the row results squared and summed in float64, plus one dot product for
    the tail: relative error about one fp32 rounding, a constant number of kernel launches
    (no per-chunk host loop) and no host transfer.
    """
    n = v.numel()
    m = n - n % _CHUNK
    total = torch.zeros((), dtype=torch.float64, device=v.device)
    if m:
        rows = torch.linalg.vector_norm(v[:m].view(-1, _CHUNK), dim=1)
        total += rows.to(torch.float64).square().sum()
    if m < n:
        tail = v[m:]
        total += torch.dot(tail, tail).to(torch.float64)
    return total


class LocalAlgorithm(DistributedAlgorithm):
    """``local_sgd``, ``post_local_sgd``, ``diloco`` and ``palsgd`` (see the module docstring).

    ``model`` must be identical on all ranks or is made so: at construction rank 0's
    parameters and buffers are broadcast (as torch DDP does). Parameters that are not in
    any param group of ``inner_optimizer`` are synchronised but never pulled.

    ``coin_source`` (PALSGD): ``None`` for the counter-based coins of
    :func:`theory.coins.pull_coins`, a callable ``(steps, worker) -> bool array`` or a
    recorded trace (:func:`empirical.algorithms.coins.recorded_coins`).
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
        if config.name == "ddp":
            raise UserInputError("LocalAlgorithm does not run 'ddp'; use build_algorithm")
        self.config = config
        self.model = model
        self.inner_optimizer = inner_optimizer
        self.t = 0
        self.stats = new_stats()
        self.params: list[nn.Parameter] = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UserInputError("the model has no trainable parameters")
        self.dtype = flat_dtype(self.params)
        self.device = self.params[0].device
        self.clock = DeviceClock(self.device, self.stats)
        delay = link_delay_fn(config.comm_delay_s, config.comm_delay_per_byte_s)
        self.comm = Communicator(process_group, self.stats, delay=delay, clock=self.clock)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.T0 = config.warmup_steps

        self.named_buffers: list[tuple[str, torch.Tensor]] = list(model.named_buffers())
        self.float_buffers = [b for _, b in self.named_buffers if b.is_floating_point()]
        self.layout = FlatLayout(self.params)
        n = self.layout.numel
        self.n = n
        self.avg_buffers = config.buffers == "average" and bool(self.float_buffers)
        self.buf_layout = FlatLayout(self.float_buffers, offset=n)
        nb = self.buf_layout.numel if self.avg_buffers else 0
        self.n_sync = n + nb + 1  # params (or Delta), averaged buffers, consensus scalar
        self.n_warm = n + len(self.params)  # gradients, presence flags
        self._work: torch.Tensor | None = None

        # the parameters become views of ONE flat buffer when they share dtype and device
        self.flat: torch.Tensor | None = None
        if all(p.dtype == self.dtype and p.device == self.device for p in self.params):
            self.flat = torch.zeros(self.n_sync, dtype=self.dtype, device=self.device)
            with torch.no_grad():
                self.layout.gather(self.params, self.flat)
                for p, view in zip(self.params, self.layout.views(self.flat), strict=True):
                    p.data = view

        self.z: torch.Tensor | None = None
        self.outer: OuterOptimizer | None = None
        self.pending_outer = 0  # interleaved zero-gradient outer steps still to take
        if config.uses_anchor:
            self.z = torch.zeros(n, dtype=self.dtype, device=self.device)
            if config.outer != "average":
                self.outer = OuterOptimizer(
                    self.z,
                    config.outer,
                    float(config.gamma),
                    float(config.mu),
                    config.outer_steps_per_sync,
                    offload=config.offload_outer_state,
                )
            self.z_views = self.layout.views(self.z)
        self.anchor_buffers: dict[str, torch.Tensor] | None = None

        # pull groups: (param-group index, params, anchor views), in model order
        group_of = {
            id(p): gi for gi, g in enumerate(inner_optimizer.param_groups) for p in g["params"]
        }
        self.pull_groups: list[tuple[int, list[torch.Tensor], list[torch.Tensor]]] = []
        if config.has_pulls:
            if config.pull_first_tensor_only:
                self.pull_groups = [(0, [self.params[0]], [self.z_views[0]])]
            else:
                by_group: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
                for p, zv in zip(self.params, self.z_views, strict=True):
                    gi = group_of.get(id(p))
                    if gi is not None:
                        ps, zs = by_group.setdefault(gi, ([], []))
                        ps.append(p)
                        zs.append(zv)
                self.pull_groups = [(gi, ps, zs) for gi, (ps, zs) in sorted(by_group.items())]
        self.coin_source = as_coin_source(
            coin_source, config.seed, config.p, config.coins == "shared"
        )
        self._coins: tuple[int, list[bool]] = (0, [])
        self.local_started = False

        self._broadcast_initial_state()
        if self.T0 == 0:
            self._start_local_phase()

    # ------------------------------------------------------------------ buffers
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
        """``"pull"`` iff PALSGD, local phase (``t >= T0``) and the coin of step ``t`` says so."""
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

    def sync_due_after(self, t: int) -> bool:
        """True when a sync follows local step ``t`` (``t >= T0`` and the round is complete)."""
        return t >= self.T0 and (t - self.T0 + 1 + self.config.sync_offset) % self.config.H == 0

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
        """Finish local step ``t``: warm-up all-reduce or pull or (scaled) inner step,
        ``zero_grad``, ``t += 1``, and a sync when due.

        ``scaler``: an optional ``torch.amp.GradScaler`` that scaled the loss (unscaled
        before the clip; a step with inf/NaN gradients is skipped by the scaler).
        Zero-gradient outer steps still pending from the last sync are taken first.
        """
        s = self.t
        action = self.next_action()
        if self.pending_outer:
            self._pending_outer_steps(self.pending_outer)
        if s < self.T0:
            self._allreduce_grads()
            self._inner_step(0.0, scaler)
            self.stats["warmup_steps"] += 1
            self.stats["grad_steps"] += 1
        elif action == "pull":
            self._warn_if_gradients(s)
            with self.clock.region("time_pull_s"):
                self._pull()
            self.stats["pull_steps"] += 1
        else:
            self._inner_step(self.config.p, scaler)  # p > 0 only for PALSGD
            self.stats["grad_steps"] += 1
        self.inner_optimizer.zero_grad(set_to_none=True)
        self.t = s + 1
        synced = False
        if not self.local_started and self.t >= self.T0:
            self._start_local_phase()
        elif self.sync_due_after(s):
            with self.clock.region("time_sync_s"):
                self._sync()
            synced = True
        return StepInfo(action=action, synced=synced, t=self.t)

    def _warn_if_gradients(self, s: int) -> None:
        if any(q.grad is not None for q in self.params):
            self.stats["discarded_backward_steps"] += 1
            warnings.warn(
                f"step {s} is a pull step but the parameters hold gradients: a pull uses no "
                "gradient, so that backward pass is discarded; run forward/backward only when "
                "next_action() == 'grad', or use train_step()",
                RuntimeWarning,
                stacklevel=3,
            )

    @torch.no_grad()
    def _pull(self) -> None:
        cfg = self.config
        if cfg.eta == 0:
            return
        groups = self.inner_optimizer.param_groups
        for gi, ps, zs in self.pull_groups:
            c = float(groups[gi]["lr"]) * cfg.eta / cfg.p
            same = [zv.dtype == pp.dtype for pp, zv in zip(ps, zs, strict=True)]
            if all(same):
                torch._foreach_lerp_(ps, zs, c)
            else:
                for pp, zv in zip(ps, zs, strict=True):
                    pp.lerp_(zv.to(pp.dtype), c)

    # ------------------------------------------------------------------ communication
    @torch.no_grad()
    def _allreduce_grads(self) -> None:
        """Average gradients over ranks with ONE flat all-reduce (warm-up = DDP)."""
        if not self.comm.active:
            return
        n, buf = self.n, self._work_buffer()[: self.n_warm]
        grads = [p.grad for p in self.params]
        flags = buf[n:]
        views = self.layout.views(buf)
        present = [g is not None for g in grads]
        if all(present):
            self.layout.gather(grads, buf)
            flags.fill_(1.0)
        else:
            for v, g, f in zip(views, grads, range(len(grads)), strict=True):
                if g is None:
                    v.zero_()
                    flags[f] = 0.0
                else:
                    v.copy_(g)
                    flags[f] = 1.0
        self.comm.all_reduce_sum(buf)
        buf[:n].div_(self.world_size)
        have = (flags > 0).tolist()  # ranks may differ in which parameters got gradients
        for p, h in zip(self.params, have, strict=True):
            if h and p.grad is None:
                p.grad = torch.zeros_like(p)
        dst = [p.grad for p, h in zip(self.params, have, strict=True) if h]
        src = [v for v, h in zip(views, have, strict=True) if h]
        foreach_copy(dst, src)

    @torch.no_grad()
    def _broadcast_initial_state(self) -> None:
        """Make every rank start from rank 0's parameters and buffers."""
        if not self.comm.active:
            return
        if self.flat is not None:
            self.comm.broadcast(self.flat[: self.n])
        else:
            buf = self._work_buffer()[: self.n]
            self.layout.gather(self.params, buf)
            self.comm.broadcast(buf)
            self.layout.scatter(buf, self.params)
        for p in self.model.parameters():
            if not p.requires_grad:  # frozen parameters: never synced later, equal from here on
                self.comm.broadcast(p.data)
        for _, b in self.named_buffers:
            self.comm.broadcast(b)

    @torch.no_grad()
    def _start_local_phase(self) -> None:
        """End of warm-up: ``z <- x`` (workers are identical here) and the buffer snapshot."""
        if self.z is not None:
            if self.flat is not None:
                self.z.copy_(self.flat[: self.n])
            else:
                self.layout.gather(self.params, self.z)
        if self.config.buffers != "local":
            self.anchor_buffers = {k: b.detach().clone() for k, b in self.named_buffers}
        self.local_started = True

    @torch.no_grad()
    def _params_to_anchor(self) -> None:
        """``x <- z`` on every parameter."""
        assert self.z is not None
        if self.flat is not None:
            self.flat[: self.n].copy_(self.z)
        else:
            self.layout.scatter(self.z, self.params)

    @torch.no_grad()
    def _pending_outer_steps(self, count: int) -> None:
        """Take ``count`` of the pending zero-gradient outer steps, then ``x <- z``."""
        assert self.outer is not None
        zeros = self._work_buffer()[: self.n]
        for _ in range(count):
            self.stats["outer_steps"] += self.outer.zero_step(zeros)
        self.pending_outer -= count
        self._params_to_anchor()
        if self.config.buffers == "anchor" and self.anchor_buffers is not None:
            for k, b in self.named_buffers:
                b.copy_(self.anchor_buffers[k])

    def _consensus_due(self) -> bool:
        every = self.config.consensus_interval
        return self.comm.active and every > 0 and self.stats["syncs"] % every == 0

    @torch.no_grad()
    def _sq_dist_to_anchor(self, x: torch.Tensor) -> torch.Tensor:
        """``||x - z||^2``, through the work buffer unless ``x`` lives in it."""
        assert self.z is not None
        work = self._work_buffer()
        if x.untyped_storage().data_ptr() == work.untyped_storage().data_ptr():
            return sq_norm(x - self.z)
        tmp = work[: self.n]
        torch.sub(x, self.z, out=tmp)
        return sq_norm(tmp)

    @torch.no_grad()
    def _sync(self) -> None:
        cfg = self.config
        n, K, last = self.n, self.world_size, self.n_sync - 1
        delta_path = cfg.outer != "average"
        due = self._consensus_due()
        if delta_path or self.flat is None:
            buf = self._work_buffer()[: self.n_sync]
        else:
            buf = self.flat[: self.n_sync]  # the parameters themselves, reduced in place
        x = buf[:n]
        if delta_path:
            assert self.z is not None
            if self.flat is not None:
                torch.sub(self.z, self.flat[:n], out=x)  # Delta_k = z - x_k
            else:
                self.layout.gather(self.params, x)
                torch.sub(self.z, x, out=x)
        elif self.flat is None:
            self.layout.gather(self.params, x)
        if due:  # mean_k ||x_k - r||^2 travels in the same all-reduce
            if delta_path or self.z is None:
                buf[last] = sq_norm(x)
            else:
                buf[last] = self._sq_dist_to_anchor(x)
        else:
            buf[last] = 0.0
        if self.avg_buffers:
            self.buf_layout.gather(self.float_buffers, buf)
        self.comm.all_reduce_sum(buf)
        if K > 1:
            buf.div_(K)
        consensus = None
        if delta_path:
            assert self.outer is not None
            if due:
                consensus = buf[last] - sq_norm(x)
            if cfg.interleave_outer_steps:
                self.stats["outer_steps"] += self.outer.step(x, steps=1)
                self.pending_outer = cfg.outer_steps_per_sync - 1
            else:
                self.stats["outer_steps"] += self.outer.step(x)
            self._params_to_anchor()
        else:
            if due:
                ref = sq_norm(x) if self.z is None else self._sq_dist_to_anchor(x)
                consensus = buf[last] - ref
            if self.z is not None:
                self.z.copy_(x)
            if self.flat is None:
                self.layout.scatter(x, self.params)
            self.stats["outer_steps"] += 1
        if consensus is not None:
            self.stats["last_consensus"] = max(float(consensus), 0.0)
        elif not self.comm.active:
            self.stats["last_consensus"] = 0.0
        self.stats["syncs"] += 1
        self._apply_buffer_policy(buf)

    def _apply_buffer_policy(self, buf: torch.Tensor) -> None:
        policy = self.config.buffers
        if policy == "average":
            if self.avg_buffers:
                self.buf_layout.scatter(buf, self.float_buffers)
            self.anchor_buffers = {k: b.detach().clone() for k, b in self.named_buffers}
        elif policy == "anchor" and self.anchor_buffers is not None:
            for k, b in self.named_buffers:
                b.copy_(self.anchor_buffers[k])

    # ------------------------------------------------------------------ state
    @torch.no_grad()
    def anchor_state_dict(self) -> dict[str, torch.Tensor]:
        """Model state with ``z`` as parameters and the anchor's buffers (a copy).

        Without a stored anchor (Local SGD with averaging, or before the warm-up ends)
        the parameters are this rank's current ones, which equal the global model right
        after a sync. Buffers: the values kept at the last sync (policies ``"average"``,
        ``"anchor"``) or the current local ones (``"local"``).
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
                out[key] = self.z_views[i].to(val.dtype).clone()
            elif key in bufs:
                out[key] = bufs[key].clone()
            else:
                out[key] = val.detach().clone()
        return out

    def state_dict(self) -> dict[str, Any]:
        """Counters, anchor, outer-optimizer state, buffer snapshot and statistics (copies).

        The coins need only ``t`` (counter-based); the position in the round follows from
        ``t``, ``T0``, ``H`` and ``sync_offset``.
        """
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
        self._coins = (0, [])

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
