"""``K`` copies of a model in one process: the trainable parameters as ONE ``(K, n)``
buffer (row ``k``: worker ``k``'s parameters, flattened in ``module.parameters()`` order),
the non-boolean buffers stacked along a leading worker axis, and the gradients of ``K``
micro-batches in one vmapped forward (``torch.func.vmap`` of
``torch.func.functional_call``) and one backward pass through it (the gradient of the sum
of the workers' losses: each worker's own gradient, in one ``(K, n)`` tensor).

Assumptions (checked where they can be):

* every trainable parameter has one dtype and one device (the buffer's); frozen
  parameters (``requires_grad=False``) and boolean buffers (masks) are not stacked: the
  workers share the module's own tensors, which never change;
* ``loss_fn(module, batch)`` returns a scalar tensor and uses nothing but the module's
  parameters and buffers and the batch (it is evaluated with the stacked tensors swapped
  in); every leaf of ``batch`` is a tensor with a leading axis of size ``K`` (micro-batch
  ``k`` for worker ``k``);
* buffers updated in the forward pass (BatchNorm's running statistics) are updated per
  worker (each worker's own copy); tied parameters (GPT-Neo's embedding and head) are
  one parameter (``functional_call`` ties them);
* random operations (dropout) follow ``torch.func.vmap``'s ``randomness``: ``"different"``
  draws independent masks per worker (not those K separate ranks would draw: the
  stream of one process is split differently), ``"same"`` one mask for all,
  ``"error"`` refuses any.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_map

from core.errors import UserInputError

__all__ = ["StackedModel"]


class _LossModule(nn.Module):
    """``forward(batch) = loss_fn(model, batch)``: a module whose parameters are the
    model's (prefixed ``model.``), so that ``functional_call`` swaps them in."""

    def __init__(self, model: nn.Module, loss_fn: Callable[[nn.Module, Any], torch.Tensor]):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch: Any) -> torch.Tensor:
        return self.loss_fn(self.model, batch)


class StackedModel:
    """``K`` workers' copies of ``model`` (module docstring): ``x`` ``(K, n)``, the stacked
    buffers ``buffers`` and :meth:`gradients`."""

    def __init__(
        self,
        model: nn.Module,
        K: int,
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        randomness: str = "different",
    ) -> None:
        if K < 1:
            raise UserInputError(f"K must be >= 1, got {K}")
        self.module, self.K = model, int(K)
        self.wrapper = _LossModule(model, loss_fn)
        named = [(n, p) for n, p in self.wrapper.named_parameters() if p.requires_grad]
        if not named:
            raise UserInputError("the model has no trainable parameters")
        self.dtype, self.device = named[0][1].dtype, named[0][1].device
        if any(p.dtype != self.dtype or p.device != self.device for _, p in named):
            raise UserInputError("stacked workers need one dtype and device for all parameters")
        self.names = [n for n, _ in named]
        first = {id(p): n for n, p in reversed(named)}
        # tied parameters (GPT-Neo's lm_head.weight is wte.weight): every name, its row's
        self.alias = {
            n: first[id(p)]
            for n, p in self.wrapper.named_parameters(remove_duplicate=False)
            if id(p) in first
        }
        self.shapes = [tuple(p.shape) for _, p in named]
        sizes = [p.numel() for _, p in named]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        self.n = self.offsets[-1]
        with torch.no_grad():
            row = torch.cat([p.detach().reshape(-1) for _, p in named])
            self.x = row.unsqueeze(0).repeat(self.K, 1)  # every worker starts from the model
            self.buffers = {
                n: b.detach().unsqueeze(0).repeat(self.K, *([1] * b.dim())).contiguous()
                for n, b in self.wrapper.named_buffers()
                if b.dtype != torch.bool
            }
        self._losses = vmap(self._loss, in_dims=(0, 0, 0), randomness=randomness)

    def _loss(
        self, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], batch: Any
    ) -> torch.Tensor:
        return functional_call(self.wrapper, (params, buffers), (batch,))

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The parameters as views of ``flat`` (``(K, n)`` or ``(n,)``), by name."""
        lead = flat.shape[:-1]
        return {
            name: flat[..., a:b].view(*lead, *shape)
            for name, shape, a, b in zip(
                self.names, self.shapes, self.offsets[:-1], self.offsets[1:], strict=True
            )
        }

    def first_numel(self) -> int:
        """Elements of the first trainable parameter (the authors' pull, Q1)."""
        return self.offsets[1]

    def gradients(
        self, batch: Any, idx: torch.Tensor | None, idx_host: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The gradients and losses of the workers ``idx`` (``None``: all ``K``; else an
        int64 tensor on the device, ascending, and the same indices on the CPU in
        ``idx_host`` for batch leaves kept there), each on its own micro-batch
        ``batch[k]``: gradients ``(m, n)`` (row ``i``: worker ``idx[i]``), losses ``(K,)``
        float64 (NaN for the other workers, whose buffers are untouched). No host
        synchronisation."""
        K = self.K
        with torch.no_grad():
            x = self.x if idx is None else self.x.index_select(0, idx)
            bufs = self.buffers if idx is None else _rows(self.buffers, idx)
        # one leaf per parameter (a view of x): the backward of slices of ONE leaf would
        # fill and add a (K, n) tensor per parameter
        leaves = {n: v.detach().requires_grad_(True) for n, v in self.views(x).items()}
        sub = batch if idx is None else tree_map(lambda t: _select(t, idx, idx_host), batch)
        loss = self._losses(leaves, bufs, sub)
        # the gradient of the sum of the workers' losses is each worker's own gradient
        grads = torch.autograd.grad(loss.sum(), list(leaves.values()), allow_unused=True)
        m = loss.shape[0]
        with torch.no_grad():
            g = torch.cat(
                [
                    v.new_zeros((m, v[0].numel())) if gr is None else gr.reshape(m, -1)
                    for v, gr in zip(leaves.values(), grads, strict=True)
                ],
                dim=1,
            )
            loss = loss.detach().to(torch.float64)
            if idx is None:
                return g, loss
            for n, b in bufs.items():
                self.buffers[n].index_copy_(0, idx, b)
            losses = torch.full((K,), float("nan"), dtype=torch.float64, device=loss.device)
        return g, losses.index_copy_(0, idx, loss)

    @torch.no_grad()
    def state_dict_of(
        self, flat: torch.Tensor, buffers: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The module's state dict with the parameters of ``flat`` (``(n,)``) and the
        stacked-buffer values of ``buffers`` (unstacked, by wrapper name); copies."""
        out: dict[str, torch.Tensor] = {}
        views = self.views(flat)
        for key, val in self.wrapper.state_dict(keep_vars=True).items():
            if key in self.alias:
                src = views[self.alias[key]]
            elif key in buffers:
                src = buffers[key]
            else:
                src = val.detach()
            out[key.removeprefix("model.")] = src.clone()
        return out

    def worker_buffers(self, k: int) -> dict[str, torch.Tensor]:
        """Worker ``k``'s stacked buffers (views), by wrapper name."""
        return {n: b[k] for n, b in self.buffers.items()}


def _rows(tensors: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows ``idx`` of every tensor (copies)."""
    return {n: t.index_select(0, idx) for n, t in tensors.items()}


def _select(t: Any, idx: torch.Tensor, idx_host: torch.Tensor | None) -> Any:
    """Rows ``idx`` of a batch leaf (``idx_host`` for a leaf on the CPU)."""
    if not torch.is_tensor(t):
        raise UserInputError(f"every leaf of a stacked batch must be a tensor, got {type(t)}")
    use = idx_host if (t.device.type == "cpu" and idx_host is not None) else idx
    return t.index_select(0, use.to(t.device))
