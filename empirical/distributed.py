"""Process-group helpers: initialise from a ``torchrun`` environment or as a single process,
and spawn small multi-process groups for tests and benchmarks.

Backends: ``gloo`` on CPU, ``nccl`` when CUDA is available and requested (``backend=None``
picks ``nccl`` if ``torch.cuda.is_available()`` else ``gloo``). Nothing here touches global
random state.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing as mp
import os
import pickle
import queue as queue_mod
import socket
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from core.errors import UserInputError
from core.limits import check_processes

__all__ = [
    "DistContext",
    "bind_device",
    "device_for_rank",
    "init_distributed",
    "cleanup",
    "find_free_port",
    "spawn_workers",
    "group_rank",
    "group_size",
    "all_agree",
    "barrier",
    "WorkerError",
]


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: ``rank``/``world_size`` in the default group, ``local_rank``
    on its node, the ``device`` to put the model on, the ``backend``, and whether this call
    created the group (so :func:`cleanup` may destroy it)."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    created: bool

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _default_backend() -> str:
    return "nccl" if torch.cuda.is_available() else "gloo"


def device_for_rank(
    device: str | None, backend: str, local_rank: int | None = None, world_size: int | None = None
) -> torch.device:
    """The device a rank with ``local_rank`` among ``world_size`` processes takes, checked
    but not bound (see :func:`bind_device` for the rules and their errors)."""
    local = int(os.environ.get("LOCAL_RANK", "0")) if local_rank is None else int(local_rank)
    world = int(os.environ.get("WORLD_SIZE", "1")) if world_size is None else int(world_size)
    kind = (device or ("cuda" if backend == "nccl" else "cpu")).split(":")[0]
    if kind == "cpu":
        if backend == "nccl":
            raise UserInputError("backend 'nccl' needs CUDA devices, but device 'cpu' was given")
        return torch.device("cpu")
    if kind != "cuda":
        raise UserInputError(f"unknown device {device!r}: choose cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise UserInputError(f"device {device!r} requested but CUDA is not available")
    count = torch.cuda.device_count()
    if device is not None and ":" in device:
        index = int(device.split(":", 1)[1])
        if world > 1:
            raise UserInputError(
                f"device {device!r} names one GPU but {world} processes run: use --device cuda "
                "(each rank takes cuda:LOCAL_RANK)"
            )
        if index >= count:
            raise UserInputError(f"device {device!r} does not exist ({count} CUDA devices)")
    elif local < count:
        index = local
    elif backend == "gloo":
        index = local % count
    else:
        raise UserInputError(
            f"LOCAL_RANK {local} has no GPU of its own ({count} CUDA devices on this node): "
            "start at most one process per GPU, or use the gloo backend to share GPUs"
        )
    return torch.device("cuda", index)


def bind_device(
    device: str | None, backend: str, local_rank: int | None = None, world_size: int | None = None
) -> torch.device:
    """The device of this rank, bound with ``torch.cuda.set_device`` when it is a GPU.

    ``device``: ``"cpu"``, ``"cuda"`` (``cuda:LOCAL_RANK``), ``"cuda:N"`` (one process only)
    or ``None`` (CUDA if the backend is NCCL, else the CPU). With NCCL every local rank needs
    its own GPU (``LOCAL_RANK < torch.cuda.device_count()``; NCCL refuses two ranks on one
    GPU); with gloo, local ranks beyond the GPU count share GPUs round-robin
    (``LOCAL_RANK mod device_count``), which is meant for tests on one GPU. Every failure is a
    :class:`~core.errors.UserInputError` raised before any collective.

    A rank binds once: the result is a concrete device (``cuda:I`` or ``cpu``) to hand to
    :func:`init_distributed` as ``bound``, not a request to resolve again (``cuda:I`` as a
    request names one GPU for one process).
    """
    dev = device_for_rank(device, backend, local_rank, world_size)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    return dev


def _init_kwargs(backend: str, dev: torch.device) -> dict[str, Any]:
    """``device_id`` for NCCL groups (binds the communicator to this rank's GPU)."""
    return {"device_id": dev} if backend == "nccl" and dev.type == "cuda" else {}


def init_distributed(
    backend: str | None = None,
    *,
    timeout_s: float = 1800.0,
    device: str | None = None,
    bound: torch.device | None = None,
) -> DistContext:
    """Initialise (or join) the default process group.

    * Already initialised: return its context (the group is left as it is).
    * ``torchrun`` environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``):
      ``init_process_group(backend, init_method="env://")``.
    * Otherwise a single-process group (world size 1) on an in-memory store, so that the
      same code path (including ``torch`` DDP) runs without a launcher.

    The device is bound BEFORE the group exists, and an NCCL group gets ``device_id``, so
    that no rank's collectives land on another rank's GPU. ``bound`` is the device this
    rank already bound (:func:`bind_device`'s result) and is used as it is; otherwise
    ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``) is bound here (:func:`bind_device`:
    ``cuda:LOCAL_RANK`` and ``torch.cuda.set_device``). With ``backend=None`` a CUDA device
    implies ``nccl`` and a CPU device ``gloo``.
    """
    if backend is None:
        kind = bound.type if bound is not None else (device or "").split(":")[0]
        backend = {"cpu": "gloo", "cuda": "nccl"}.get(kind, _default_backend())
    if backend not in ("gloo", "nccl"):
        raise UserInputError(f"'backend' = {backend!r} is not one of 'gloo', 'nccl'")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if dist.is_available() and dist.is_initialized():
        be = str(dist.get_backend())
        world = dist.get_world_size()
        dev = bound if bound is not None else bind_device(device, be, local_rank, world)
        return DistContext(dist.get_rank(), world, local_rank, dev, be, False)
    dev = bound if bound is not None else bind_device(device, backend, local_rank)
    timeout = datetime.timedelta(seconds=timeout_s)
    env = os.environ
    kw = _init_kwargs(backend, dev)
    if all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        dist.init_process_group(backend, init_method="env://", timeout=timeout, **kw)
    else:
        dist.init_process_group(
            backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout, **kw
        )
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank, dev, backend, True)


def cleanup(ctx: DistContext | None = None) -> None:
    """Destroy the default group if it exists (and, given ``ctx``, only if ``ctx`` created it)."""
    if dist.is_available() and dist.is_initialized() and (ctx is None or ctx.created):
        dist.destroy_process_group()


def group_rank(group: Any = None) -> int:
    """Rank in ``group`` (0 when no process group is initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0
    return dist.get_rank(group)


def group_size(group: Any = None) -> int:
    """Size of ``group`` (1 when no process group is initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def all_agree(ok: bool, device: torch.device | str) -> bool:
    """Collective over the default group: True when ``ok`` holds on every rank (one
    all-reduce of a flag on ``device``)."""
    flag = torch.tensor([0.0 if ok else 1.0], device=device)
    dist.all_reduce(flag)
    return float(flag.item()) == 0.0


def barrier(world_size: int) -> None:
    """Collective over the default group: wait for every rank (no call in a world of one)."""
    if world_size > 1:
        dist.barrier()


def find_free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        return int(s.getsockname()[1])


class WorkerError(RuntimeError):
    """A spawned worker raised; the message carries its rank and traceback."""


#: what the fork server imports once, before it forks the workers (torch's start-up is
#: most of a worker's: the import, and torch._dynamo, which an optimizer's first
#: ``add_param_group`` imports)
_PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "numpy"]
#: the variables read when an interpreter starts (Python's own, the dynamic loader's, and
#: the project's, which start-up hooks may read): a worker forked from the server sees
#: the values the server started with
_START_UP_VARIABLES = ("PYTHON", "LD_", "PALSGD_")
_server_env: dict[str, str] | None = None  # those variables when the fork server started


def _start_context() -> Any:
    """The multiprocessing context of :func:`spawn_workers`: ``"forkserver"`` (the workers
    forked from one server process that imported :data:`_PRELOAD` once: seconds of start-up
    saved per worker) while the variables read at start-up are the ones the server started
    with, else ``"spawn"`` (a fresh interpreter). The other variables reach the worker
    either way (:func:`_worker_entry` sets the caller's environment)."""
    global _server_env
    env = {k: v for k, v in os.environ.items() if k.startswith(_START_UP_VARIABLES)}
    if _server_env is None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        _server_env = env
        return ctx
    return mp.get_context("forkserver" if env == _server_env else "spawn")


def _worker_entry(
    rank: int,
    world_size: int,
    port: int,
    backend: str,
    threads: int,
    fn: Callable[..., Any],
    args: Sequence[Any],
    results: Any,
    env: dict[str, str],
) -> None:
    os.environ.clear()  # the caller's environment, whichever process this was forked from
    os.environ.update(env)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_num_threads(threads)
    try:
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=300),
        )
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        taken = "EADDRINUSE" in str(exc) or "address already in use" in str(exc).lower()
        results.put((rank, "port" if taken else "error", traceback.format_exc().encode()))
        return
    payload: tuple[int, str, bytes]
    try:
        try:
            out = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        payload = (rank, "ok", pickle.dumps(out))
    except BaseException:  # noqa: BLE001 - reported to the parent with its traceback
        payload = (rank, "error", traceback.format_exc().encode())
    results.put(payload)


class _PortTaken(Exception):
    """Another process took the rendezvous port between its choice and the bind."""


def spawn_workers(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout_s: float = 300.0,
    threads_per_worker: int = 1,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes and return the
    results ordered by rank.

    Each process joins a ``backend`` group on a free local port (``tcp://127.0.0.1``) and
    uses ``threads_per_worker`` intra-op threads; it is forked from a server process that
    has imported torch (:func:`_start_context`), or spawned afresh when the environment
    changed since that server started. ``fn`` must be importable (module level)
    and its result picklable. A worker exception is re-raised here as :class:`WorkerError`
    with the worker's traceback; a worker that does not finish within ``timeout_s`` seconds
    is terminated. A port another process takes between its choice and rank 0's bind is
    replaced by a new one (:data:`_PORT_ATTEMPTS` tries). Meant for tests and benchmarks
    (CPU, gloo, a few processes).
    """
    if world_size < 1:
        raise ValueError("world_size must be >= 1")
    check_processes(world_size, "world_size")  # never more processes than the machine runs
    ctx = _start_context()
    taken = None
    for _ in range(_PORT_ATTEMPTS):
        try:
            return _spawn_once(ctx, fn, world_size, args, backend, timeout_s, threads_per_worker)
        except _PortTaken as exc:  # another process took the port: a new one
            taken = exc
    raise WorkerError(f"the rendezvous port was taken {_PORT_ATTEMPTS} times (last: {taken})")


#: tries of :func:`spawn_workers` when the port it chose is taken before rank 0 binds it
_PORT_ATTEMPTS = 3


def _spawn_once(
    ctx: Any,
    fn: Callable[..., Any],
    world_size: int,
    args: Sequence[Any],
    backend: str,
    timeout_s: float,
    threads: int,
) -> list[Any]:
    """One try of :func:`spawn_workers` on a fresh port; :class:`_PortTaken` when a rank
    found it taken (every worker is stopped first)."""
    results = ctx.Queue()
    port = find_free_port()
    env = dict(os.environ)
    procs = [
        ctx.Process(
            target=_worker_entry,
            args=(r, world_size, port, backend, threads, fn, tuple(args), results, env),
            daemon=False,
        )
        for r in range(world_size)
    ]
    for proc in procs:
        proc.start()
    collected: dict[int, tuple[str, bytes]] = {}
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout_s)
    try:
        while len(collected) < world_size:
            left = (deadline - datetime.datetime.now()).total_seconds()
            if left <= 0:
                raise TimeoutError(f"spawned workers did not finish within {timeout_s} s")
            try:
                rank, status, data = results.get(timeout=min(left, 1.0))
            except queue_mod.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead and len(collected) + len(dead) >= world_size:
                    codes = {i: p.exitcode for i, p in enumerate(procs)}
                    raise WorkerError(
                        f"worker(s) died without a result, exit codes {codes}"
                    ) from None
                continue
            collected[rank] = (status, data)
            if status == "port":
                raise _PortTaken(f"port {port}")
            if status == "error":
                raise WorkerError(f"worker {rank} failed:\n{data.decode()}")
    finally:
        for proc in procs:
            proc.join(timeout=5 if len(collected) == world_size else 0.1)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        results.close()
    return [pickle.loads(collected[r][1]) for r in range(world_size)]
