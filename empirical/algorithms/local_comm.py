"""The communication of the local algorithms: the initial broadcast, the warm-up gradient
all-reduce (one flat buffer, as DDP), the end of the warm-up and the sync (one flat
all-reduce of parameters or ``Delta_k``, averaged buffers and the consensus scalar),
followed by the outer step and the buffer policy. See :mod:`empirical.algorithms.local`."""

from __future__ import annotations

import torch

from empirical.algorithms.flat import foreach_copy
from empirical.algorithms.fsdp import local_view

__all__ = ["LocalCommunication", "sq_norm"]

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


class LocalCommunication:
    """Collective steps of :class:`~empirical.algorithms.local.LocalAlgorithm`."""

    @torch.no_grad()
    def _allreduce_grads(self) -> None:
        """Average gradients over ranks with ONE flat all-reduce (warm-up = DDP)."""
        if not self.comm.active:
            return
        n, buf = self.n, self._work_buffer()[: self.n_warm]
        grads = [None if p.grad is None else local_view(p.grad) for p in self.params]
        flags = buf[n:]
        views = self.layout.views(buf)
        complete = all(g is not None for g in grads)
        if complete:
            self.layout.gather(grads, buf)
            flags.fill_(1.0)
        else:
            for i, (v, g) in enumerate(zip(views, grads, strict=True)):
                if g is None:
                    v.zero_()
                else:
                    v.copy_(g)
                flags[i] = 0.0 if g is None else 1.0
        self.comm.all_reduce_sum(buf)
        buf[:n].div_(self.world_size)
        # ranks may differ in which parameters got gradients; when this rank has every one,
        # every flag is >= 1 after the sum and nothing needs to be read from the device
        have = [True] * len(grads) if complete else (flags > 0).tolist()
        for p, h in zip(self.params, have, strict=True):
            if h and p.grad is None:
                p.grad = torch.zeros_like(p)
        dst = [local_view(p.grad) for p, h in zip(self.params, have, strict=True) if h]
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
            self.layout.gather(self.local_params, buf)
            self.comm.broadcast(buf)
            self.layout.scatter(buf, self.local_params)
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
                self.layout.gather(self.local_params, self.z)
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
            self.layout.scatter(self.z, self.local_params)

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

    # ------------------------------------------------------------------ the sync
    @torch.no_grad()
    def _fill_sync_buffer(self, delta_path: bool, due: bool) -> torch.Tensor:
        """The buffer of the sync's one all-reduce: ``Delta_k = z - x_k`` (outer optimizer)
        or ``x_k`` (averaging), the floating-point buffers, and ``||x_k - r||^2`` when the
        consensus statistic is due (``r = z`` or 0; 0 otherwise)."""
        n, last = self.n, self.n_sync - 1
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
                self.layout.gather(self.local_params, x)
                torch.sub(self.z, x, out=x)
        elif self.flat is None:
            self.layout.gather(self.local_params, x)
        if not due:
            buf[last] = 0.0
        elif delta_path or self.z is None:
            buf[last] = sq_norm(x)
        else:
            buf[last] = self._sq_dist_to_anchor(x)
        if self.avg_buffers:
            self.buf_layout.gather(self.float_buffers, buf)
        return buf

    @torch.no_grad()
    def _sync(self) -> None:
        """One sync: the all-reduce, the outer step (or the average), ``x_k <- z``, the
        consensus statistic and the buffer policy."""
        cfg = self.config
        delta_path = cfg.outer != "average"
        due = self._consensus_due()
        buf = self._fill_sync_buffer(delta_path, due)
        self.comm.all_reduce_sum(buf)
        if self.world_size > 1:
            buf.div_(self.world_size)
        x, mean_sq = buf[: self.n], buf[self.n_sync - 1]
        consensus = None
        if delta_path:
            assert self.outer is not None
            if due:
                consensus = mean_sq - sq_norm(x)
            steps = 1 if cfg.interleave_outer_steps else None
            self.stats["outer_steps"] += self.outer.step(x, steps=steps)
            if cfg.interleave_outer_steps:
                self.pending_outer = cfg.outer_steps_per_sync - 1
            self._params_to_anchor()
        else:
            if due:
                consensus = mean_sq - (sq_norm(x) if self.z is None else self._sq_dist_to_anchor(x))
            if self.z is not None:
                self.z.copy_(x)
            if self.flat is None:
                self.layout.scatter(x, self.local_params)
            self.stats["outer_steps"] += 1
        if consensus is not None:
            # a device scalar, read by resolve_timings() when the statistics are logged
            self._consensus_pending = consensus.clamp_min(0.0)
        elif not self.comm.active:
            self._consensus_pending = None
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
