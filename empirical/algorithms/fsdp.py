"""Sharded workers: ``K`` PALSGD workers, each a group of ``S`` ranks that shards its model
with FSDP2 (``torch.distributed.fsdp.fully_shard``) on a 2-D device mesh.

Layout (:func:`worker_mesh`): the ``K * S`` ranks form the mesh ``(replicate, shard) =
(K, S)``, row-major, so rank ``k*S + s`` is shard ``s`` of worker ``k``. Within a worker,
``fully_shard(model, mesh=mesh["shard"])`` keeps on every rank the ``s``-th dim-0 chunk of
every parameter (``torch.chunk`` semantics; FSDP2 all-gathers them for the forward and
backward passes and reduce-scatters the gradients, averaged over the worker's ranks). The
ranks of one worker split its micro-batch: each takes its ``1/S`` slice of the batch the
worker's unsharded counterpart would take (:class:`SliceStream`), so the reduce-scattered
gradient is the worker's gradient on the whole batch (for equal-sized slices and a mean
loss).

The local algorithm (:class:`~empirical.algorithms.local.LocalAlgorithm`) then works on the
local chunks (:func:`local_view`): the flat layout, the anchor ``z``, the work buffer and the
outer optimizer's state cover this rank's chunks only (no full copy of the model on any
rank), a pull is elementwise on the chunks, and the sync all-reduces over the replicate
group only (``process_group = mesh.get_group("replicate")``, the ``K`` ranks that hold the
same chunk). Its coins are drawn for worker ``k``, the rank in that group, so every shard
of a worker takes the same pull decisions. The warm-up averages the reduce-scattered
gradients over the same group (HSDP's replicate all-reduce).

Checkpoints hold every rank's local chunks (:func:`local_state`, :func:`load_local_state`),
so a checkpoint resumes bitwise on the same layout (``K`` and ``S``). The anchor as a full
model (evaluation, export) is gathered over the shard group (:func:`full_tensor`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from core.validation import ParameterError

__all__ = [
    "WorkerMesh",
    "worker_mesh",
    "shard_model",
    "local_view",
    "full_tensor",
    "local_state",
    "load_local_state",
    "load_local_optimizer_state",
    "SliceStream",
]


@dataclass(frozen=True)
class WorkerMesh:
    """The 2-D mesh of ``K`` workers x ``S`` shards and this rank's place in it."""

    mesh: Any  # torch.distributed.device_mesh.DeviceMesh
    K: int
    S: int
    worker: int
    shard: int

    @property
    def replicate_group(self) -> Any:
        """The ``K`` ranks that hold this rank's chunks (the outer all-reduce's group)."""
        return self.mesh.get_group("replicate")


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a sharded ``DTensor``. ``torch.distributed.tensor`` costs seconds to
    import; a process that never imported it (no sharded worker) holds no DTensor."""
    mod = sys.modules.get("torch.distributed.tensor")
    return mod is not None and isinstance(t, mod.DTensor)


def _dtensor() -> Any:
    from torch.distributed.tensor import DTensor

    return DTensor


def worker_mesh(shards: int, device_type: str) -> WorkerMesh:
    """The ``(replicate, shard)`` mesh of the default group: ``world / shards`` workers of
    ``shards`` ranks each (raises :class:`~core.validation.ParameterError` naming
    ``shards`` unless it divides the world size)."""
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    if shards < 1 or world % shards:
        raise ParameterError(
            "shards", shards, f"a divisor of the {world} ranks", "ranks per worker: K = ranks / S"
        )
    K = world // shards
    mesh = init_device_mesh(device_type, (K, shards), mesh_dim_names=("replicate", "shard"))
    return WorkerMesh(
        mesh, K, shards, mesh["replicate"].get_local_rank(), mesh["shard"].get_local_rank()
    )


def shard_model(model: nn.Module, wm: WorkerMesh) -> nn.Module:
    """``fully_shard`` the model over the worker's shard group (in place; returned)."""
    from torch.distributed.fsdp import fully_shard

    fully_shard(model, mesh=wm.mesh["shard"])
    return model


def local_view(t: torch.Tensor) -> torch.Tensor:
    """This rank's chunk of a sharded tensor (a view: writes reach FSDP's sharded storage);
    any other tensor itself."""
    if is_dtensor(t):
        return t.to_local().detach()
    return t


def full_tensor(local: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Collective over ``like``'s mesh: the full tensor whose chunk here is ``local``,
    sharded as ``like`` is; ``local`` itself when ``like`` is not sharded."""
    if not is_dtensor(like):
        return local
    d = _dtensor().from_local(
        local.reshape(like.to_local().shape), like.device_mesh, like.placements,
        shape=like.shape, stride=like.stride(),
    )  # fmt: skip
    return d.full_tensor()


def local_state(obj: Any) -> Any:
    """``obj`` (a state dict, nested) with every sharded tensor replaced by a copy of its
    local chunk: what a rank's checkpoint file holds."""
    if is_dtensor(obj):
        return obj.to_local().detach().clone()
    if isinstance(obj, Mapping):
        return {k: local_state(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(local_state(v) for v in obj)
    return obj


@torch.no_grad()
def load_local_state(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy a :func:`local_state` of ``model.state_dict()`` back: chunks into the sharded
    parameters, full values into the others (keys and shapes must match)."""
    current = model.state_dict()
    missing = sorted(set(current) ^ set(state))
    if missing:
        raise KeyError(f"sharded model state: keys differ ({missing[:5]})")
    for key, val in current.items():
        dst = local_view(val)
        if dst.shape != state[key].shape:
            raise ValueError(f"{key}: checkpoint chunk {tuple(state[key].shape)}, here {dst.shape}")
        dst.copy_(state[key])


def load_local_optimizer_state(opt: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load an optimizer state saved by :func:`local_state`: every state tensor shaped like
    its parameter's chunk is made a DTensor sharded as the parameter again."""
    params = [p for g in opt.param_groups for p in g["params"]]
    fixed: dict[Any, Any] = {}
    for idx, entry in state["state"].items():
        p = params[int(idx)]
        fixed[idx] = {
            k: (
                _dtensor().from_local(
                    v, p.device_mesh, p.placements, shape=p.shape, stride=p.stride()
                )
                if is_dtensor(p)
                and torch.is_tensor(v)
                and v.shape == p.to_local().shape
                and v.dim() > 0
                else v
            )
            for k, v in entry.items()
        }
    opt.load_state_dict({**state, "state": fixed})


class SliceStream:
    """Shard ``s`` of ``S``'s slice of every batch of a worker's stream: items
    ``[s*B, (s+1)*B)`` of each batch of ``S*B`` (dict or tuple batches of tensors). Its
    state is the worker's stream's (the same on every shard of the worker)."""

    def __init__(self, stream: Any, shard: int, shards: int) -> None:
        self.stream, self.shard, self.shards = stream, int(shard), int(shards)

    def _slice(self, batch: Any) -> Any:
        if isinstance(batch, Mapping):
            return {k: self._slice(v) for k, v in batch.items()}
        if isinstance(batch, list | tuple):
            return type(batch)(self._slice(v) for v in batch)
        n = batch.shape[0] // self.shards
        return batch[self.shard * n : (self.shard + 1) * n]

    def next(self) -> Any:
        return self._slice(self.stream.next())

    __next__ = next

    def __iter__(self) -> SliceStream:
        return self

    def state_dict(self) -> dict[str, Any]:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state)
