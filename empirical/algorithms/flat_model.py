"""The model as the local algorithms see it: its trainable parameters (this rank's chunks
when FSDP2 shards them) as views of ONE flat buffer, the layout of its floating-point
buffers behind them in the sync buffer, and a work buffer.

Flat parameters: when every trainable parameter has the buffer dtype and one device, the
parameters are re-pointed to views of ONE flat buffer at construction (as torch's
``model_averaging.utils.average_parameters`` re-points them after its all-reduce). A sync
then all-reduces the parameters in place (outer ``"average"``) or forms ``Delta_k = z - x_k``
in one pass, with no gather or scatter copies. Move the model to its device BEFORE building
the algorithm (``module.to`` would allocate new parameter tensors and break the views).

The sync buffer (``n_sync`` elements) holds the parameters (or ``Delta_k``), the averaged
floating-point buffers and one scalar (the consensus statistic); the warm-up buffer
(``n_warm`` elements) holds the gradients and one presence flag per parameter. Both live in
the work buffer, allocated on first use.
"""

from __future__ import annotations

import torch
from torch import nn

from core.errors import UserInputError
from empirical.algorithms.flat import FlatLayout, flat_dtype
from empirical.algorithms.fsdp import is_dtensor, local_view

__all__ = ["FlatModel"]


class FlatModel:
    """The trainable parameters of ``model`` and its buffers, laid out for one all-reduce.

    ``average_buffers``: the sync carries the floating-point buffers (buffer policy
    ``"average"``); otherwise it carries the parameters and the consensus scalar only.
    """

    def __init__(self, model: nn.Module, average_buffers: bool) -> None:
        self.module = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UserInputError("the model has no trainable parameters")
        # this rank's tensors: the parameters, or their chunks when FSDP2 shards them
        self.sharded = any(is_dtensor(p) for p in self.params)
        self.local_params = [local_view(p) for p in self.params]
        self.dtype = flat_dtype(self.local_params)
        self.device = self.local_params[0].device
        self.named_buffers: list[tuple[str, torch.Tensor]] = list(model.named_buffers())
        self.float_buffers = [b for _, b in self.named_buffers if b.is_floating_point()]
        self.layout = FlatLayout(self.local_params)
        n = self.n = self.layout.numel
        self.avg_buffers = average_buffers and bool(self.float_buffers)
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

    def work(self) -> torch.Tensor:
        """The work buffer (gradients in the warm-up, ``Delta`` at syncs), made on first use."""
        if self._work is None:
            size = max(self.n_sync, self.n_warm)
            self._work = torch.zeros(size, dtype=self.dtype, device=self.device)
        return self._work

    @torch.no_grad()
    def read_into(self, out: torch.Tensor) -> None:
        """``out <- x`` (the parameters as one flat vector of ``n`` elements)."""
        if self.flat is not None:
            out.copy_(self.flat[: self.n])
        else:
            self.layout.gather(self.local_params, out)

    @torch.no_grad()
    def load(self, values: torch.Tensor) -> None:
        """``x <- values`` on every parameter (``values``: a flat vector of ``n`` elements)."""
        if self.flat is not None:
            self.flat[: self.n].copy_(values)
        else:
            self.layout.scatter(values, self.local_params)

    @torch.no_grad()
    def shift(self, values: torch.Tensor, views: list[torch.Tensor], sign: float) -> None:
        """``x <- x + sign * values`` on every parameter (``views``: ``values`` shaped like
        the parameters)."""
        if self.flat is not None:
            self.flat[: self.n].add_(values, alpha=sign)
            return
        for p, v in zip(self.local_params, views, strict=True):
            p.add_(v.to(p.dtype), alpha=sign)

    def extra_bytes(self) -> int:
        """Bytes of the flat buffer beyond the parameters (averaged buffers, the consensus
        scalar); 0 without a flat buffer."""
        if self.flat is None:
            return 0
        return (self.n_sync - self.n) * self.flat.element_size()

    def work_bytes(self) -> int:
        """Bytes of the work buffer (0 until first used)."""
        return 0 if self._work is None else self._work.numel() * self._work.element_size()
