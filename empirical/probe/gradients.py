"""Gradients of the probe objective: shard means, per-sample gradients (vmap or a loop),
Hessian-vector products by double backward and power iteration on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils._pytree import tree_map

from core.validation import check_int
from empirical.probe.problem import ProbeProblem, _flat_grad


def mean_loss_and_gradient(
    problem: ProbeProblem, indices: np.ndarray, chunk_size: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample losses (float64, ``(n,)``) and the gradient of their mean (float64, flat)."""
    total = torch.zeros(problem.dim, dtype=torch.float64, device=problem.device)
    losses = []
    n = len(indices)
    for start in range(0, n, chunk_size):
        idx = indices[start : start + chunk_size]
        lv = problem.sample_loss(problem.model, problem.batch(idx))
        total += _flat_grad(lv.sum(), problem.params).to(torch.float64)
        losses.append(lv.detach().to(torch.float64))
    return torch.cat(losses), total / n


def sample_gradient(problem: ProbeProblem, index: int) -> torch.Tensor:
    """Gradient (float64, flat) of the loss of one sample."""
    lv = problem.sample_loss(problem.model, problem.batch([index], cache=False))
    return _flat_grad(lv.sum(), problem.params).to(torch.float64)


class _Functional:
    """Calls ``model`` with the parameters ``params`` (for :func:`torch.func.vmap`)."""

    def __init__(self, model: nn.Module, params: dict[str, torch.Tensor]):
        self.model, self.params = model, params

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return torch.func.functional_call(self.model, self.params, args, kwargs)


def per_sample_gradients(
    problem: ProbeProblem, indices: np.ndarray, chunk_size: int = 64
) -> torch.Tensor:
    """Gradients (float64, ``(n, d)``) of the losses of the samples ``indices``.

    Vectorised with :func:`torch.func.vmap` over :func:`torch.func.grad` (each sample is
    run as a batch of one); models that ``vmap`` cannot trace (data-dependent control flow)
    fall back to one backward pass per sample, with the same result.
    """
    if problem.vmap_ok is not False:
        try:
            out = _vmap_gradients(problem, indices, chunk_size)
            problem.vmap_ok = True
            return out
        except Exception:  # any tracing failure: use the loop from now on
            if problem.vmap_ok:
                raise
            problem.vmap_ok = False
    return torch.stack([sample_gradient(problem, int(i)) for i in indices])


def _vmap_gradients(problem: ProbeProblem, indices: np.ndarray, chunk_size: int) -> torch.Tensor:
    names = [n for n, p in problem.model.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in problem.model.named_parameters() if p.requires_grad}

    def loss_one(prm: dict[str, torch.Tensor], sample: Any) -> torch.Tensor:
        batch = tree_map(lambda t: t.unsqueeze(0) if torch.is_tensor(t) else t, sample)
        return problem.sample_loss(_Functional(problem.model, prm), batch).sum()

    fn = torch.func.vmap(torch.func.grad(loss_one), in_dims=(None, 0))
    # at most 2^26 gradient values (256 MiB in float32) per vectorised chunk
    chunk = max(1, min(chunk_size, (1 << 26) // max(problem.dim, 1)))
    rows = []
    for start in range(0, len(indices), chunk):
        batch = problem.batch(indices[start : start + chunk])
        grads = fn(params, batch)
        rows.append(
            torch.cat([grads[n].reshape(grads[n].shape[0], -1) for n in names], 1).to(torch.float64)
        )
    return torch.cat(rows)


def make_hvp(
    problem: ProbeProblem, indices: np.ndarray, chunk_size: int = 64
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``v -> H v`` for the Hessian of the mean loss over ``indices`` (double backward).

    A batch of at most ``chunk_size`` samples keeps its gradient graph between calls
    (one backward per product); a larger one rebuilds the graph per chunk and call.
    """
    params = problem.params
    n = len(indices)
    chunks = [indices[s : s + chunk_size] for s in range(0, n, chunk_size)]

    def graph(idx: np.ndarray) -> torch.Tensor:
        lv = problem.sample_loss(problem.model, problem.batch(idx))
        return _flat_grad(lv.sum() / n, params, create_graph=True)

    if len(chunks) == 1:
        g = graph(chunks[0])

        def hvp(v: torch.Tensor) -> torch.Tensor:
            return _flat_grad(g, params, grad_outputs=v.to(g.dtype), retain_graph=True)
    else:

        def hvp(v: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(problem.dim, dtype=torch.float64, device=problem.device)
            for idx in chunks:
                gc = graph(idx)
                out += _flat_grad(gc, params, grad_outputs=v.to(gc.dtype)).to(torch.float64)
            return out

    return hvp


@dataclass
class PowerIteration:
    """Result of :func:`power_iteration`.

    ``norm = ||H v||`` for the final unit vector ``v`` (a lower bound of ``||H||_2``, and
    the estimate of the largest eigenvalue magnitude); ``rayleigh = v^T H v`` (its sign is
    that of the dominant eigenvalue when one dominates); ``residual = ||Hv - rayleigh v|| /
    ||Hv||`` (0 at an eigenvector); ``history``: ``||Hv||`` per iteration.
    """

    norm: float
    rayleigh: float
    residual: float
    iterations: int
    converged: bool
    history: list[float]
    vector: torch.Tensor = field(repr=False)


def power_iteration(
    hvp: Callable[[torch.Tensor], torch.Tensor],
    dim: int,
    *,
    iters: int = 20,
    tol: float = 1e-3,
    generator: torch.Generator | None = None,
    v0: torch.Tensor | None = None,
    device: str | torch.device = "cpu",
) -> PowerIteration:
    """Largest-magnitude eigenvalue of a symmetric operator by power iteration.

    ``v_{j+1} = H v_j / ||H v_j||`` (Golub and Van Loan, section 7.3.1); stops when ``||H v||``
    changes by less than ``tol`` relative (the sequence is non-decreasing for symmetric
    ``H``) or after ``iters`` products. ``v0`` warm-starts (e.g. the previous point's
    vector); otherwise a standard normal draw from ``generator``.
    """
    iters = check_int("hvp_iters", iters, 1)
    if v0 is None:
        v = torch.randn(dim, generator=generator, dtype=torch.float64).to(device)
    else:
        v = v0.detach().to(device=device, dtype=torch.float64).clone()
    v /= v.norm().clamp_min(1e-300)
    history: list[float] = []
    converged = False
    w = hvp(v).to(torch.float64)
    for it in range(1, iters + 1):
        norm = float(w.norm())
        history.append(norm)
        if norm == 0.0:
            converged = True
            break
        if it > 1 and abs(history[-1] - history[-2]) <= tol * history[-1]:
            converged = True
            break
        if it == iters:
            break
        v = w / norm
        w = hvp(v).to(torch.float64)
    norm = float(w.norm())
    rayleigh = float(v @ w)
    residual = float((w - rayleigh * v).norm() / norm) if norm > 0 else 0.0
    return PowerIteration(norm, rayleigh, residual, len(history), converged, history, v)
