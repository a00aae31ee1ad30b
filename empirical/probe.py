"""``palsgd probe``: estimate L, sigma^2, zeta^2 and F0 on a real model, then set a run's
measured rate against the encoded bounds.

The objective
-------------
A run trains on ``K`` shards ``S_1..S_K`` of a training split (the run's own sharding:
:func:`empirical.data.shard_indices` with its ``iid`` setting, epoch 0). With per-sample
losses ``l_i(x)``, worker k's objective is ``f_k = mean_{i in S_k} l_i`` and
``f = (1/K) sum_k f_k`` (assumptions A1-A4, ``theory.assumptions``). Large shards are
subsampled: the *probe set* ``P_k`` is a seeded uniform subset of ``m_k`` samples of
``S_k`` (``m_k = |S_k|`` when the shard is small enough, and every estimate below is then
exact for the run's data). Every gradient is of ``f_P = (1/K) sum_k mean_{i in P_k} l_i``.
The model is evaluated in eval mode (no dropout, BatchNorm with running statistics), so
``f`` is a deterministic function of the parameters. A language-model sample is one
sequence and its loss is the mean next-token cross entropy over its targets.

Estimators (one set per trajectory point ``x``: the initial model and checkpoints)
---------------------------------------------------------------------------------
* **L** (A1). ``||H v||`` after power iteration (Golub and Van Loan, *Matrix
  Computations*, 4th ed., section 7.3.1) on Hessian-vector products computed by double
  backward (Pearlmutter, "Fast exact multiplication by the Hessian", Neural Computation
  6(1), 1994) of the mean loss over a fixed batch of ``--hvp-samples`` probe samples. For a
  unit vector ``||Hv|| <= ||H||_2``, so each value is a lower estimate of the local spectral
  norm; the maximum over points is a *local lower estimate* of the global ``L``. A small
  batch biases ``lambda_max`` up (``lambda_max`` is convex, so by Jensen
  ``E lambda_max(H_batch) >= lambda_max(E H_batch)``). The secant
  ``||grad f_P(x_j) - grad f_P(x_{j-1})|| / ||x_j - x_{j-1}||`` between consecutive points
  is a rigorous lower bound of the smoothness constant of ``f_P``.
* **sigma^2** (A2). ``n_k`` per-sample gradients per shard, drawn without replacement from
  ``P_k``; ``d_i = ||g_i - grad f_k||^2`` has mean exactly the population variance over
  ``P_k`` (the shard gradient is computed exactly over ``P_k``). The CI is a Student-t
  interval with the finite-population correction ``(m_k - n_k)/(m_k - 1)`` (Cochran,
  *Sampling Techniques*, 3rd ed., 1977, Theorem 2.2); the factor
  ``m_k/(m_k - 1) * (|S_k| - 1)/|S_k|`` turns the variance over ``P_k`` into an unbiased
  estimate of the variance over ``S_k``. i.i.d. runs pool the shards around ``grad f``
  (a worker's epoch shard is a fresh uniform subset); non-i.i.d. runs take the largest
  shard value (A2 holds for every k). The noise of one step's gradient, the mean of
  ``b = A*B`` distinct samples of a population of ``N`` (``N = |S|`` i.i.d., ``|S_k|``
  non-i.i.d.), is ``sigma_1^2 / b * (N - b)/(N - 1)`` (Cochran, Theorem 2.2); that value
  feeds the bound.
* **zeta^2** (A3). ``raw = (1/K) sum_k ||g_k - g||^2`` with the probe-set shard gradients
  ``g_k`` and ``g = mean_k g_k``. When ``g_k = grad f_k + e_k`` with independent zero-mean
  errors of variance ``v_k = sigma_k^2/m_k * (|S_k| - m_k)/(|S_k| - 1)``,
  ``E raw = zeta^2 + (1 - 1/K) (1/K) sum_k v_k`` (expand ``e_k - mean_j e_j``); the probe
  subtracts that noise term (estimated from the per-sample gradients) and clips at 0.
  The noise is zero when ``P_k = S_k``. For i.i.d. runs the theory's ``zeta`` is 0 by
  construction (each epoch reshuffles the shards); the measured heterogeneity of the
  epoch-0 shards is reported as a consistency check and is not fed to the bound.
* **F0** (A4). ``f(x0)`` over the probe set (with its standard error) minus a lower
  bound ``f_lower`` of the loss (0 for cross entropy) feeds the bound: ``f_lower <= f_star``
  makes it a valid upper estimate of the gap. ``f(x0)`` minus the best loss the run reached
  is reported too; it can be smaller than the true gap.
* **measured rate**. ``||grad f_P(xbar_t)||^2`` at the workers' average model
  ``xbar_t = mean_k x_k`` of each checkpoint (noise-corrected by ``Var(g) =
  (1/K^2) sum_k v_k``), averaged over the local phase ``[T0, T)`` as a left Riemann sum over
  the recorded steps. The trainer does not record gradient norms, so this is always a
  replay of checkpoints; it is one realisation of a random trajectory, the bounds are on
  the expectation.

The constants and the run's hyperparameters go to :func:`theory.check.check`; the report
lists every way in which the run is outside the theory (inner AdamW or momentum, weight
decay, Nesterov/SGD outer steps, clipping, shared coins, the authors' code's quirks) and
shows the numbers anyway, as an indication.

CLI: ``palsgd probe [--run DIR | --model NAME --dataset NAME ...] [--points N]
[--samples N] [--out DIR] [--json]``; see :func:`add_arguments`. Without ``--run`` it
first trains a short PALSGD run (inner SGD, outer averaging, no clipping: inside the
theory unless ``--train-preset``/``--train-config`` choose otherwise). Writes
``probe.json`` and ``points.csv`` to ``--out``. Exit 0 on success, 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import default_collate

from theory.validation import (
    ParameterError,
    UserInputError,
    check_fraction,
    check_int,
    check_output_dir,
)

__all__ = [
    "ProbeSettings",
    "ProbeProblem",
    "SamplingPlan",
    "PowerIteration",
    "PointEstimate",
    "ProbeResult",
    "RunInfo",
    "lm_sample_losses",
    "image_sample_losses",
    "sample_loss_for_task",
    "trainable_parameters",
    "get_flat",
    "set_flat",
    "make_plan",
    "mean_loss_and_gradient",
    "sample_gradient",
    "per_sample_gradients",
    "make_hvp",
    "power_iteration",
    "estimate_point",
    "probe_points",
    "measured_rate",
    "theory_scope",
    "theory_values",
    "compare_with_theory",
    "load_run",
    "run_problem",
    "run_points",
    "train_reference_run",
    "probe_run",
    "add_arguments",
    "run",
    "POINT_FIELDS",
]

SampleLoss = Callable[[nn.Module, Any], torch.Tensor]

_IGNORE_INDEX = -100


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class ProbeSettings:
    """How much work the probe does at each point (all counts are samples, not batches).

    ``samples``: per-sample gradients per point for sigma^2 (spread evenly over the shards,
    at least 2 per shard). ``max_samples``: size of the probe set (``max_samples // K`` per
    shard, at most the shard). ``hvp_samples``: batch of the Hessian-vector products.
    ``hvp_iters``/``hvp_tol``: power-iteration budget and relative stopping tolerance on
    ``||Hv||``. ``hvp_warm_start``: start each point's power iteration from the previous
    point's vector (faster, but it can stall on an eigenvector that is no longer the top
    one; off by default, every point then starts from a fresh seeded normal vector). ``confidence``: level of the CIs. ``step_batch``: samples in one step's
    gradient (``A * B``). ``f_lower``: a lower bound of the per-sample loss (0 for cross
    entropy). ``chunk_size``: samples per forward/backward. ``seed``: every random choice.
    """

    samples: int = 64
    max_samples: int = 512
    hvp_samples: int = 32
    hvp_iters: int = 20
    hvp_tol: float = 1e-3
    hvp_warm_start: bool = False
    confidence: float = 0.95
    step_batch: int = 1
    f_lower: float = 0.0
    chunk_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("samples", self.samples, 2)
        check_int("max_samples", self.max_samples, 2)
        check_int("hvp_samples", self.hvp_samples, 1)
        check_int("hvp_iters", self.hvp_iters, 1)
        check_fraction("hvp_tol", self.hvp_tol, allow_zero=False, allow_one=False)
        check_fraction("confidence", self.confidence, allow_zero=False, allow_one=False)
        check_int("step_batch", self.step_batch, 1)
        if not math.isfinite(float(self.f_lower)):
            raise ParameterError("f_lower", self.f_lower, "a finite number")
        check_int("chunk_size", self.chunk_size, 1)
        check_int("seed", self.seed, 0)


# ----------------------------------------------------------------------------- losses
def _to_device(x: Any, device: torch.device) -> Any:
    if torch.is_tensor(x):
        return x.to(device)
    if isinstance(x, Mapping):
        return {k: _to_device(v, device) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_to_device(v, device) for v in x)
    return x


def lm_sample_losses(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Per-sequence mean next-token cross entropy, shape ``(N,)``.

    Same conventions as :func:`empirical.models.compute_loss` (labels aligned with the
    inputs and shifted here, -100 ignored, labels default to the inputs with masked positions
    ignored); for sequences with equal target counts the mean of this vector equals
    ``compute_loss``. A sequence without targets has loss 0.
    """
    ids = batch["input_ids"]
    mask = batch.get("attention_mask")
    labels = batch.get("labels")
    if labels is None:
        labels = ids if mask is None else ids.masked_fill(mask == 0, _IGNORE_INDEX)
    out = model(input_ids=ids, attention_mask=mask)
    logits = (out.logits if hasattr(out, "logits") else out)[:, :-1, :].float()
    targets = labels[:, 1:]
    tok = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=_IGNORE_INDEX,
        reduction="none",
    ).view(targets.shape)
    valid = (targets != _IGNORE_INDEX).to(tok.dtype)
    return (tok * valid).sum(1) / valid.sum(1).clamp_min(1)


def image_sample_losses(model: nn.Module, batch: Any) -> torch.Tensor:
    """Per-image cross entropy, shape ``(N,)``; ``batch`` is ``(images, labels)``."""
    x, y = batch[0], batch[1]
    return F.cross_entropy(model(x).float(), y, reduction="none")


def sample_loss_for_task(task: str) -> SampleLoss:
    """The per-sample loss of a task of :func:`empirical.models.model_task`."""
    if task == "lm":
        return lm_sample_losses
    if task == "image":
        return image_sample_losses
    raise UserInputError(f"unknown task '{task}': use 'lm' or 'image'")


# ----------------------------------------------------------------------------- parameters
def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the probe differentiates (``requires_grad``; tied tensors once)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise UserInputError("the model has no trainable parameters")
    return params


def get_flat(model: nn.Module) -> torch.Tensor:
    """The trainable parameters as one detached 1-D tensor (model order)."""
    return torch.cat([p.detach().reshape(-1) for p in trainable_parameters(model)])


@torch.no_grad()
def set_flat(model: nn.Module, vec: torch.Tensor) -> None:
    """Copy a 1-D tensor (as from :func:`get_flat`) into the trainable parameters."""
    params = trainable_parameters(model)
    n = sum(p.numel() for p in params)
    if vec.numel() != n:
        raise UserInputError(f"parameter vector has {vec.numel()} values, the model {n}")
    pos = 0
    for p in params:
        k = p.numel()
        p.copy_(vec[pos : pos + k].view_as(p).to(p.dtype))
        pos += k


def _flat_grad(loss: torch.Tensor, params: Sequence[torch.Tensor], **kw: Any) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, allow_unused=True, **kw)
    return torch.cat(
        [
            (torch.zeros_like(p) if g is None else g).reshape(-1)
            for p, g in zip(params, grads, strict=True)
        ]
    )


# ----------------------------------------------------------------------------- problem
@dataclass
class ProbeProblem:
    """A model, a data set and the run's shards.

    ``dataset[i]`` gives one sample; ``collate`` (default
    :func:`torch.utils.data.default_collate`) makes a batch; ``sample_loss(model, batch)``
    returns the per-sample losses ``(N,)``. ``shards`` are index arrays of the K workers
    (the objective weighs them equally). The model is moved to ``device`` and put in eval
    mode.
    """

    model: nn.Module
    dataset: Any
    sample_loss: SampleLoss
    shards: list[np.ndarray]
    collate: Callable[[list[Any]], Any] = default_collate
    device: str | torch.device = "cpu"

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)
        self.model = self.model.to(self.device).eval()
        self.params = trainable_parameters(self.model)
        self.dim = sum(p.numel() for p in self.params)
        self.shards = [np.asarray(s, dtype=np.int64).reshape(-1) for s in self.shards]
        if not self.shards:
            raise UserInputError("the probe needs at least one shard")
        n = len(self.dataset)
        for k, s in enumerate(self.shards):
            if len(s) == 0:
                raise UserInputError(f"shard {k} is empty")
            if s.min() < 0 or s.max() >= n:
                raise UserInputError(f"shard {k} holds indices outside [0, {n})")
        self._cache: dict[tuple[int, ...], Any] = {}
        #: None: untried; True/False: per-sample gradients by torch.func.vmap work / do not
        self.vmap_ok: bool | None = None

    @property
    def K(self) -> int:
        return len(self.shards)

    def batch(self, indices: Sequence[int] | np.ndarray, cache: bool = True) -> Any:
        """The collated batch of ``indices`` on the device (cached when ``cache``)."""
        key = tuple(int(i) for i in indices)
        if cache and key in self._cache:
            return self._cache[key]
        b = _to_device(self.collate([self.dataset[i] for i in key]), self.device)
        if cache:
            self._cache[key] = b
        return b


@dataclass
class SamplingPlan:
    """Which samples the probe uses; the same at every point (common random numbers).

    ``shard_sizes[k] = |S_k|``; ``probe[k]``: the probe set ``P_k`` (dataset indices);
    ``noise[k]``: the ``n_k`` samples of the per-sample gradients (a subset of ``P_k``);
    ``hvp``: the Hessian batch; ``iid``: the run samples the whole data set per epoch.
    """

    shard_sizes: list[int]
    probe: list[np.ndarray]
    noise: list[np.ndarray]
    hvp: np.ndarray
    iid: bool

    @property
    def probe_sizes(self) -> list[int]:
        return [len(p) for p in self.probe]

    def to_dict(self) -> dict[str, Any]:
        return {
            "shard_sizes": self.shard_sizes,
            "probe_sizes": self.probe_sizes,
            "noise_sizes": [len(s) for s in self.noise],
            "hvp_size": len(self.hvp),
            "iid": self.iid,
        }


def _rng(seed: int, *tags: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, tags)]))


def make_plan(shards: Sequence[np.ndarray], settings: ProbeSettings, *, iid: bool) -> SamplingPlan:
    """Seeded choice of the probe sets, noise samples and Hessian batch (see the module doc)."""
    K = len(shards)
    rng = _rng(settings.seed, 0x9B0BE)
    per = max(2, settings.max_samples // K)
    n_per = max(2, -(-settings.samples // K))
    h_per = max(1, -(-settings.hvp_samples // K))
    probe, noise, hvp = [], [], []
    for s in shards:
        s = np.asarray(s, dtype=np.int64)
        m = min(len(s), per)
        pk = np.sort(rng.choice(s, size=m, replace=False)) if m < len(s) else np.sort(s)
        probe.append(pk)
        noise.append(rng.choice(pk, size=min(m, n_per), replace=False))
        hvp.append(rng.choice(pk, size=min(m, h_per), replace=False))
    return SamplingPlan([len(s) for s in shards], probe, noise, np.concatenate(hvp), bool(iid))


# ----------------------------------------------------------------------------- gradients
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
    from torch.utils._pytree import tree_map

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


# ----------------------------------------------------------------------------- one point
@dataclass
class PointEstimate:
    """Every estimate at one trajectory point (see the module docstring for definitions).

    Variances are of gradients (units: loss^2 / parameter^2); ``sigma2_sample`` is one
    sample's, ``sigma2_step`` that of a step's gradient (``step_batch`` samples).
    ``*_ci`` are ``[low, high]`` at the configured confidence.
    """

    step: int
    label: str
    loss: float
    loss_se: float
    grad_norm_sq: float
    grad_norm_sq_raw: float
    grad_norm_sq_noise: float
    L_power: float
    L_rayleigh: float
    L_residual: float
    L_iterations: int
    L_converged: bool
    L_secant: float | None
    distance_to_previous: float | None
    sigma2_sample: float
    sigma2_sample_ci: list[float]
    sigma2_step: float
    sigma2_step_ci: list[float]
    sigma2_shards: list[float]
    sigma2_shards_ci: list[list[float]]
    zeta2: float
    zeta2_raw: float
    zeta2_noise: float
    seconds: float


def _t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student-t quantile ``t_{df}^{-1}(1/2 + confidence/2)``."""
    from scipy.special import stdtrit

    return float(stdtrit(max(df, 1), 0.5 + confidence / 2))


def _subset_to_population(m: int, N: int) -> float:
    """``m/(m-1) * (N-1)/N``: population variance over ``m`` of ``N`` -> over ``N``."""
    if m >= N or m < 2:
        return 1.0
    return (m / (m - 1)) * ((N - 1) / N)


def _fpc(n: int, N: int) -> float:
    """``(N - n)/(N - 1)``: variance factor of a mean of ``n`` draws without replacement."""
    if N <= 1:
        return 0.0
    return max(N - n, 0) / (N - 1)


def step_noise_factor(step_batch: int, population: int) -> float:
    """``sigma_step^2 / sigma_1^2 = (1/b) (N - b)/(N - 1)`` (Cochran 1977, Theorem 2.2)."""
    return _fpc(step_batch, population) / step_batch


def estimate_point(
    problem: ProbeProblem,
    plan: SamplingPlan,
    settings: ProbeSettings,
    *,
    step: int,
    label: str = "",
    generator: torch.Generator | None = None,
    v0: torch.Tensor | None = None,
) -> tuple[PointEstimate, torch.Tensor, torch.Tensor]:
    """Estimates at the model's current parameters.

    Returns the :class:`PointEstimate`, the probe-set gradient ``grad f_P`` (float64) and
    the power-iteration vector (to warm-start the next point). ``L_secant`` and
    ``distance_to_previous`` are filled in by :func:`probe_points`.
    """
    t0 = time.perf_counter()
    K = problem.K
    conf = settings.confidence
    # exact probe-set gradients and losses per shard
    shard_grads, shard_losses = [], []
    for pk in plan.probe:
        lv, g = mean_loss_and_gradient(problem, pk, settings.chunk_size)
        shard_grads.append(g)
        shard_losses.append(lv)
    G = torch.stack(shard_grads)  # (K, d)
    g = G.mean(0)
    # loss and its standard error (sampling P_k from S_k)
    loss = float(np.mean([float(lv.mean()) for lv in shard_losses]))
    var_loss = 0.0
    for lv, Nk in zip(shard_losses, plan.shard_sizes, strict=True):
        m = len(lv)
        if m > 1:
            s2 = float(lv.var(unbiased=False)) * _subset_to_population(m, Nk)
            var_loss += s2 / m * _fpc(m, Nk)
    loss_se = math.sqrt(var_loss) / K
    # per-sample gradients
    d_own: list[np.ndarray] = []
    d_glob: list[np.ndarray] = []
    for k, idx in enumerate(plan.noise):
        gs = per_sample_gradients(problem, idx, settings.chunk_size)
        d_own.append((gs - G[k]).pow(2).sum(1).cpu().numpy())
        d_glob.append((gs - g).pow(2).sum(1).cpu().numpy())
    # per-shard variance around grad f_k, scaled from P_k to S_k
    s2_shard, s2_shard_ci, v_shard = [], [], []
    for k in range(K):
        m, Nk, dk = len(plan.probe[k]), plan.shard_sizes[k], d_own[k]
        n = len(dk)
        c = _subset_to_population(m, Nk)
        est = c * float(dk.mean())
        se = c * float(dk.std(ddof=1)) / math.sqrt(n) * math.sqrt(_fpc(n, m)) if n > 1 else 0.0
        q = _t_quantile(conf, n - 1)
        s2_shard.append(est)
        s2_shard_ci.append([max(est - q * se, 0.0), est + q * se])
        v_shard.append(est / m * _fpc(m, Nk))
    if plan.iid:
        # pooled around grad f, strata = shards (equal weights)
        M, N = sum(plan.probe_sizes), sum(plan.shard_sizes)
        c = _subset_to_population(M, N)
        means = [float(d.mean()) for d in d_glob]
        ses2 = [
            float(d.std(ddof=1)) ** 2 / len(d) * _fpc(len(d), len(p)) if len(d) > 1 else 0.0
            for d, p in zip(d_glob, plan.probe, strict=True)
        ]
        est = c * float(np.mean(means))
        se = c * math.sqrt(sum(ses2)) / K
        q = _t_quantile(conf, sum(len(d) for d in d_glob) - K)
        s1, s1_ci = est, [max(est - q * se, 0.0), est + q * se]
        population = N
    else:
        kmax = int(np.argmax(s2_shard))
        s1, s1_ci = s2_shard[kmax], s2_shard_ci[kmax]
        population = plan.shard_sizes[kmax]
    fac = step_noise_factor(settings.step_batch, population)
    # heterogeneity and the noise of the shard gradients
    raw = float((G - g).pow(2).sum(1).mean())
    zeta_noise = (1 - 1 / K) * float(np.mean(v_shard))
    gn_raw = float(g.pow(2).sum())
    gn_noise = float(np.sum(v_shard)) / K**2
    # curvature
    hvp = make_hvp(problem, plan.hvp, settings.chunk_size)
    pw = power_iteration(
        hvp,
        problem.dim,
        iters=settings.hvp_iters,
        tol=settings.hvp_tol,
        generator=generator,
        v0=v0,
        device=problem.device,
    )
    est = PointEstimate(
        step=int(step),
        label=label,
        loss=loss,
        loss_se=loss_se,
        grad_norm_sq=max(gn_raw - gn_noise, 0.0),
        grad_norm_sq_raw=gn_raw,
        grad_norm_sq_noise=gn_noise,
        L_power=pw.norm,
        L_rayleigh=pw.rayleigh,
        L_residual=pw.residual,
        L_iterations=pw.iterations,
        L_converged=pw.converged,
        L_secant=None,
        distance_to_previous=None,
        sigma2_sample=s1,
        sigma2_sample_ci=s1_ci,
        sigma2_step=s1 * fac,
        sigma2_step_ci=[s1_ci[0] * fac, s1_ci[1] * fac],
        sigma2_shards=s2_shard,
        sigma2_shards_ci=s2_shard_ci,
        zeta2=max(raw - zeta_noise, 0.0),
        zeta2_raw=raw,
        zeta2_noise=zeta_noise,
        seconds=time.perf_counter() - t0,
    )
    return est, g, pw.vector


# ----------------------------------------------------------------------------- trajectory
@dataclass
class ProbeResult:
    """Estimates at every point and their aggregates (``to_dict()`` is JSON-ready)."""

    points: list[PointEstimate]
    plan: SamplingPlan
    settings: ProbeSettings
    estimates: dict[str, Any]
    rate: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [asdict(p) for p in self.points],
            "plan": self.plan.to_dict(),
            "settings": asdict(self.settings),
            "estimates": self.estimates,
            "measured_rate": self.rate,
        }


#: columns of points.csv (scalar fields of PointEstimate)
POINT_FIELDS: tuple[str, ...] = (
    "step",
    "label",
    "loss",
    "loss_se",
    "grad_norm_sq",
    "grad_norm_sq_raw",
    "grad_norm_sq_noise",
    "L_power",
    "L_rayleigh",
    "L_residual",
    "L_iterations",
    "L_converged",
    "L_secant",
    "distance_to_previous",
    "sigma2_sample",
    "sigma2_step",
    "zeta2",
    "zeta2_raw",
    "zeta2_noise",
    "seconds",
)


def probe_points(
    problem: ProbeProblem,
    points: Sequence[tuple[int, str, torch.Tensor]],
    settings: ProbeSettings,
    *,
    iid: bool,
    plan: SamplingPlan | None = None,
    progress: bool = False,
) -> ProbeResult:
    """Estimate at every point ``(step, label, flat parameters)`` and aggregate.

    Aggregates (``estimates``): ``L`` = max over points of the power estimate and of the
    secants; ``sigma2`` = the point with the largest step noise; ``zeta2`` = max over
    points (fed to the bound only for non-i.i.d. shards); ``F0`` from the first point.
    """
    from tqdm.auto import tqdm

    if not points:
        raise UserInputError("the probe needs at least one point")
    plan = plan or make_plan(problem.shards, settings, iid=iid)
    gen = torch.Generator().manual_seed(int(_rng(settings.seed, 0x1A).integers(2**62)))
    out: list[PointEstimate] = []
    prev_x = prev_g = v = None
    bar = tqdm(points, desc="probe", unit="point", disable=not progress, leave=False)
    for step, label, x in bar:
        bar.set_postfix(step=step)
        set_flat(problem.model, x.to(problem.device))
        est, g, v = estimate_point(
            problem,
            plan,
            settings,
            step=step,
            label=label,
            generator=gen,
            v0=v if settings.hvp_warm_start else None,
        )
        xd = x.to(problem.device, torch.float64)
        if prev_x is not None:
            dist = float((xd - prev_x).norm())
            est.distance_to_previous = dist
            est.L_secant = float((g - prev_g).norm()) / dist if dist > 0 else None
        prev_x, prev_g = xd, g
        out.append(est)
    bar.close()
    return ProbeResult(out, plan, settings, aggregate(out, settings, iid=iid))


def aggregate(
    points: Sequence[PointEstimate], settings: ProbeSettings, *, iid: bool
) -> dict[str, Any]:
    """The constants fed to the bound, with how each was obtained (see :func:`probe_points`)."""
    p_max = max(points, key=lambda p: p.L_power)
    secants = [p.L_secant for p in points if p.L_secant is not None]
    L_sec = max(secants) if secants else None
    L = max(p_max.L_power, L_sec or 0.0)
    s_max = max(points, key=lambda p: p.sigma2_step)
    z_max = max(points, key=lambda p: p.zeta2)
    first = points[0]
    best = min(points, key=lambda p: p.loss)
    return {
        "L": {
            "value": L,
            "power_max": p_max.L_power,
            "power_max_step": p_max.step,
            "secant_max": L_sec,
            "note": "local lower estimate of the global L: largest ||Hv|| of power iteration "
            "on the Hessian of a fixed batch at the visited points, and secants "
            "||grad f(x_j) - grad f(x_j-1)||/||x_j - x_j-1|| along the trajectory",
        },
        "sigma2": {
            "value": s_max.sigma2_step,
            "ci": s_max.sigma2_step_ci,
            "per_sample": s_max.sigma2_sample,
            "per_sample_ci": s_max.sigma2_sample_ci,
            "step_batch": settings.step_batch,
            "at_step": s_max.step,
            "confidence": settings.confidence,
            "pooling": "pooled over shards around grad f (i.i.d. shards)"
            if iid
            else "largest shard value around grad f_k (non-i.i.d. shards)",
            "note": "variance of one step's gradient (step_batch samples without "
            "replacement), largest over the points",
        },
        "zeta2": {
            "value": 0.0 if iid else z_max.zeta2,
            "measured": z_max.zeta2,
            "raw": z_max.zeta2_raw,
            "noise": z_max.zeta2_noise,
            "at_step": z_max.step,
            "fed": "0 (i.i.d. shards: every epoch reshuffles, zeta = 0 by construction; the "
            "measured value is the epoch-0 shards' heterogeneity)"
            if iid
            else "measured (noise-corrected, largest over the points)",
        },
        "F0": {
            "f_x0": first.loss,
            "f_x0_se": first.loss_se,
            "f_lower": settings.f_lower,
            "lower_bound": first.loss - settings.f_lower,
            "best_loss": best.loss,
            "best_loss_step": best.step,
            "reference": first.loss - best.loss,
            "fed": "lower_bound",
            "note": "F0 = f(x0) - f_lower feeds the bound (f_lower <= f_star, so it does not "
            "underestimate the gap); f(x0) - best loss reached is reported only",
        },
    }


def measured_rate(points: Sequence[PointEstimate], T: int, T0: int = 0) -> dict[str, Any] | None:
    """``(1/T_loc) sum_{t in [T0, T)} ||grad f(xbar_t)||^2`` from the recorded points.

    Left Riemann sum: a point at step ``s_i`` stands for the steps up to the next recorded
    step (or ``T``). Points before ``T0`` or at/after ``T`` are not used; the covered range
    ``[s_first, T)`` is reported. ``None`` without a point in ``[T0, T)``.
    """
    steps = sorted({p.step: p for p in points if T0 <= p.step < T}.items())
    if not steps:
        return None
    total, used = 0.0, []
    for j, (s, p) in enumerate(steps):
        nxt = steps[j + 1][0] if j + 1 < len(steps) else T
        total += (nxt - s) * p.grad_norm_sq
        used.append({"step": s, "weight": nxt - s, "grad_norm_sq": p.grad_norm_sq})
    span = T - steps[0][0]
    return {
        "value": total / span,
        "T": T,
        "T0": T0,
        "covered": [steps[0][0], T],
        "points": used,
        "source": "replayed checkpoints: ||grad f||^2 over the probe set at the workers' "
        "average model, left Riemann sum over the recorded steps (the trainer does "
        "not record gradient norms)",
    }


# ----------------------------------------------------------------------------- theory
def theory_scope(
    cfg: Any, algorithm: Mapping[str, Any], model: nn.Module | None = None
) -> list[str]:
    """Every way in which a run is outside the assumptions of the encoded bounds.

    ``cfg`` is a :class:`empirical.config.TrainConfig`, ``algorithm`` the resolved
    :class:`empirical.algorithms.AlgorithmConfig` as a dict. An empty list means inside.
    """
    out: list[str] = []
    name = algorithm.get("name")
    if cfg.optimizer == "adamw":
        out.append("inner optimizer AdamW: the bounds assume plain SGD steps (S1)")
    elif cfg.optimizer == "sgd_momentum":
        out.append(f"inner SGD with momentum {cfg.momentum}: the bounds assume plain SGD (S1)")
    if cfg.weight_decay:
        out.append(
            f"weight decay {cfg.weight_decay}: the run minimises f plus a "
            "regulariser, the probe measures f"
        )
    if algorithm.get("clip_grad_norm") is not None:
        out.append(
            f"gradient clipping at {algorithm['clip_grad_norm']}: clipped steps are "
            "biased, not covered"
        )
    if name != "ddp" and (
        algorithm.get("gamma") != 1
        or algorithm.get("mu") != 0
        or algorithm.get("outer") != "average"
    ):
        out.append(
            f"outer optimizer {algorithm.get('outer')} (gamma = {algorithm.get('gamma')}, "
            f"mu = {algorithm.get('mu')}): the bounds assume plain averaging (S2)"
        )
    if name == "palsgd" and algorithm.get("p", 0) > 0:
        if algorithm.get("coins") == "shared":
            out.append(
                "shared coins (authors' code): the PALSGD analysis assumes independent coins (S3)"
            )
        if algorithm.get("pull_first_tensor_only"):
            out.append("pull on the first parameter tensor only (authors' code quirk)")
        if algorithm.get("discard_batch_on_pull"):
            out.append("pull steps discard their batch (authors' code quirk)")
    if algorithm.get("outer_steps_per_sync", 1) > 1:
        out.append(
            f"{algorithm['outer_steps_per_sync']} outer steps per sync (authors' README quirk)"
        )
    if algorithm.get("sync_offset", 0):
        out.append(f"sync offset {algorithm['sync_offset']}: the first round is shorter than H")
    if model is not None:
        if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            out.append(
                "BatchNorm: the training loss depends on the batch; the probe uses eval "
                "mode (running statistics)"
            )
        has_buffers = any(b.is_floating_point() for b in model.buffers())
        if name != "ddp" and has_buffers and algorithm.get("buffers", "average") != "average":
            out.append(
                f"buffer policy {algorithm['buffers']!r} at syncs (the authors' code "
                "resets workers to the anchor's buffers): not averaged"
            )
        drop = [m.p for m in model.modules() if isinstance(m, nn.Dropout) and m.p > 0]
        config = getattr(model, "config", None)
        for key in ("resid_dropout", "embed_dropout", "attention_dropout"):
            if config is not None and getattr(config, key, 0) and not drop:
                drop.append(getattr(config, key))
        if drop:
            out.append(
                f"dropout {max(drop)}: training gradients carry dropout noise the probe "
                "(eval mode) does not measure"
            )
    return out


def _check_algorithm(algorithm: Mapping[str, Any]) -> str:
    name = algorithm.get("name")
    if name == "ddp":
        return "ddp"
    if name == "palsgd" and algorithm.get("p", 0) > 0:
        return "palsgd"
    return "local_sgd"


def theory_values(
    estimates: Mapping[str, Any],
    *,
    K: int,
    T: int,
    alpha: float,
    algorithm: Mapping[str, Any],
    A: int = 1,
) -> dict[str, float]:
    """The parameters handed to :func:`theory.check.check`.

    ``T`` is the length of the local phase (warm-up steps excluded). ``sigma`` is the
    square root of the step-gradient variance, ``zeta`` of the heterogeneity fed.
    """
    values: dict[str, float] = {
        "L": float(estimates["L"]["value"]),
        "sigma": math.sqrt(max(float(estimates["sigma2"]["value"]), 0.0)),
        "zeta": math.sqrt(max(float(estimates["zeta2"]["value"]), 0.0)),
        "F0": float(estimates["F0"]["lower_bound"]),
        "K": int(K),
        "T": int(T),
        "alpha": float(alpha),
    }
    name = algorithm.get("name")
    if name != "ddp":
        values.update(
            H=int(algorithm["H"]), gamma=float(algorithm["gamma"]), mu=float(algorithm["mu"])
        )
    if name == "palsgd":
        values.update(p=float(algorithm["p"]), eta=float(algorithm["eta"]))
    T0 = int(algorithm.get("T0") or 0) if name in ("post_local_sgd", "diloco", "palsgd") else 0
    if T0 > 0:
        values["T0"] = T0
    if A > 1:
        values["A"] = int(A)
    return values


def compare_with_theory(
    values: Mapping[str, float],
    measured: float | None,
    *,
    algorithm: str,
    outside: Sequence[str] = (),
    bounds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run the checker on ``values`` and set ``measured`` against every evaluated bound.

    Returns ``{"check": CheckReport.to_dict(), "text": CheckReport.to_text(),
    "comparison": [...]}``; each comparison entry has the bound's value, whether its
    conditions hold, ``ratio = measured / bound`` and a verdict. A measured value above a
    bound whose conditions hold, for a run inside the theory, is flagged as a finding
    (still one realisation, with estimated constants).
    """
    from theory.check import check

    notes = [f"outside the theory: {o}" for o in outside]
    rep = check(dict(values), bounds, algorithm=algorithm, notes=notes)
    comp = []
    for b in rep.bounds:
        entry: dict[str, Any] = {
            "bound": b.name,
            "status": b.status,
            "reason": b.reason,
            "applicable": b.applicable,
            "value": b.value,
            "conditions_hold": b.conditions_hold,
            "conditions": [asdict(c) for c in b.conditions],
            "measured": measured,
            "ratio": None,
            "verdict": "",
        }
        if b.status != "evaluated" or b.value is None:
            entry["verdict"] = f"not evaluated: {b.reason}"
        elif measured is None:
            entry["verdict"] = "no measured rate (no recorded point in the local phase)"
        else:
            entry["ratio"] = measured / b.value if b.value else math.inf
            above = measured > b.value
            if not b.conditions_hold:
                entry["verdict"] = (
                    "conditions fail, the bound does not apply; measured is "
                    f"{'above' if above else 'below'} its value (indication)"
                )
            elif outside or not b.applicable:
                entry["verdict"] = (
                    "run outside the theory; measured is "
                    f"{'above' if above else 'below'} the bound (indication)"
                )
            elif above:
                entry["verdict"] = (
                    "measured ABOVE the bound with its conditions holding: a "
                    "finding (one realisation, estimated constants)"
                )
            else:
                entry["verdict"] = "measured below the bound"
        comp.append(entry)
    return {
        "algorithm": algorithm,
        "values": dict(values),
        "check": rep.to_dict(),
        "text": rep.to_text(),
        "comparison": comp,
        "warnings": [w.message for w in rep.warnings],
    }


# ----------------------------------------------------------------------------- runs
@dataclass
class RunInfo:
    """A ``palsgd train`` output directory: configuration, world size, checkpoints."""

    directory: Path
    config: Any  # empirical.config.TrainConfig
    world_size: int
    steps_done: int
    algorithm: dict[str, Any]
    checkpoints: list[tuple[int, Path]]
    summary: dict[str, Any] | None

    def best_eval_loss(self) -> dict[str, Any] | None:
        """Lowest ``eval_loss`` in ``metrics.jsonl`` (validation split, anchor), if any."""
        path = self.directory / "metrics.jsonl"
        if not path.is_file():
            return None
        from empirical.metrics import read_jsonl

        evals = [r for r in read_jsonl(path, "eval") if r.get("eval_loss") is not None]
        if not evals:
            return None
        best = min(evals, key=lambda r: r["eval_loss"])
        return {"eval_loss": best["eval_loss"], "step": best["step"]}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserInputError(f"'{path}' cannot be read as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"'{path}' does not hold a JSON object")
    return data


def load_run(directory: str | Path) -> RunInfo:
    """Read a run directory written by ``palsgd train`` (``config.json``, ``summary.json``,
    checkpoints). Missing or malformed files raise :class:`UserInputError`."""
    from empirical import checkpoint as ck
    from empirical.config import config_from_dict

    d = Path(directory)
    if not d.is_dir():
        raise UserInputError(f"run directory '{d}' does not exist")
    if not (d / "config.json").is_file():
        raise UserInputError(
            f"run directory '{d}' has no config.json: not an output directory of palsgd train"
        )
    try:
        cfg = config_from_dict(_read_json(d / "config.json"))
    except UserInputError as exc:
        raise UserInputError(f"run directory '{d}': config.json: {exc}") from None
    summary = _read_json(d / "summary.json") if (d / "summary.json").is_file() else None
    roots = [d / "checkpoints"]
    if cfg.checkpoint_dir:
        roots = [Path(cfg.checkpoint_dir), d / Path(cfg.checkpoint_dir).name, *roots]
    root = next((r for r in roots if r.is_dir()), None)
    ckpts = [(s, p) for s, p, done in ck.list_checkpoints(root)] if root else []
    ckpts = [(s, p) for s, p in ckpts if (p / ck.MANIFEST).is_file()]
    if summary is not None and "world_size" in summary:
        K = int(summary["world_size"])
    elif ckpts:
        K = int(ck.read_manifest(ckpts[-1][1])["world_size"])
    else:
        K = int(cfg.nproc)
    if summary is not None and isinstance(summary.get("algorithm"), dict):
        alg = dict(summary["algorithm"])
    else:
        from empirical.train import algorithm_config

        alg = algorithm_config(cfg).to_dict()
    done = int(summary["step"]) if summary and "step" in summary else (ckpts[-1][0] if ckpts else 0)
    return RunInfo(d, cfg, K, done, alg, ckpts, summary)


def _partition_keys(dataset: Any) -> np.ndarray | None:
    for name in ("labels", "targets"):
        keys = getattr(dataset, name, None)
        if keys is not None:
            return np.asarray(keys.cpu() if torch.is_tensor(keys) else keys)
    return None


def run_problem(info: RunInfo, device: str = "cpu") -> ProbeProblem:
    """The probe problem of a run: its model (initialised from its seed), training split and
    the K shards of epoch 0 (:func:`empirical.data.shard_indices`, as the trainer reads)."""
    from empirical import data as data_mod
    from empirical import models

    cfg = info.config
    task = models.model_task(cfg.model)
    kw: dict[str, Any] = {"tokenizer": cfg.tokenizer} if task == "lm" else {}
    try:
        ds = data_mod.build_dataset(
            cfg.dataset, path=cfg.data_path, split="train", seq_len=cfg.seq_len, seed=cfg.seed, **kw
        )
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise UserInputError(f"dataset '{cfg.dataset}': {exc}") from None
    overrides: dict[str, Any] = {}
    if task == "lm":
        context = models.model_spec(cfg.model).get("max_position_embeddings", cfg.seq_len)
        if cfg.seq_len > context:
            overrides["max_position_embeddings"] = cfg.seq_len
    model = models.build_model(
        cfg.model,
        vocab_size=getattr(ds, "vocab_size", None) if task == "lm" else None,
        num_classes=getattr(ds, "num_classes", None) if task == "image" else None,
        seed=cfg.seed,
        **overrides,
    )
    K = info.world_size
    keys = None if cfg.iid else _partition_keys(ds)
    shards = [
        np.asarray(
            data_mod.shard_indices(
                len(ds), rank=k, world_size=K, seed=cfg.seed, epoch=0, iid=cfg.iid, keys=keys
            )
        )
        for k in range(K)
    ]
    return ProbeProblem(model, ds, sample_loss_for_task(task), shards, device=device)


def run_points(
    info: RunInfo, problem: ProbeProblem, points: int
) -> list[tuple[int, str, torch.Tensor]]:
    """``(step, label, xbar)``: the initial model and up to ``points - 1`` checkpoints
    (evenly spread, the last always included); ``xbar`` averages the ranks' models."""
    from empirical import checkpoint as ck

    points = check_int("points", points, 1)
    out = [(0, "init", get_flat(problem.model).clone())]
    ck_list = [(s, p) for s, p in info.checkpoints if s > 0]
    if points > 1 and ck_list:
        n = min(points - 1, len(ck_list))
        pick = sorted({round(j * (len(ck_list) - 1) / max(n - 1, 1)) for j in range(n)})
        if n == 1:
            pick = [len(ck_list) - 1]
        model = problem.model
        init_state = {k: v.clone() for k, v in model.state_dict().items()}
        for j in pick:
            step, path = ck_list[j]
            manifest = ck.read_manifest(path)
            acc = None
            K = int(manifest["world_size"])
            for r in range(K):
                state = ck.load_rank_state(path, manifest, r, map_location="cpu")
                model.load_state_dict(state["model"])
                x = get_flat(model).to(torch.float64)
                acc = x if acc is None else acc + x
                if r == 0:
                    rank0 = {k: v.clone() for k, v in model.state_dict().items()}
            model.load_state_dict(rank0)  # buffers: rank 0's (ranks agree after a sync)
            out.append((step, f"checkpoint {path.name} (mean of {K} ranks)", acc / K))
        model.load_state_dict(init_state)
    return out


def train_reference_run(
    out: Path,
    *,
    model: str | None = None,
    dataset: str | None = None,
    data_path: str | None = None,
    nproc: int = 2,
    steps: int = 48,
    points: int = 5,
    iid: bool | None = None,
    preset: str | None = None,
    config_file: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> Path:
    """Train the short run the probe replays; returns its output directory ``out``.

    Without ``preset``/``config_file`` the run is inside the theory: PALSGD with inner SGD
    (``alpha = 0.004``, no weight decay), outer averaging, independent coins, no clipping,
    ``H = 2``, ``p = 0.2``, ``eta = 1`` (pull coefficient 0.02). On the embedded default
    (tiny GPT-Neo, embedded text, K = 2, T = 48) the constants the probe measures put this
    run inside every condition of the PALSGD bound (C1-C4), so the report compares the
    measured rate with a bound that applies. Checkpoints every ``steps // (points - 1)``
    steps.
    """
    from empirical.config import resolve_config
    from empirical.train import EXIT_OK, launch_torchrun, train

    over: dict[str, Any] = {}
    if preset is None and config_file is None:
        over.update(
            optimizer="sgd",
            alpha=0.004,
            weight_decay=0.0,
            outer="average",
            gamma=1.0,
            mu=0.0,
            clip_grad_norm=None,
            algorithm="palsgd",
            H=2,
            p=0.2,
            eta=1.0,
            T0=0,
        )
    for key, val in (
        ("model", model),
        ("dataset", dataset),
        ("data_path", data_path),
        ("iid", iid),
    ):
        if val is not None:
            over[key] = val
    interval = max(1, steps // max(points - 1, 1))
    over.update(
        T=steps,
        nproc=nproc,
        seed=seed,
        output_dir=str(out),
        overwrite=True,
        checkpoint_interval=interval,
        keep_checkpoints=steps // interval + 2,
        eval_interval=interval,
        progress=progress,
        checkpoint_dir=None,
    )
    cfg = resolve_config(preset=preset, file=config_file, overrides=over)
    code = launch_torchrun(cfg) if cfg.nproc > 1 else train(cfg)
    if code != EXIT_OK:
        raise UserInputError(
            f"the reference run in '{out}' failed with exit code {code} (see its messages above)"
        )
    return out


def probe_run(
    info: RunInfo,
    settings: ProbeSettings,
    *,
    points: int = 5,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, Any]:
    """Probe a run end to end: constants at its points, measured rate, theory check."""
    cfg = info.config
    problem = run_problem(info, device=device)
    settings = ProbeSettings(**{**asdict(settings), "step_batch": cfg.A * cfg.batch_size})
    pts = run_points(info, problem, points)
    res = probe_points(problem, pts, settings, iid=cfg.iid, progress=progress)
    alg = info.algorithm
    T0 = int(alg.get("T0") or 0) if alg.get("name") in ("post_local_sgd", "diloco", "palsgd") else 0
    T = info.steps_done
    res.rate = measured_rate(res.points, T, T0)
    outside = theory_scope(cfg, alg, problem.model)
    if info.world_size == 1:
        outside_info = ["K = 1: a single worker, zeta = 0 trivially"]
    else:
        outside_info = []
    theory: dict[str, Any] = {
        "inside_theory": not outside,
        "outside": outside,
        "info": outside_info,
    }
    if T - T0 >= 1:
        values = theory_values(
            res.estimates, K=info.world_size, T=T - T0, alpha=cfg.alpha, algorithm=alg, A=cfg.A
        )
        theory.update(
            compare_with_theory(
                values,
                None if res.rate is None else res.rate["value"],
                algorithm=_check_algorithm(alg),
                outside=outside,
            )
        )
    else:
        theory["comparison"] = []
        theory["text"] = "no local phase (T <= T0): nothing to check"
    best_eval = info.best_eval_loss()
    if best_eval is not None:
        res.estimates["F0"]["best_eval_loss"] = best_eval
    return {
        "probe_version": 1,
        "source": {
            "run_dir": str(info.directory),
            "model": cfg.model,
            "dataset": cfg.dataset,
            "K": info.world_size,
            "T": T,
            "T0": T0,
            "iid": cfg.iid,
            "algorithm": alg,
            "optimizer": cfg.optimizer,
            "alpha": cfg.alpha,
            "A": cfg.A,
            "batch_size": cfg.batch_size,
            "checkpoints": [s for s, _ in info.checkpoints],
        },
        "objective": {
            "definition": "f = (1/K) sum_k f_k, f_k = mean over the probe set P_k of shard k "
            "of the per-sample loss (language models: per-sequence mean token "
            "cross entropy); model in eval mode",
            "split": "train",
            "num_samples": len(problem.dataset),
            "parameters": problem.dim,
            "exact": res.plan.probe_sizes == res.plan.shard_sizes,
            **res.plan.to_dict(),
        },
        "settings": asdict(res.settings),
        "points": [asdict(p) for p in res.points],
        "estimates": res.estimates,
        "measured_rate": res.rate,
        "theory": theory,
    }


# ----------------------------------------------------------------------------- output
def _fmt(x: Any, spec: str = ".4g") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec) if isinstance(x, int | float) else str(x)


def render(report: Mapping[str, Any]) -> str:
    """The readable summary printed by ``palsgd probe``."""
    src, obj, est = report["source"], report["objective"], report["estimates"]
    lines = [
        f"palsgd probe: {src['model']} on {src['dataset']}, K = {src['K']} "
        f"({'i.i.d.' if src['iid'] else 'non-i.i.d.'} shards), {src['algorithm']['name']}, "
        f"T = {src['T']}, run {src['run_dir']}",
        f"objective: {obj['definition']}",
        f"  probe set {sum(obj['probe_sizes'])} of {sum(obj['shard_sizes'])} sharded samples "
        f"({'exact' if obj['exact'] else 'subsampled'}); {obj['parameters']} parameters; "
        f"{sum(obj['noise_sizes'])} per-sample gradients and a Hessian batch of "
        f"{obj['hvp_size']} per point",
        "",
        f"{'step':>6} {'loss':>8} {'||grad f||^2':>12} {'L power':>9} {'L secant':>9} "
        f"{'sigma2 step':>11} {'zeta2':>10}",
    ]
    for p in report["points"]:
        lines.append(
            f"{p['step']:>6} {_fmt(p['loss'], '.4f'):>8} {_fmt(p['grad_norm_sq'], '.4g'):>12} "
            f"{_fmt(p['L_power'], '.4g'):>9} {_fmt(p['L_secant'], '.4g'):>9} "
            f"{_fmt(p['sigma2_step'], '.4g'):>11} {_fmt(p['zeta2'], '.3g'):>10}"
        )
    L, s2, z2, f0 = est["L"], est["sigma2"], est["zeta2"], est["F0"]
    lines += [
        "",
        "constants fed to the bound:",
        f"  L       = {_fmt(L['value'])}  (power max {_fmt(L['power_max'])} at step "
        f"{L['power_max_step']}, secant max {_fmt(L['secant_max'])}; a local lower estimate "
        "of the global L)",
        f"  sigma^2 = {_fmt(s2['value'])}  [{_fmt(s2['ci'][0])}, {_fmt(s2['ci'][1])}] "
        f"({100 * s2['confidence']:.0f}% CI) for a step of {s2['step_batch']} samples; per "
        f"sample {_fmt(s2['per_sample'])}; {s2['pooling']}",
        f"  zeta^2  = {_fmt(z2['value'])}  ({z2['fed']}; measured {_fmt(z2['measured'])} = raw "
        f"{_fmt(z2['raw'])} - noise {_fmt(z2['noise'])})",
        f"  F0      = {_fmt(f0['lower_bound'])}  (f(x0) = {_fmt(f0['f_x0'])} +- "
        f"{_fmt(f0['f_x0_se'])} minus f_lower = {_fmt(f0['f_lower'])}; best loss in the run "
        f"{_fmt(f0['best_loss'])} at step {f0['best_loss_step']} gives "
        f"{_fmt(f0['reference'])}, reported only)",
    ]
    rate = report.get("measured_rate")
    if rate is None:
        lines.append("measured rate: n/a (no recorded point in the local phase)")
    else:
        lines.append(
            f"measured (1/T) sum ||grad f(xbar_t)||^2 = {_fmt(rate['value'])} over steps "
            f"[{rate['covered'][0]}, {rate['covered'][1]}) from {len(rate['points'])} points "
            "(replayed checkpoints, left Riemann sum)"
        )
    th = report["theory"]
    lines.append("")
    if th["inside_theory"]:
        lines.append(
            "theory: the run is inside the assumptions of the bounds "
            "(SGD inside, plain averaging, independent coins, no clipping)"
        )
    else:
        lines.append("theory: the run is OUTSIDE the theory; the numbers are an indication:")
        lines += [f"  - {o}" for o in th["outside"]]
    lines += [f"  info: {o}" for o in th.get("info", [])]
    if th.get("text"):
        lines += ["", th["text"]]
    comp = th.get("comparison") or []
    if comp:
        lines += ["", "measured vs bound:"]
        for c in comp:
            lines.append(
                f"  {c['bound']}: bound {_fmt(c['value'])}, measured "
                f"{_fmt(c['measured'])}, ratio {_fmt(c['ratio'])}: {c['verdict']}"
            )
    elif th.get("check") is not None:
        lines += ["", "measured vs bound: no bound was evaluated for this configuration"]
    return "\n".join(lines)


def write_outputs(report: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """``probe.json`` (everything) and ``points.csv`` (:data:`POINT_FIELDS`) under ``out``."""
    from empirical.metrics import atomic_write_json

    out.mkdir(parents=True, exist_ok=True)
    js = atomic_write_json(out / "probe.json", report)
    path = out / "points.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(POINT_FIELDS), extrasaction="ignore")
        w.writeheader()
        for p in report["points"]:
            w.writerow({k: ("" if p.get(k) is None else p.get(k)) for k in POINT_FIELDS})
    return {"json": js, "csv": path}


# ----------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd probe``."""
    src = parser.add_argument_group("what to probe")
    src.add_argument(
        "--run",
        metavar="DIR",
        help="output directory of a palsgd train run "
        "(config.json, checkpoints); without it a short run is trained first",
    )
    src.add_argument("--model", help="model of the run to train (default gptneo-tiny)")
    src.add_argument("--dataset", help="dataset of the run to train (default embedded-text)")
    src.add_argument("--data-path", dest="data_path", help="file or folder of the dataset")
    src.add_argument(
        "--train-preset",
        dest="train_preset",
        metavar="NAME",
        help="trainer preset of the run to train (default: a PALSGD run inside "
        "the theory: inner SGD, outer averaging, no clipping)",
    )
    src.add_argument(
        "--train-config",
        dest="train_config",
        metavar="FILE",
        help="trainer YAML/JSON options of the run to train",
    )
    src.add_argument("--nproc", type=int, default=2, help="workers K of the run to train (2)")
    src.add_argument("--steps", type=int, default=48, help="steps T of the run to train (48)")
    src.add_argument(
        "--iid",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="i.i.d. shards (--no-iid: each worker owns a block of the data)",
    )
    est = parser.add_argument_group("estimation")
    est.add_argument(
        "--points",
        type=int,
        default=5,
        help="trajectory points: the initial model and checkpoints (5)",
    )
    est.add_argument(
        "--samples", type=int, default=64, help="per-sample gradients per point for sigma^2 (64)"
    )
    est.add_argument(
        "--max-samples",
        dest="max_samples",
        type=int,
        default=512,
        help="probe-set size; all of the data when it is smaller (512)",
    )
    est.add_argument(
        "--hvp-samples",
        dest="hvp_samples",
        type=int,
        default=32,
        help="batch of the Hessian-vector products (32)",
    )
    est.add_argument(
        "--hvp-iters",
        dest="hvp_iters",
        type=int,
        default=20,
        help="power-iteration steps at most (20)",
    )
    est.add_argument(
        "--hvp-tol",
        dest="hvp_tol",
        type=float,
        default=1e-3,
        help="relative stopping tolerance of the power iteration (1e-3)",
    )
    est.add_argument("--confidence", type=float, default=0.95, help="CI level (0.95)")
    est.add_argument(
        "--f-lower",
        dest="f_lower",
        type=float,
        default=0.0,
        help="lower bound of the loss, f_star >= f_lower (0: cross entropy)",
    )
    est.add_argument("--seed", type=int, default=0, help="seed of every random choice (0)")
    est.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (cpu)")
    out = parser.add_argument_group("output")
    out.add_argument(
        "--out", metavar="DIR", help="output directory (default: RUN/probe, or runs/probe)"
    )
    out.add_argument("--json", action="store_true", help="print probe.json instead of text")
    out.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bars"
    )


def _device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserInputError(f"device '{name}' requested but CUDA is not available")
    if name != "cpu" and not name.startswith("cuda"):
        raise UserInputError(f"unknown device '{name}': use cpu, cuda or cuda:N")
    return name


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd probe``; 0 on success (bad input raises UserInputError)."""
    from empirical import models

    settings = ProbeSettings(
        samples=args.samples,
        max_samples=args.max_samples,
        hvp_samples=args.hvp_samples,
        hvp_iters=args.hvp_iters,
        hvp_tol=args.hvp_tol,
        confidence=args.confidence,
        f_lower=args.f_lower,
        seed=args.seed,
    )
    points = check_int("points", args.points, 1)
    device = _device(args.device)
    if args.run is not None:
        given = [
            f"--{n.replace('_', '-')}"
            for n in ("model", "dataset", "data_path", "train_preset", "train_config", "iid")
            if getattr(args, n) is not None
        ]
        if given:
            raise UserInputError(
                f"--run probes an existing run; {', '.join(given)} apply only "
                "to the run the probe trains itself"
            )
        run_dir = Path(args.run)
        out = Path(args.out) if args.out else run_dir / "probe"
        info = load_run(run_dir)
        check_output_dir(out, "--out" if args.out else "--run (its probe/ folder)")
    else:
        if args.model is not None:
            models.model_task(args.model)  # unknown names: UserInputError (exit 2)
        if args.dataset is not None:
            from empirical.data import DATASET_NAMES

            if args.dataset not in DATASET_NAMES:
                raise UserInputError(
                    f"unknown dataset '{args.dataset}': known datasets are "
                    f"{', '.join(DATASET_NAMES)}"
                )
        nproc = check_int("nproc", args.nproc, 1)
        steps = check_int("steps", args.steps, 1)
        out = Path(args.out) if args.out else Path("runs/probe")
        check_output_dir(out, "--out")
        run_dir = out / "run"
        if args.progress:
            print(
                f"palsgd probe: training the reference run in {run_dir} (K = {nproc}, T = {steps})",
                file=sys.stderr,
            )
        train_reference_run(
            run_dir,
            model=args.model,
            dataset=args.dataset,
            data_path=args.data_path,
            nproc=nproc,
            steps=steps,
            points=points,
            iid=args.iid,
            preset=args.train_preset,
            config_file=args.train_config,
            seed=args.seed,
            progress=args.progress,
        )
        info = load_run(run_dir)
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        report = probe_run(info, settings, points=points, device=device, progress=args.progress)
    report["seconds"] = time.perf_counter() - started
    paths = write_outputs(report, out)
    if args.json:
        from empirical.metrics import json_safe

        print(json.dumps(json_safe(report), indent=2, sort_keys=True))
    else:
        print(render(report))
        print(f"\nwrote {paths['json']} and {paths['csv']}")
    return 0
