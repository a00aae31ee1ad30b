"""The collectives of the local algorithms outside the sync (:mod:`empirical.algorithms.sync`):
every rank starts from rank 0's model (:func:`broadcast_initial_state`), and a warm-up step
averages the gradients with ONE flat all-reduce, as DDP does (:func:`average_gradients`)."""

from __future__ import annotations

import torch

from empirical.algorithms.base import Communicator
from empirical.algorithms.flat import foreach_copy
from empirical.algorithms.flat_model import FlatModel
from empirical.algorithms.fsdp import local_view

__all__ = ["average_gradients", "broadcast_initial_state"]


@torch.no_grad()
def average_gradients(model: FlatModel, comm: Communicator) -> None:
    """Average the gradients of ``model``'s parameters over ``comm``'s ranks with ONE flat
    all-reduce (the warm-up = DDP); gradients missing on some ranks count as zeros."""
    if not comm.active:
        return
    n, buf = model.n, model.work()[: model.n_warm]
    grads = [None if p.grad is None else local_view(p.grad) for p in model.params]
    flags = buf[n:]
    views = model.layout.views(buf)
    complete = all(g is not None for g in grads)
    if complete:
        model.layout.gather(grads, buf)
        flags.fill_(1.0)
    else:
        for i, (v, g) in enumerate(zip(views, grads, strict=True)):
            if g is None:
                v.zero_()
            else:
                v.copy_(g)
            flags[i] = 0.0 if g is None else 1.0
    comm.all_reduce_sum(buf)
    buf[:n].div_(comm.size)
    # ranks may differ in which parameters got gradients; when this rank has every one,
    # every flag is >= 1 after the sum and nothing needs to be read from the device
    have = [True] * len(grads) if complete else (flags > 0).tolist()
    for p, h in zip(model.params, have, strict=True):
        if h and p.grad is None:
            p.grad = torch.zeros_like(p)
    dst = [local_view(p.grad) for p, h in zip(model.params, have, strict=True) if h]
    src = [v for v, h in zip(views, have, strict=True) if h]
    foreach_copy(dst, src)


@torch.no_grad()
def broadcast_initial_state(model: FlatModel, comm: Communicator) -> None:
    """Make every rank start from rank 0's parameters (trainable and frozen) and buffers."""
    if not comm.active:
        return
    if model.flat is not None:
        comm.broadcast(model.flat[: model.n])
    else:
        buf = model.work()[: model.n]
        model.layout.gather(model.local_params, buf)
        comm.broadcast(buf)
        model.layout.scatter(buf, model.local_params)
    for p in model.module.parameters():
        if not p.requires_grad:  # frozen parameters: never synced later, equal from here on
            comm.broadcast(p.data)
    for _, b in model.named_buffers:
        comm.broadcast(b)
