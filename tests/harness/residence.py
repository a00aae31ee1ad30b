"""Which tensors are on the faked GPU, and which calls copy host data to it (the fake of
:mod:`fake_cuda`, where every tensor lives on the CPU).

A tensor is on the GPU when a call placed it there (a CUDA ``device=``, ``.to``, ``.cuda``,
or ``device=t.device`` of a GPU tensor ``t``) or a function made it from a GPU tensor; an
output that is one of the call's inputs (an in-place operation) keeps its residence. Such a
tensor's ``.device`` reads :data:`GPU_AS_CPU`: equal to ``torch.device("cpu")``, so the code
under test runs on the CPU, but an object of its own, so that a factory given it
(``torch.tensor(0.0, device=mask.device)``, the call of transformers 5.17's ``eager_mask``)
is known to make its tensor on the GPU.

:func:`host_copy` names the calls that make a tensor on, or copy one to, the GPU from host
data: ``torch.tensor``/``as_tensor``/``asarray`` with a GPU device (of data that is not a GPU
tensor; an empty list copies nothing), ``Tensor.new_tensor`` of a GPU tensor, ``.to``/
``.cuda`` of a host tensor and ``copy_`` of a host tensor into a GPU tensor; the last three
are asynchronous with ``non_blocking=True`` (a copy from pinned memory waits for nothing).
Limits: residence is followed through torch's Python-visible calls (the torch function
mode), not through autograd's backward kernels (whose outputs reach Python as ``.grad``, a
property read of a GPU tensor, and so are GPU tensors); a device rebuilt from its string
(``torch.device(str(t.device))``) reads as the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

__all__ = ["GPU_AS_CPU", "on_device", "placement", "track", "host_copy"]


def _is_cuda(dev: Any) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    return isinstance(dev, str) and dev.split(":")[0] == "cuda"


#: the tensors on the faked GPU, weakly held: placed there (a CUDA ``device=``, ``.to``,
#: ``.cuda``) or computed by any function from one of them
_ON_DEVICE: WeakIdKeyDictionary = WeakIdKeyDictionary()
#: what ``tensor.device`` reads for a tensor on the faked GPU: equal to ``torch.device("cpu")``
#: (the kernels run on the CPU) but this very object, so that a factory given it
#: (``torch.tensor(0.0, device=mask.device)``) is known to place its output on the GPU
GPU_AS_CPU = torch.device("cpu")
_DEVICE_PROPERTY = torch.Tensor.device
_TO_DEVICE = {torch.Tensor.to, torch.Tensor.cuda}
_TO_HOST_TENSOR = {torch.Tensor.cpu, torch.Tensor.pin_memory, torch.from_numpy}
#: factories that copy their (host) data, with the device given
_COPYING_FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray}


def on_device(t: Any) -> bool:
    """Whether ``t`` is a tensor on the faked GPU (see :data:`GPU_AS_CPU`)."""
    return isinstance(t, torch.Tensor) and t in _ON_DEVICE


def _device_target(dev: Any) -> bool | None:
    """True for the GPU, False for the host, None for no device."""
    if dev is None:
        return None
    if isinstance(dev, torch.Tensor):  # Tensor.to(other)
        return on_device(dev)
    return dev is GPU_AS_CPU or _is_cuda(dev)


def placement(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
    """Where ``func`` puts its output: True (the GPU), False (the host) or None (where its
    inputs are). Read before the mode rewrites the CUDA devices."""
    if func is torch.Tensor.cuda:
        return True
    if func in _TO_HOST_TENSOR:
        return False
    target = _device_target(kwargs.get("device"))
    if target is None and func is torch.Tensor.to:
        for a in args[1:]:
            if isinstance(a, str | torch.device | torch.Tensor):
                target = _device_target(a)
                break
    return target


def _tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors of ``obj`` and of its lists, tuples and dict values (one level)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, list | tuple):
        return [x for x in obj if isinstance(x, torch.Tensor)]
    if isinstance(obj, dict):
        return [x for x in obj.values() if isinstance(x, torch.Tensor)]
    return []


def track(func: Callable[..., Any], args: tuple, kwargs: dict, placed, result: Any) -> Any:
    """Mark the new tensors of ``result`` as on the GPU when ``func`` placed them there or
    made them from a GPU tensor (an output that is one of the inputs keeps its residence,
    unless moved to the GPU); a GPU tensor's ``.device`` reads :data:`GPU_AS_CPU`."""
    if getattr(func, "__self__", None) is _DEVICE_PROPERTY and func.__name__ == "__get__":
        return GPU_AS_CPU if args and on_device(args[0]) else result
    inputs = [t for a in (*args, *kwargs.values()) for t in _tensors(a)]
    if placed is None:
        placed = any(t in _ON_DEVICE for t in inputs)
    if placed:
        known = {id(t) for t in inputs} if func not in _TO_DEVICE else set()
        for t in _tensors(result):
            if id(t) not in known:
                _ON_DEVICE[t] = True
    return result


def _non_blocking(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``non_blocking=True`` given (by keyword, or ``.to``/``copy_``'s positional bool)."""
    if kwargs.get("non_blocking"):
        return True
    return any(a is True for a in args[1:])


def host_copy(func: Callable[..., Any], args: tuple, kwargs: dict, placed) -> str | None:
    """A description of the host-to-GPU copy that ``func`` makes, ``"... (async)"`` for a
    ``non_blocking=True`` copy of a host tensor (it waits for nothing), or None."""
    name = getattr(func, "__name__", str(func))
    if func in _COPYING_FACTORIES and placed:
        data = args[0] if args else kwargs.get("data", kwargs.get("obj"))
        empty = isinstance(data, list | tuple) and len(data) == 0  # copies nothing
        if not empty and not on_device(data):
            return f"torch.{name}(host data, device=GPU)"
    elif func is torch.Tensor.new_tensor and len(args) > 1 and not on_device(args[1]):
        if placed or (placed is None and on_device(args[0])):
            return "Tensor.new_tensor(host data) of a GPU tensor"
    elif func in _TO_DEVICE and placed and args and not on_device(args[0]):
        what = f"Tensor.{name}(GPU) of a host tensor"
        return what + " (async)" if _non_blocking(args, kwargs) else what
    elif func is torch.Tensor.copy_ and len(args) > 1 and on_device(args[0]):
        src = args[1]
        if isinstance(src, torch.Tensor) and not on_device(src):
            what = "Tensor.copy_ of a host tensor into a GPU tensor"
            return what + " (async)" if _non_blocking(args, kwargs) else what
    return None
