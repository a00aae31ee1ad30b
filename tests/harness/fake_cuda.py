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

:class:`SyncCounter` (:mod:`sync_counter`, exported here too) counts the calls that make the
host wait for a GPU, and the copies of host data to it, while it is active.

The sitecustomize module next to this file calls :func:`install` at interpreter start
when ``PALSGD_FAKE_GPUS`` is set, so putting this directory on ``PYTHONPATH`` fakes CUDA in
every process of a launch (the launcher, torchrun's agent and each rank).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

try:  # as harness.fake_cuda (the tests) or as fake_cuda (sitecustomize)
    from .residence import GPU_AS_CPU, on_device, placement, track
    from .sync_counter import SyncCounter, count_call, note_sync
except ImportError:
    from residence import GPU_AS_CPU, on_device, placement, track
    from sync_counter import SyncCounter, count_call, note_sync

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
        note_sync("Event.synchronize")

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
        note_sync("Stream.synchronize")

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> _Event:
        event = event or _Event()
        event.record(self)
        return event


def _synchronize(device: Any = None) -> None:
    note_sync("torch.cuda.synchronize")


# ----------------------------------------------------------------------------- the mode
class _CudaOnHost(TorchFunctionMode):
    """Every CUDA placement becomes a CPU one; sync-like calls are reported to the active
    :class:`SyncCounter` objects."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        placed = placement(func, args, kwargs)
        count_call(func, args, kwargs, placed)
        called = (args, kwargs)
        if func in (torch.Tensor.cuda, torch.Tensor.pin_memory):
            return track(func, *called, placed, args[0])
        if func is torch.Tensor.to:
            args = tuple("cpu" if _is_cuda(a) else a for a in args)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False
        return track(func, *called, placed, func(*args, **kwargs))


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
