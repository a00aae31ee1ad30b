"""The anchor of the local algorithms: the global model ``z`` (a flat tensor, when it must
persist between syncs), the outer optimizer that steps on it, the zero-gradient outer steps
left over from a sync, and the buffers' snapshot with the buffer policy.

``z`` is stored for PALSGD (pulls go toward it), for an SGD/Nesterov outer optimizer (it
steps on it) and for the overlapped sync (workers restart from it while the all-reduce
runs); plain Local SGD with blocking averaging stores none (the average is formed at the
sync). Buffer policies at a sync: ``"average"`` averages the floating-point buffers
(BatchNorm statistics) in the sync's all-reduce and keeps them as the anchor's, leaving
integer buffers (``num_batches_tracked``) local; ``"anchor"`` resets every buffer to its
value at the end of the warm-up (the authors' code, Q10); ``"local"`` leaves buffers alone.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat_model import FlatModel
from empirical.algorithms.outer import OuterOptimizer

__all__ = ["Anchor"]


class Anchor:
    """The anchor ``z`` of ``model`` (a :class:`FlatModel`) under ``config``."""

    def __init__(self, model: FlatModel, config: AlgorithmConfig) -> None:
        self.model = model
        self.policy = config.buffers
        self.z: torch.Tensor | None = None
        self.z_views: list[torch.Tensor] = []
        self.outer: OuterOptimizer | None = None
        self.pending_outer = 0  # interleaved zero-gradient outer steps still to take
        self.buffers: dict[str, torch.Tensor] | None = None  # the buffers' snapshot
        if config.uses_anchor:
            self.z = torch.zeros(model.n, dtype=model.dtype, device=model.device)
            if config.outer != "average":
                self.outer = OuterOptimizer(
                    self.z,
                    config.outer,
                    float(config.gamma),
                    float(config.mu),
                    config.outer_steps_per_sync,
                    offload=config.offload_outer_state,
                )
            self.z_views = model.layout.views(self.z)

    @torch.no_grad()
    def start(self) -> None:
        """End of the warm-up: ``z <- x`` (workers are identical here) and the buffers'
        snapshot (policies ``"average"`` and ``"anchor"``)."""
        if self.z is not None:
            self.model.read_into(self.z)
        if self.policy != "local":
            self.buffers = {k: b.detach().clone() for k, b in self.model.named_buffers}

    @torch.no_grad()
    def reset_workers(self) -> None:
        """``x <- z`` on every parameter."""
        assert self.z is not None
        self.model.load(self.z)

    @torch.no_grad()
    def take_pending(self, count: int, stats: dict[str, Any]) -> None:
        """Take ``count`` of the pending zero-gradient outer steps, then ``x <- z`` (and the
        buffers reset under policy ``"anchor"``)."""
        assert self.outer is not None
        zeros = self.model.work()[: self.model.n]
        for _ in range(count):
            stats["outer_steps"] += self.outer.zero_step(zeros)
        self.pending_outer -= count
        self.reset_workers()
        if self.policy == "anchor" and self.buffers is not None:
            for k, b in self.model.named_buffers:
                b.copy_(self.buffers[k])

    def apply_buffer_policy(self, buf: torch.Tensor) -> None:
        """After a sync whose reduced (averaged) buffer is ``buf``: the buffer policy."""
        fm = self.model
        if self.policy == "average":
            if fm.avg_buffers:
                fm.buf_layout.scatter(buf, fm.float_buffers)
            self.buffers = {k: b.detach().clone() for k, b in fm.named_buffers}
        elif self.policy == "anchor" and self.buffers is not None:
            for k, b in fm.named_buffers:
                b.copy_(self.buffers[k])

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Copies of the anchor, the outer optimizer's state, the pending outer steps and
        the buffers' snapshot."""
        return {
            "pending_outer": self.pending_outer,
            "z": None if self.z is None else self.z.detach().clone(),
            "outer": copy.deepcopy(self.outer.state_dict()) if self.outer is not None else {},
            "anchor_buffers": (
                None if self.buffers is None else {k: v.clone() for k, v in self.buffers.items()}
            ),
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the anchor's size is checked by the caller)."""
        self.pending_outer = int(state.get("pending_outer", 0))
        z = state.get("z")
        if z is not None and self.z is not None:
            self.z.copy_(z)
        if self.outer is not None:
            self.outer.load_state_dict(copy.deepcopy(state.get("outer", {})))
        ab = state.get("anchor_buffers")
        self.buffers = None if ab is None else {k: v.clone() for k, v in ab.items()}

    def memory_bytes(self) -> dict[str, int]:
        """Bytes of the anchor, the outer state (on the device and offloaded) and the
        buffers' snapshot."""

        def size(t: torch.Tensor | None) -> int:
            return 0 if t is None else t.numel() * t.element_size()

        return {
            "anchor": size(self.z),
            "outer_state": 0 if self.outer is None else self.outer.state_bytes(),
            "outer_state_offloaded": 0 if self.outer is None else self.outer.offloaded_bytes(),
            "anchor_buffers": sum(size(v) for v in (self.buffers or {}).values()),
        }
