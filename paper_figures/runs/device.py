"""torch, imported when asked (its start-up cost is seconds): the device and GPU count."""

from __future__ import annotations

from types import ModuleType

__all__ = ["torch_module", "current_device_kind", "cuda_device_count"]


def torch_module() -> ModuleType | None:
    """The ``torch`` module, imported on the first call (None when it is not installed)."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    return torch


def current_device_kind() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    torch = torch_module()
    return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"


def cuda_device_count() -> int:
    """The CUDA GPUs torch sees (0 without torch)."""
    torch = torch_module()
    return torch.cuda.device_count() if torch is not None and torch.cuda.is_available() else 0
