"""Flat-buffer helpers: many tensors <-> one contiguous 1-D buffer.

A sync all-reduces ONE flat buffer instead of one call per tensor (per-call latency
dominates for models with hundreds of small tensors). :class:`FlatLayout` records where
each tensor lives in the buffer and copies between the two with ``torch._foreach_copy_``
(one kernel launch per dtype group on GPU, no temporary copies).

The buffer dtype is ``float64`` if any tensor is ``float64`` and ``float32`` otherwise, so
that half/bfloat16 models are reduced in fp32 and double models lose nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["FlatLayout", "flat_dtype", "foreach_copy"]


def flat_dtype(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    """``float64`` if any tensor is double precision, else ``float32``."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def foreach_copy(dst: list[torch.Tensor], src: list[torch.Tensor]) -> None:
    """``dst[i].copy_(src[i])`` for every pair, with one ``torch._foreach_copy_`` where torch
    allows it (casting to each destination's dtype); nothing for empty lists."""
    if not dst:
        return
    try:
        torch._foreach_copy_(dst, src)
    except (RuntimeError, TypeError, AttributeError):  # older torch / mixed devices
        for d, s in zip(dst, src, strict=True):
            d.copy_(s)


class FlatLayout:
    """Positions of ``tensors`` (in order) inside a flat buffer of ``numel`` elements.

    ``views(buf)`` returns views of ``buf`` shaped like the tensors; :meth:`gather` copies
    the tensors into the buffer, :meth:`scatter` copies the buffer back into them. Offsets
    start at ``offset`` so that several layouts can share one buffer.
    """

    def __init__(self, tensors: Sequence[torch.Tensor], offset: int = 0) -> None:
        self.shapes = [t.shape for t in tensors]
        self.numels = [t.numel() for t in tensors]
        self.offsets: list[int] = []
        pos = offset
        for n in self.numels:
            self.offsets.append(pos)
            pos += n
        self.start = offset
        self.end = pos

    @property
    def numel(self) -> int:
        """Number of elements covered by this layout."""
        return self.end - self.start

    def __len__(self) -> int:
        return len(self.shapes)

    def views(self, buf: torch.Tensor) -> list[torch.Tensor]:
        """Views of ``buf`` shaped like the tensors (no copy)."""
        return [
            buf[o : o + n].view(s)
            for o, n, s in zip(self.offsets, self.numels, self.shapes, strict=True)
        ]

    def gather(self, tensors: Sequence[torch.Tensor], buf: torch.Tensor) -> None:
        """Copy ``tensors`` into their slots of ``buf`` (casting to the buffer dtype)."""
        with torch.no_grad():
            foreach_copy(self.views(buf), [t.detach() for t in tensors])

    def scatter(self, buf: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
        """Copy the slots of ``buf`` back into ``tensors`` (casting to each tensor's dtype)."""
        with torch.no_grad():
            foreach_copy([t.detach() for t in tensors], self.views(buf))
