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

Memory (beyond model and inner optimizer): one work buffer of the model's size (plus a few
scalars and the floating-point buffers) for all algorithms, the anchor ``z`` (one model
copy) when it must persist between syncs (PALSGD, SGD/Nesterov outer), and the outer
momentum (one more copy) for ``mu > 0``. Plain Local SGD stores no anchor.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from empirical.algorithms.base import (
    Communicator,
    DistributedAlgorithm,
    StepInfo,
    new_stats,
    timed,
)
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat import FlatLayout, flat_dtype, foreach_copy
from empirical.algorithms.outer import OuterOptimizer
from empirical.algorithms.slowlink import link_delay_fn
from theory.coins import pull_coins
from theory.validation import UserInputError

__all__ = ["LocalAlgorithm"]

_COIN_BLOCK = 1024  # coins drawn per vectorised call of theory.coins.pull_coins
_CHUNK = 1 << 16  # elements per chunk of the squared norms (partial sums added in float64)


def _sq_norm(v: torch.Tensor, ref: torch.Tensor | None = None) -> float:
    """``||v - ref||^2`` (or ``||v||^2``): dot products over chunks of ``_CHUNK`` elements in
    the buffer dtype, summed in float64 on the device with one host transfer (relative
    error about one fp32 rounding, at the cost of one fast pass; casting the whole vector
    to float64 would cost about 4x more)."""
    n = v.numel()
    if n == 0:
        return 0.0
    chunks = (n + _CHUNK - 1) // _CHUNK
    partial = torch.empty(chunks, dtype=torch.float64, device=v.device)
    tmp = None if ref is None else torch.empty(min(n, _CHUNK), dtype=v.dtype, device=v.device)
    for i in range(chunks):
        chunk = v[i * _CHUNK : (i + 1) * _CHUNK]
        if ref is not None:
            assert tmp is not None
            diff = tmp[: chunk.numel()]
            torch.sub(chunk, ref[i * _CHUNK : (i + 1) * _CHUNK], out=diff)
            chunk = diff
        partial[i] = torch.dot(chunk, chunk)
    return float(partial.sum())


class LocalAlgorithm(DistributedAlgorithm):
    """``local_sgd``, ``post_local_sgd``, ``diloco`` and ``palsgd`` (see the module docstring).

    ``model`` must be identical on all ranks or is made so: at construction rank 0's
    parameters and buffers are broadcast (as torch DDP does). Parameters that are not in
    any param group of ``inner_optimizer`` are synchronised but never pulled.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        model: nn.Module,
        inner_optimizer: torch.optim.Optimizer,
        *,
        process_group: Any = None,
    ) -> None:
        if config.name == "ddp":
            raise UserInputError("LocalAlgorithm does not run 'ddp'; use build_algorithm")
        self.config = config
        self.model = model
        self.inner_optimizer = inner_optimizer
        self.t = 0
        self.stats = new_stats()
        delay = link_delay_fn(config.comm_delay_s, config.comm_delay_per_byte_s)
        self.comm = Communicator(process_group, self.stats, delay=delay)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.T0 = config.warmup_steps

        self.params: list[nn.Parameter] = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UserInputError("the model has no trainable parameters")
        self.named_buffers: list[tuple[str, torch.Tensor]] = list(model.named_buffers())
        self.float_buffers = [b for _, b in self.named_buffers if b.is_floating_point()]
        self.dtype = flat_dtype(self.params)
        self.device = self.params[0].device
        self.layout = FlatLayout(self.params)
        n = self.layout.numel
        self.n = n
        self.avg_buffers = config.buffers == "average" and bool(self.float_buffers)
        self.buf_layout = FlatLayout(self.float_buffers, offset=n)
        nb = self.buf_layout.numel if self.avg_buffers else 0
        self.n_sync = n + nb + 1  # params (or Delta), averaged buffers, consensus scalar
        self.n_warm = n + len(self.params)  # gradients, presence flags
        self.work = torch.zeros(max(self.n_sync, self.n_warm), dtype=self.dtype, device=self.device)

        self.z: torch.Tensor | None = None
        self.outer: OuterOptimizer | None = None
        if config.uses_anchor:
            self.z = torch.zeros(n, dtype=self.dtype, device=self.device)
            if config.outer != "average":
                self.outer = OuterOptimizer(
                    self.z,
                    config.outer,
                    float(config.gamma),
                    float(config.mu),
                    config.outer_steps_per_sync,
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
        self._coins: tuple[int, list[bool]] = (0, [])
        self.local_started = False

        self._broadcast_initial_state()
        if self.T0 == 0:
            self._start_local_phase()

    # ------------------------------------------------------------------ decisions
    def next_action(self) -> str:
        """``"pull"`` iff PALSGD, local phase (``t >= T0``) and the coin of step ``t`` says so."""
        t = self.t
        if t < self.T0 or not self.config.has_pulls:
            return "grad"
        start, coins = self._coins
        if not start <= t < start + len(coins):
            # one vectorised call per block of steps; still a pure function of t
            cfg = self.config
            block = np.arange(t, t + _COIN_BLOCK)
            coins = pull_coins(
                cfg.seed,
                cfg.p,
                step=block,
                worker=self.rank,
                replica=0,
                shared=cfg.coins == "shared",
            ).tolist()
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
    def step(self) -> StepInfo:
        """Finish local step ``t``: warm-up all-reduce or pull or (scaled) inner step,
        ``zero_grad``, ``t += 1``, and a sync when due."""
        s = self.t
        action = self.next_action()
        if s < self.T0:
            self._allreduce_grads()
            self._clip(self.params)
            self._inner_step(0.0)
            self.stats["warmup_steps"] += 1
            self.stats["grad_steps"] += 1
        elif action == "pull":
            with timed(self.stats, "time_pull_s"):
                self._pull()
            self.stats["pull_steps"] += 1
        else:
            self._clip(self.params)
            self._inner_step(self.config.p)  # p > 0 only for PALSGD (AlgorithmConfig.validate)
            self.stats["grad_steps"] += 1
        self.inner_optimizer.zero_grad(set_to_none=True)
        self.t = s + 1
        synced = False
        if not self.local_started and self.t >= self.T0:
            self._start_local_phase()
        elif self.sync_due_after(s):
            with timed(self.stats, "time_sync_s"):
                self._sync()
            synced = True
        return StepInfo(action=action, synced=synced, t=self.t)

    def _inner_step(self, p: float) -> None:
        """The inner optimizer's step with every group's learning rate divided by ``1 - p``
        (restored afterwards); a plain step for ``p = 0``."""
        groups = self.inner_optimizer.param_groups
        with timed(self.stats, "time_inner_step_s"):
            if p == 0:
                self.inner_optimizer.step()
                return
            saved = [g["lr"] for g in groups]
            try:
                for g, lr in zip(groups, saved, strict=True):
                    g["lr"] = lr / (1.0 - p)
                self.inner_optimizer.step()
            finally:
                for g, lr in zip(groups, saved, strict=True):
                    g["lr"] = lr

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
        n, buf = self.n, self.work[: self.n_warm]
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
        have = (flags > 0).tolist()
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
        buf = self.work[: self.n]
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
            self.layout.gather(self.params, self.z)
        if self.config.buffers != "local":
            self.anchor_buffers = {k: b.detach().clone() for k, b in self.named_buffers}
        self.local_started = True

    @torch.no_grad()
    def _sync(self) -> None:
        cfg = self.config
        n, K = self.n, self.world_size
        buf = self.work[: self.n_sync]
        x = buf[:n]
        self.layout.gather(self.params, x)
        delta_path = cfg.outer != "average"
        if delta_path:
            assert self.z is not None
            torch.sub(self.z, x, out=x)  # Delta_k = z - x_k, in place
            buf[self.n_sync - 1] = _sq_norm(x)
        else:
            buf[self.n_sync - 1] = _sq_norm(x, self.z)
        if self.avg_buffers:
            self.buf_layout.gather(self.float_buffers, buf)
        self.comm.all_reduce_sum(buf)
        if K > 1:
            buf.div_(K)
        mean_sq = float(buf[self.n_sync - 1])
        if delta_path:
            assert self.outer is not None and self.z is not None
            consensus = mean_sq - _sq_norm(x)
            self.stats["outer_steps"] += self.outer.step(x)
            self.layout.scatter(self.z, self.params)
        else:
            consensus = mean_sq - _sq_norm(x, self.z)
            if self.z is not None:
                self.z.copy_(x)
            self.layout.scatter(x, self.params)
            self.stats["outer_steps"] += 1
        self.stats["last_consensus"] = max(consensus, 0.0) if self.comm.active else 0.0
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
        if z is not None and self.z is not None:
            self.z.copy_(z)
        if self.outer is not None:
            self.outer.load_state_dict(copy.deepcopy(state.get("outer", {})))
        ab = state.get("anchor_buffers")
        self.anchor_buffers = None if ab is None else {k: v.clone() for k, v in ab.items()}
        self.stats.update(state.get("stats", {}))
        self._coins = (0, [])

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held by the algorithm: work buffer, anchor, outer state, buffer snapshot."""

        def size(t: torch.Tensor | None) -> int:
            return 0 if t is None else t.numel() * t.element_size()

        return {
            "work_buffer": size(self.work),
            "anchor": size(self.z),
            "outer_state": 0 if self.outer is None else self.outer.state_bytes(),
            "anchor_buffers": sum(size(v) for v in (self.anchor_buffers or {}).values()),
        }
