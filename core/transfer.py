"""Host arrays to a device without making the host wait (imports torch: for the modules
that compute with it, never at a command's start-up)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["to_device_async"]


def to_device_async(a: np.ndarray, device: torch.device) -> torch.Tensor:
    """``a`` on ``device`` with one copy: to a GPU from pinned memory with
    ``non_blocking=True`` (the host goes on at once; the copy is ordered on the current
    stream before the kernels that read it), elsewhere ``a``'s own memory when it can be."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
