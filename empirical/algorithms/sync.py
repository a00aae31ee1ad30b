"""The sync of the local algorithms (blocking; the overlapped one is
:mod:`empirical.algorithms.overlap`): ONE flat all-reduce of the parameters or ``Delta_k``,
the averaged floating-point buffers and the consensus scalar, then the outer step (or the
average), ``x_k <- z`` and the buffer policy.

* outer ``"average"``: the buffer carries ``x_k``; ``z <- mean_k x_k``;
* outer ``"sgd"``/``"nesterov"``: the buffer carries ``Delta_k = z - x_k``; one outer step
  on ``z`` with ``Delta = mean_k Delta_k`` (``outer_steps_per_sync - 1`` more on zero,
  at once or, with ``interleave_outer_steps``, one after each micro-batch of the next step).

The consensus distance ``mean_k ||x_k - xbar||^2`` (every ``consensus_interval``-th sync)
travels as one scalar of the same all-reduce: ``mean_k ||x_k - r||^2 - ||xbar - r||^2``
with ``r = z`` (exact up to rounding of the small quantities) or, for Local SGD without an
anchor, ``r = 0`` (absolute error about ``1e-7 * ||x||^2`` in fp32). It stays on the device
until :meth:`Sync.resolve_consensus` reads it (when statistics are logged), so a sync never
waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from core.errors import UserInputError
from empirical.algorithms.anchor import Anchor
from empirical.algorithms.base import Communicator, PendingReduce
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat_model import FlatModel
from empirical.timing import DeviceClock

__all__ = ["Sync", "SyncInFlight", "sq_norm"]

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


@dataclass
class SyncInFlight:
    """An overlapped sync between its start and its landing: the reduction, the step it
    lands after, and whether its consensus statistic is due."""

    reduce: PendingReduce
    land_after: int
    consensus_due: bool


class Sync:
    """The blocking sync of ``model`` toward ``anchor`` over ``comm`` (module docstring);
    counts syncs, outer steps and the consensus statistic in ``stats`` and times itself
    as ``time_sync_s`` on ``clock``."""

    #: the sync started and not landed yet (only an overlapped sync has one)
    in_flight: SyncInFlight | None = None

    def __init__(
        self,
        model: FlatModel,
        anchor: Anchor,
        comm: Communicator,
        config: AlgorithmConfig,
        stats: dict[str, Any],
        clock: DeviceClock,
    ) -> None:
        self.model, self.anchor, self.comm = model, anchor, comm
        self.config, self.stats, self.clock = config, stats, clock
        self.consensus_pending: torch.Tensor | None = None  # the last sync's, on the device

    # ------------------------------------------------------------------ the schedule
    def lands_after(self, s: int) -> bool:
        """True when an overlapped sync's outer step lands after step ``s`` (never here)."""
        return False

    def run(self, s: int) -> None:
        """The sync after local step ``s``."""
        with self.clock.region("time_sync_s"):
            self._sync()

    def finish(self) -> bool:
        """Land a sync still in flight (none for the blocking sync); ``True`` if one landed."""
        return False

    # ------------------------------------------------------------------ the sync
    def consensus_due(self) -> bool:
        every = self.config.consensus_interval
        return self.comm.active and every > 0 and self.stats["syncs"] % every == 0

    @torch.no_grad()
    def _sq_dist_to_anchor(self, x: torch.Tensor) -> torch.Tensor:
        """``||x - z||^2``, through the work buffer unless ``x`` lives in it."""
        z = self.anchor.z
        assert z is not None
        work = self.model.work()
        if x.untyped_storage().data_ptr() == work.untyped_storage().data_ptr():
            return sq_norm(x - z)
        tmp = work[: self.model.n]
        torch.sub(x, z, out=tmp)
        return sq_norm(tmp)

    @torch.no_grad()
    def fill_buffer(self, delta_path: bool, due: bool) -> torch.Tensor:
        """The buffer of the sync's one all-reduce: ``Delta_k = z - x_k`` (outer optimizer)
        or ``x_k`` (averaging), the floating-point buffers, and ``||x_k - r||^2`` when the
        consensus statistic is due (``r = z`` or 0; 0 otherwise)."""
        fm, z = self.model, self.anchor.z
        n, last = fm.n, fm.n_sync - 1
        if delta_path or fm.flat is None:
            buf = fm.work()[: fm.n_sync]
        else:
            buf = fm.flat[: fm.n_sync]  # the parameters themselves, reduced in place
        x = buf[:n]
        if delta_path:
            assert z is not None
            if fm.flat is not None:
                torch.sub(z, fm.flat[:n], out=x)  # Delta_k = z - x_k
            else:
                fm.layout.gather(fm.local_params, x)
                torch.sub(z, x, out=x)
        elif fm.flat is None:
            fm.layout.gather(fm.local_params, x)
        if not due:
            buf[last] = 0.0
        elif delta_path or z is None:
            buf[last] = sq_norm(x)
        else:
            buf[last] = self._sq_dist_to_anchor(x)
        if fm.avg_buffers:
            fm.buf_layout.gather(fm.float_buffers, buf)
        return buf

    @torch.no_grad()
    def _sync(self) -> None:
        """One sync: the all-reduce, the outer step (or the average), ``x_k <- z``, the
        consensus statistic and the buffer policy."""
        cfg, fm, anchor = self.config, self.model, self.anchor
        delta_path = cfg.outer != "average"
        due = self.consensus_due()
        buf = self.fill_buffer(delta_path, due)
        self.comm.all_reduce_sum(buf)
        if self.comm.size > 1:
            buf.div_(self.comm.size)
        x, mean_sq = buf[: fm.n], buf[fm.n_sync - 1]
        consensus = None
        if delta_path:
            assert anchor.outer is not None
            if due:
                consensus = mean_sq - sq_norm(x)
            steps = 1 if cfg.interleave_outer_steps else None
            self.stats["outer_steps"] += anchor.outer.step(x, steps=steps)
            if cfg.interleave_outer_steps:
                anchor.pending_outer = cfg.outer_steps_per_sync - 1
            anchor.reset_workers()
        else:
            if due:
                z = anchor.z
                consensus = mean_sq - (sq_norm(x) if z is None else self._sq_dist_to_anchor(x))
            if anchor.z is not None:
                anchor.z.copy_(x)
            if fm.flat is None:
                fm.layout.scatter(x, fm.local_params)
            self.stats["outer_steps"] += 1
        if consensus is not None:
            # a device scalar, read by resolve_consensus() when the statistics are logged
            self.consensus_pending = consensus.clamp_min(0.0)
        elif not self.comm.active:
            self.consensus_pending = None
            self.stats["last_consensus"] = 0.0
        self.stats["syncs"] += 1
        anchor.apply_buffer_policy(buf)

    def resolve_consensus(self) -> None:
        """Read the last sync's consensus statistic from the device into ``stats``."""
        if self.consensus_pending is not None:
            self.stats["last_consensus"] = float(self.consensus_pending)
            self.consensus_pending = None

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any] | None:
        """A sync in flight for a checkpoint (none for the blocking sync)."""
        return None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore :meth:`state_dict`; the consensus statistic not yet read is dropped. A
        sync in flight (a checkpoint of an overlapped sync) is refused."""
        self.consensus_pending = None
        if state is not None:
            raise UserInputError(
                "the checkpoint holds an overlapped sync in flight (sync_delay > 0); this "
                "algorithm's sync is blocking (sync_delay = 0): resume with the checkpoint's "
                "sync_delay"
            )
