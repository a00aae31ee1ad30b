"""The calls that make the host wait for a GPU, counted under the fake of :mod:`fake_cuda`.

:class:`SyncCounter` counts the calls that make the host wait for a GPU (``.item()``,
``float()``/``int()``/``bool()`` of a tensor, ``.tolist()``, ``.cpu()``, ``.numpy()``,
data-dependent shapes, blocking host-to-device copies of host data,
``torch.cuda.synchronize`` and event/stream waits) while it is active. To see the copies
of host data, the fake keeps track of which tensors are on the faked GPU (those placed there
and everything computed from them, :mod:`residence`): ``tensor.device`` of such a tensor
reads as :data:`~residence.GPU_AS_CPU`, a CPU device object of its own, so that a tensor made
with ``device=t.device`` is known to be made on the GPU. Every tensor made on, or copied to,
the GPU from host data (``torch.tensor``/``as_tensor``/``asarray`` with a device, ``.to``/
``.cuda`` or ``copy_`` of a host tensor) is listed in :attr:`SyncCounter.copies`; those that
block (all but ``non_blocking=True`` copies of host tensors) are syncs too.

The fake's torch function mode (:class:`fake_cuda._CudaOnHost`) hands every call to
:func:`count_call`, and its CUDA events and streams report their waits with
:func:`note_sync`; both do nothing while no counter is active.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch

try:  # as harness.sync_counter (the tests) or as sync_counter (sitecustomize)
    from .residence import host_copy
except ImportError:
    from residence import host_copy

__all__ = ["SyncCounter", "count_call", "note_sync"]

_COUNTERS: list[SyncCounter] = []

_TENSOR = torch.Tensor
#: methods that copy a value to the host and so wait for the GPU
_TO_HOST = {
    _TENSOR.item,
    _TENSOR.__float__,
    _TENSOR.__int__,
    _TENSOR.__bool__,
    _TENSOR.__index__,
    _TENSOR.tolist,
    _TENSOR.numpy,
    _TENSOR.cpu,
}
#: operations whose output shape depends on the data (the host reads a count)
_DATA_SHAPED = {
    torch.nonzero,
    _TENSOR.nonzero,
    torch.masked_select,
    _TENSOR.masked_select,
    torch.unique,
    _TENSOR.unique,
    torch.equal,
    _TENSOR.equal,
    torch.allclose,
    _TENSOR.allclose,
}
_HOST_DATA_FACTORIES = {torch.tensor, torch.as_tensor}
#: the files of the fake, skipped when a counted call is attributed to a line of code
_OWN_FILES = ("fake_cuda.py", "sync_counter.py")


def _bool_index(args: tuple[Any, ...]) -> bool:
    idx = args[1] if len(args) > 1 else None
    items = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _device_copy(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``torch.tensor``/``as_tensor`` copies host data to a device. Under the fake a
    tensor's ``.device`` reads as the CPU, so a device given in any form but the literal
    ``"cpu"`` (how torch's optimizers place their host-side counters) is taken to be the GPU;
    an empty list copies nothing."""
    device = kwargs.get("device")
    if device is None or device == "cpu":
        return False
    data = args[0] if args else kwargs.get("data")
    if isinstance(data, list | tuple) and len(data) == 0:
        return False
    return func is torch.tensor or not isinstance(data, torch.Tensor)


def note_sync(what: str, tensor: Any = None) -> None:
    """Record a wait for the GPU in every active counter."""
    for counter in list(_COUNTERS):
        counter.note(what, tensor)


def _note_copy(what: str, counted_as_sync: bool) -> None:
    """Record a host-to-GPU copy in every active counter; a blocking one is a sync too
    (unless the existing rule of :func:`_device_copy` already counted it)."""
    for counter in list(_COUNTERS):
        counter.note_copy(what)
    if not what.endswith("(async)") and not counted_as_sync:
        note_sync(what)


def _count(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    name = getattr(func, "__name__", str(func))
    if func in _TO_HOST or func in _DATA_SHAPED:
        note_sync(f"Tensor.{name}", args[0] if args else None)
    elif func in (_TENSOR.__getitem__, _TENSOR.__setitem__) and _bool_index(args):
        note_sync(f"Tensor.{name} with a boolean mask")
    elif func in _HOST_DATA_FACTORIES and _device_copy(func, args, kwargs):
        note_sync(f"torch.{name}(host data, device=...)")


def count_call(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], placed: bool
) -> None:
    """Report one call of torch's (``placed``: it puts its result on the faked GPU) to the
    active counters: a sync, a copy of host data to the GPU, or nothing."""
    if not _COUNTERS:
        return
    _count(func, args, kwargs)
    copy = host_copy(func, args, kwargs, placed)
    if copy is not None:
        counted = func in _HOST_DATA_FACTORIES and _device_copy(func, args, kwargs)
        _note_copy(copy, counted)


class SyncCounter:
    """Counts host-device synchronisations while active (``with SyncCounter() as c``).

    ``host_side(t)`` says which tensors live on the host by design in a GPU run too (the
    inner optimizer's step counters, for one): reading them waits for nothing, so they are
    not counted. :meth:`paused` stops counting for a block (the host-side data pipeline).
    ``calls`` lists what was counted, with the line of code outside torch that made it.
    """

    def __init__(self, host_side: Callable[[torch.Tensor], bool] | None = None) -> None:
        self.calls: list[str] = []
        #: every tensor made on, or copied to, the GPU from host data, where it was made
        #: (``non_blocking=True`` copies of host tensors end in ``(async)``; the others are
        #: in :attr:`calls` too)
        self.copies: list[str] = []
        self.host_side = host_side

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Count nothing inside the block."""
        _COUNTERS.remove(self)
        try:
            yield
        finally:
            _COUNTERS.append(self)

    @property
    def count(self) -> int:
        return len(self.calls)

    def note(self, what: str, tensor: Any = None) -> None:
        if isinstance(tensor, torch.Tensor) and self.host_side and self.host_side(tensor):
            return
        self.calls.append(f"{what} at {_caller()}")

    def note_copy(self, what: str) -> None:
        """Record a host-to-GPU copy (see :attr:`copies`)."""
        self.copies.append(f"{what} at {_caller()}")

    def __enter__(self) -> SyncCounter:
        _COUNTERS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _COUNTERS.remove(self)


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and the fake's modules."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        f = frame.filename
        if "/torch/" not in f and not f.endswith(_OWN_FILES):
            return f"{os.path.basename(f)}:{frame.lineno}"
    return "?"
