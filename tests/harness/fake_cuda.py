"""CUDA faked at the process level, for the tests of the GPU code path on a machine without
a GPU.

:func:`install` makes this process look like a node with ``count`` GPUs to the code under
test, while every kernel still runs on the CPU:

* ``torch.cuda.is_available``/``device_count``/``set_device``/``current_device``/
  ``get_device_name``, the CUDA RNG state functions, ``torch.cuda.Event``,
  ``current_stream`` and ``synchronize`` are replaced; ``set_device`` refuses an index
  past ``count`` as the driver does ("invalid device ordinal");
* a torch function mode puts every tensor that would be created on or moved to a CUDA
  device on the CPU instead (``device=`` arguments, ``Tensor.to``/``cuda``, pinned memory,
  ``torch.load``'s ``map_location``);
* ``torch.distributed.init_process_group`` with NCCL runs gloo instead (NCCL needs real
  GPUs), after checking what NCCL would need: a ``device_id`` that is the device this
  process bound with ``set_device`` before the group exists.

Every binding and every process group is recorded as one JSON line per event in
``$PALSGD_FAKE_GPU_LOG/<pid>.jsonl`` (with the rank, local rank and restart count of the
torchrun environment), so that a test can check what each rank of a real launch did.

:class:`SyncCounter` counts the calls that make the host wait for a GPU (``.item()``,
``float()``/``int()``/``bool()`` of a tensor, ``.tolist()``, ``.cpu()``, ``.numpy()``,
data-dependent shapes, blocking host-to-device copies of host data,
``torch.cuda.synchronize`` and event/stream waits) while it is active. To see the copies
of host data, the fake keeps track of which tensors are on the faked GPU (those placed there
and everything computed from them): ``tensor.device`` of such a tensor reads as
:data:`GPU_AS_CPU`, a CPU device object of its own, so that a tensor made with
``device=t.device`` is known to be made on the GPU. Every tensor made on, or copied to, the
GPU from host data (``torch.tensor``/``as_tensor``/``asarray`` with a device, ``.to``/
``.cuda`` or ``copy_`` of a host tensor) is listed in :attr:`SyncCounter.copies`; those that
block (all but ``non_blocking=True`` copies of host tensors) are syncs too.

The sitecustomize module next to this file calls :func:`install` at interpreter start
when ``PALSGD_FAKE_GPUS`` is set, so putting this directory on ``PYTHONPATH`` fakes CUDA in
every process of a launch (the launcher, torchrun's agent and each rank).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

try:  # as harness.fake_cuda (the tests) or as fake_cuda (sitecustomize)
    from .residence import GPU_AS_CPU, host_copy, on_device, placement, track
except ImportError:
    from residence import GPU_AS_CPU, host_copy, on_device, placement, track

__all__ = [
    "install",
    "installed",
    "on_device",
    "SyncCounter",
    "read_log",
    "GPU_AS_CPU",
    "ENV_COUNT",
    "ENV_LOG",
]

#: environment variables read by :func:`install_from_env` (sitecustomize)
ENV_COUNT = "PALSGD_FAKE_GPUS"
ENV_LOG = "PALSGD_FAKE_GPU_LOG"

_STATE: dict[str, Any] = {"count": 0, "current": 0, "log": None, "mode": None, "rng": {}}
_COUNTERS: list[SyncCounter] = []


# ----------------------------------------------------------------------------- the record
def _record(event: str, **fields: Any) -> None:
    log = _STATE["log"]
    if log is None:
        return
    env = os.environ
    rec = {
        "event": event,
        "pid": os.getpid(),
        "rank": env.get("RANK"),
        "local_rank": env.get("LOCAL_RANK"),
        "world_size": env.get("WORLD_SIZE"),
        "restart": env.get("TORCHELASTIC_RESTART_COUNT"),
        **fields,
    }
    with open(Path(log) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec) + "\n")


def read_log(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every event recorded under ``directory`` (all processes), in file order."""
    out: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


# ----------------------------------------------------------------------------- devices
def _is_cuda(dev: Any) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    return isinstance(dev, str) and dev.split(":")[0] == "cuda"


def _index(dev: Any) -> int:
    if isinstance(dev, int):
        return dev
    d = torch.device(dev)
    return _STATE["current"] if d.index is None else int(d.index)


def _set_device(dev: Any) -> None:
    index = _index(dev)
    if not 0 <= index < _STATE["count"]:
        raise RuntimeError("CUDA error: invalid device ordinal")
    _STATE["current"] = index
    _record("set_device", index=index)


def _rng_state(device: Any = "cuda") -> torch.Tensor:
    index = _index(device)
    if not 0 <= index < _STATE["count"]:
        raise RuntimeError("CUDA error: invalid device ordinal")
    return _STATE["rng"].setdefault(index, torch.zeros(16, dtype=torch.uint8)).clone()


def _set_rng_state(state: torch.Tensor, device: Any = "cuda") -> None:
    index = _index(device)
    if not 0 <= index < _STATE["count"]:
        raise IndexError(f"CUDA device {index} does not exist ({_STATE['count']} devices)")
    _STATE["rng"][index] = state.clone()


def _get_rng_state_all() -> list[torch.Tensor]:
    return [_rng_state(i) for i in range(_STATE["count"])]


def _set_rng_state_all(states: list[torch.Tensor]) -> None:
    for i, s in enumerate(states):
        _set_rng_state(s, i)


class _Event:
    """A CUDA event on the host clock; ``synchronize`` counts as a wait."""

    def __init__(self, enable_timing: bool = False, **_: Any) -> None:
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        _note_sync("Event.synchronize")

    def query(self) -> bool:
        return True

    def wait(self, stream: Any = None) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        assert self.t is not None and end.t is not None
        return (end.t - self.t) * 1000.0


class _Stream:
    def __init__(self, device: Any = None, **_: Any) -> None:
        self.device = device

    def synchronize(self) -> None:
        _note_sync("Stream.synchronize")

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> _Event:
        event = event or _Event()
        event.record(self)
        return event


def _synchronize(device: Any = None) -> None:
    _note_sync("torch.cuda.synchronize")


# ----------------------------------------------------------------------------- the mode
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


def _note_sync(what: str, tensor: Any = None) -> None:
    for counter in list(_COUNTERS):
        counter.note(what, tensor)


def _note_copy(what: str, counted_as_sync: bool) -> None:
    """Record a host-to-GPU copy in every active counter; a blocking one is a sync too
    (unless the existing rule of :func:`_device_copy` already counted it)."""
    for counter in list(_COUNTERS):
        counter.note_copy(what)
    if not what.endswith("(async)") and not counted_as_sync:
        _note_sync(what)


class _CudaOnHost(TorchFunctionMode):
    """Every CUDA placement becomes a CPU one; sync-like calls are reported to the active
    :class:`SyncCounter` objects."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        placed = placement(func, args, kwargs)
        if _COUNTERS:
            self._count(func, args, kwargs)
            copy = host_copy(func, args, kwargs, placed)
            if copy is not None:
                counted = func in _HOST_DATA_FACTORIES and _device_copy(func, args, kwargs)
                _note_copy(copy, counted)
        called = (args, kwargs)
        if func in (_TENSOR.cuda, _TENSOR.pin_memory):
            return track(func, *called, placed, args[0])
        if func is _TENSOR.to:
            args = tuple("cpu" if _is_cuda(a) else a for a in args)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False
        return track(func, *called, placed, func(*args, **kwargs))

    @staticmethod
    def _count(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        name = getattr(func, "__name__", str(func))
        if func in _TO_HOST or func in _DATA_SHAPED:
            _note_sync(f"Tensor.{name}", args[0] if args else None)
        elif func in (_TENSOR.__getitem__, _TENSOR.__setitem__) and _bool_index(args):
            _note_sync(f"Tensor.{name} with a boolean mask")
        elif func in _HOST_DATA_FACTORIES and _device_copy(func, args, kwargs):
            _note_sync(f"torch.{name}(host data, device=...)")


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
    """``file:line`` of the innermost frame outside torch and this module."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        f = frame.filename
        if "/torch/" not in f and not f.endswith("fake_cuda.py"):
            return f"{os.path.basename(f)}:{frame.lineno}"
    return "?"


# ----------------------------------------------------------------------------- install
def _patch_load(load: Callable[..., Any]) -> Callable[..., Any]:
    def fake_load(*args: Any, **kwargs: Any) -> Any:
        loc = kwargs.get("map_location")
        if _is_cuda(loc):
            kwargs["map_location"] = "cpu"
        return load(*args, **kwargs)

    return fake_load


def _patch_init(init: Callable[..., Any]) -> Callable[..., Any]:
    def fake_init(backend: str | None = None, *args: Any, **kwargs: Any) -> Any:
        device_id = kwargs.get("device_id")
        _record(
            "init_process_group",
            backend=backend,
            device_id=None if device_id is None else str(device_id),
            bound=_STATE["current"],
        )
        if backend == "nccl":
            if device_id is None or _index(device_id) != _STATE["current"]:
                raise RuntimeError(
                    f"fake NCCL: device_id {device_id} is not the bound device "
                    f"cuda:{_STATE['current']}"
                )
            backend = "gloo"
        kwargs.pop("device_id", None)
        return init(backend, *args, **kwargs)

    return fake_init


def installed() -> bool:
    """Whether :func:`install` ran in this process."""
    return _STATE["mode"] is not None


def install(count: int, log_dir: str | os.PathLike | None = None) -> None:
    """Fake ``count`` CUDA devices in this process (see the module docstring)."""
    if installed():
        return
    _STATE.update(count=int(count), current=0, log=None if log_dir is None else str(log_dir))
    cuda = torch.cuda
    replacements = {
        "is_available": lambda: True,
        "device_count": lambda: _STATE["count"],
        "set_device": _set_device,
        "current_device": lambda: _STATE["current"],
        "get_device_name": lambda device=None: f"fake GPU {_index(device or 0)}",
        "get_rng_state": _rng_state,
        "set_rng_state": _set_rng_state,
        "get_rng_state_all": _get_rng_state_all,
        "set_rng_state_all": _set_rng_state_all,
        "Event": _Event,
        "Stream": _Stream,
        "current_stream": lambda device=None: _Stream(device),
        "synchronize": _synchronize,
    }
    for name, fn in replacements.items():
        setattr(cuda, name, fn)
        if hasattr(cuda.random, name):
            setattr(cuda.random, name, fn)
    torch.load = _patch_load(torch.load)
    dist.init_process_group = _patch_init(dist.init_process_group)
    mode = _CudaOnHost()
    mode.__enter__()
    _STATE["mode"] = mode
    _record("install", count=int(count))


def install_from_env() -> None:
    """:func:`install` with ``PALSGD_FAKE_GPUS`` devices, logging to ``PALSGD_FAKE_GPU_LOG``."""
    count = os.environ.get(ENV_COUNT)
    if count:
        install(int(count), os.environ.get(ENV_LOG) or None)
