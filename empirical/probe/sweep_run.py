"""The short seeded runs of ``palsgd probe --sweep``: PALSGD on an objective, in one process.

The algorithm is the theory's (:mod:`theory.simulate`, the contract shared with
:mod:`empirical.algorithms`), inside the assumptions of the PALSGD bound: ``K`` workers
start at ``x0`` with the anchor ``z = x0`` (no warm-up, ``T0 = 0``); at step ``t`` worker
``k`` draws the coin ``b = theory.coins.pull_coins(seed, p, t, k, replica)``; ``b`` true:
pull ``x_k <- x_k - (alpha eta / p)(x_k - z)`` (no gradient); else the SGD step
``x_k <- x_k - (alpha / (1 - p)) g_k(x_k)`` on a fresh stochastic gradient of ``f_k``
(``p = 0``: Local SGD at ``alpha``); after step ``t`` with ``(t + 1) % H == 0`` the sync
``z <- mean_k x_k``, ``x_k <- z`` (outer averaging). The workers run one after another in
this process, so a run costs ``K`` gradients per step and no communication.

Recorded: ``||grad f(xbar_t)||^2`` at the workers' average ``xbar_t`` *before* step ``t``
for ``t = 0, e, 2e, ...`` (``e = record_every``), and the running average
``(1/t) sum_{s < t} ||grad f(xbar_s)||^2`` as a left Riemann sum over the records (exact
for ``e = 1``), the quantity the nonconvex bounds control.

Objectives: :class:`QuadraticObjective` (``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)`` with
additive Gaussian noise, the quadratic of :class:`theory.moments.MatrixQuadratic`, whose
expected curves :func:`theory.moments.exact_moments` gives exactly) and
:class:`ModelObjective` (the probe's objective ``f_P`` of a real model: minibatches of
``batch`` samples drawn without replacement from worker ``k``'s shard, ``||grad f||^2``
over the probe sets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from core.validation import check_fraction, check_int
from empirical.data import rng_of
from empirical.probe.gradients import mean_loss_and_gradient
from empirical.probe.problem import ProbeProblem, _flat_grad, get_flat, set_flat
from theory.coins import pull_coins

__all__ = ["ModelObjective", "QuadraticObjective", "RunCurve", "SweepObjective", "run_palsgd"]

#: the coin seed of every sweep run (the run's seed is the coins' replica index)
COIN_SEED = 0x5EED


class SweepObjective(Protocol):
    """What a sweep run needs of an objective ``f = (1/K) sum_k f_k``."""

    K: int

    def start(self) -> torch.Tensor:
        """The starting point ``x0`` (flat)."""
        ...

    def gradient(self, k: int, x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        """A stochastic gradient of ``f_k`` at ``x`` (unbiased; its noise drawn from ``rng``)."""
        ...

    def grad_norm_sq(self, x: torch.Tensor) -> float:
        """``||grad f(x)||^2``, exactly (no sampling noise)."""
        ...


@dataclass
class QuadraticObjective:
    """``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)``, stochastic gradient ``A (x - b_k) + xi``
    with ``xi ~ N(0, s2 I)`` (total variance ``sigma^2 = s2 d``); ``A`` ``(d, d)``, ``b``
    ``(K, d)``, ``x0`` ``(d,)``; float64."""

    A: np.ndarray
    b: np.ndarray
    s2: float
    x0: np.ndarray

    def __post_init__(self) -> None:
        self._A = torch.as_tensor(np.asarray(self.A, dtype=float))
        self._b = torch.as_tensor(np.asarray(self.b, dtype=float))
        self._bbar = self._b.mean(0)
        self._s = float(np.sqrt(self.s2))
        self.K = int(self._b.shape[0])

    def start(self) -> torch.Tensor:
        return torch.as_tensor(np.asarray(self.x0, dtype=float)).clone()

    def gradient(self, k: int, x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        noise = torch.as_tensor(rng.standard_normal(x.shape[0])) * self._s
        return self._A @ (x - self._b[k]) + noise

    def grad_norm_sq(self, x: torch.Tensor) -> float:
        return float((self._A @ (x - self._bbar)).square().sum())


class ModelObjective:
    """The probe's objective ``f_P`` of a real model (module docstring): worker ``k``'s
    stochastic gradient is the mean-loss gradient of ``batch`` samples of shard ``k``
    (without replacement); ``||grad f||^2`` is over the probe sets ``probe[k]``."""

    def __init__(
        self, problem: ProbeProblem, probe: list[np.ndarray], batch: int, chunk_size: int = 64
    ) -> None:
        self.problem, self.probe = problem, probe
        self.batch = check_int("batch", batch, 1)
        self.chunk_size = chunk_size
        self.K = problem.K
        self._x0 = get_flat(problem.model).clone()

    def start(self) -> torch.Tensor:
        return self._x0.clone()

    def gradient(self, k: int, x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        pb = self.problem
        shard = pb.shards[k]
        idx = rng.choice(shard, size=min(self.batch, len(shard)), replace=False)
        set_flat(pb.model, x)
        loss = pb.sample_loss(pb.model, pb.batch(idx, cache=False)).mean()
        return _flat_grad(loss, pb.params).to(x.dtype)

    def grad_norm_sq(self, x: torch.Tensor) -> float:
        set_flat(self.problem.model, x)
        g = sum(mean_loss_and_gradient(self.problem, p, self.chunk_size)[1] for p in self.probe)
        return float((g / len(self.probe)).square().sum())


@dataclass
class RunCurve:
    """One run: ``steps`` (the recorded ``t``), ``grad_norm_sq`` before each, and
    ``running[j] = (1/t_j) sum_{s < t_j} ||grad f(xbar_s)||^2`` at ``running_steps[j]``
    (each record's end, the last one ``T``): the left Riemann sum over the records."""

    steps: list[int]
    grad_norm_sq: list[float]
    running_steps: list[int]
    running: list[float]

    @property
    def rate(self) -> float:
        """``(1/T) sum_{t < T} ||grad f(xbar_t)||^2`` (the last running average)."""
        return self.running[-1]


def run_palsgd(
    objective: SweepObjective,
    *,
    H: int,
    p: float,
    eta: float,
    alpha: float,
    T: int,
    seed: int,
    record_every: int = 1,
) -> RunCurve:
    """One seeded PALSGD run of ``T`` steps (module docstring); ``seed`` seeds the
    gradient noise and is the coins' replica index."""
    H, T = check_int("H", H, 1), check_int("T", T, 1)
    every = check_int("record_every", record_every, 1)
    p = check_fraction("p", p, allow_zero=True, allow_one=False)
    rng = rng_of(seed, 0x5EE9)
    K = objective.K
    z = objective.start()
    X = [z.clone() for _ in range(K)]
    workers = np.arange(K)
    steps: list[int] = []
    vals: list[float] = []
    for t in range(T):
        if t % every == 0:
            steps.append(t)
            vals.append(objective.grad_norm_sq(torch.stack(X).mean(0)))
        coins = pull_coins(COIN_SEED, p, t, workers, replica=seed) if p > 0 else None
        for k in range(K):
            if coins is not None and coins[k]:
                X[k] = X[k] - (alpha * eta / p) * (X[k] - z)
            else:
                X[k] = X[k] - (alpha / (1.0 - p)) * objective.gradient(k, X[k], rng)
        if (t + 1) % H == 0:
            z = torch.stack(X).mean(0)
            X = [z.clone() for _ in range(K)]
    ends = [*steps[1:], T]
    running, total, start = [], 0.0, steps[0]
    for s, end, v in zip(steps, ends, vals, strict=True):
        total += (end - s) * v
        running.append(total / (end - start))
    return RunCurve(steps, vals, ends, running)
