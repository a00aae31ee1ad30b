"""Exact first and second moments of every algorithm on heterogeneous quadratics.

Problem class. Worker ``k`` minimises ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)`` with ``A``
symmetric positive semi-definite, ``b`` of shape ``(K, d)``. A stochastic gradient is
``g_k(x) = A (x - b_k) + xi`` with additive noise ``xi`` of mean zero, independent across
workers and steps, with covariance ``Sigma`` (``Sigma_k`` may depend on the worker; for the
simulator's Gaussian and Rademacher models ``Sigma = s2 * I`` with ``s2 = sigma^2 / d``;
minibatch sampling from a finite sum is additive on a quadratic too, see :func:`as_eig`). The global objective
``f = (1/K) sum_k f_k`` has minimiser ``x* = bbar = (1/K) sum_k b_k`` (on ``range(A)``) and

    f(x) - f_star = 1/2 (x - bbar)^T A (x - bbar),     grad f(x) = A (x - bbar).

Why the moments are exact. In the eigenbasis ``A = U diag(lambda) U^T`` the coordinates
decouple: coordinate ``i`` of every worker, of the anchor ``z`` and of the outer momentum
buffer evolves by an affine map whose random coefficients (the pull coins) are drawn fresh
at each step, independently of the current state, plus additive noise with variance
``(U^T Sigma U)_ii``. Coins are common to all coordinates of a worker, but a coordinate's
second moment only involves that coordinate's own moments, so per eigendirection the
augmented second-moment matrix ``S = E[y y^T]`` of ``y = (x_1..x_K, z, buf, 1)`` (the
constant 1 carries the means and the heterogeneity offsets) obeys an exact linear
recursion, step by step. This module propagates it for ``t = 0..T-1``. No symmetry between
workers is assumed: with heterogeneity the workers' means differ, and the full ``K x K``
worker block is tracked. Cost: ``O(T d K^2)`` for the local steps plus ``O(d K^3)`` per
sync.

The step (notation of the PALSGD paper, Naganuma et al., TMLR 2025, Algorithm 1): ``alpha`` inner learning rate, ``eta`` pull rate, ``p`` pull
probability. On each local step, worker ``k`` with a coin ``c ~ Bernoulli(p)``:

* pull (``c = 1``): ``x <- x - (alpha*eta/p) (x - z)``,
* gradient (``c = 0``): ``x <- x - (alpha/(1-p)) g_k(x)``.

Coins are independent across workers (``coins='independent'``, the algorithm as
described) or common to all workers (``coins='shared'``, the authors' code). Warm-up steps
``t < T0`` are minibatch SGD ``x <- x - alpha (1/K) sum_k g_k(x)``; at ``t = T0`` the
anchor is set ``z <- x`` and the outer momentum buffer to zero. The sync after local step
``t`` happens when ``(t - T0 + 1 + sync_offset) % H == 0``: with ``Delta = z - mean_k x_k``,
outer SGD is ``z <- z - gamma Delta`` (averaging is ``gamma = 1``) and outer Nesterov is the
PyTorch form ``buf <- mu buf + Delta; z <- z - gamma (Delta + mu buf)``; then every worker
restarts from ``z``. The overlapped sync (``sync_delay = tau``, :mod:`theory.algorithm`)
keeps ``q = z - mean_k x_k`` in the state, restarts every worker from the current ``z`` and
lands ``tau`` steps later (outer step on ``q``, ``x_k <- x_k + z' - z``): both are linear
maps of the state ``(x_1..x_K, z, buf, 1, q)``, so the recursion stays exact; a run ends
with the update in flight landed.

Sources of the closed forms checked against this recursion (``tests/test_quadratic.py``):
the within-round mean ``A_H = -(lambda/(lambda+eta)) (1 - c^H)``, ``c = 1 - alpha
(lambda+eta)``, the per-step mean-square contraction ``rho2 = c^2 + p(1-p) alpha^2
(eta/p - lambda/(1-p))^2`` and the noise injection ``alpha^2 s2 / (1-p)`` follow from
the two branches of one step (a pull multiplies the deviation by ``1 - alpha eta/p`` with
probability ``p``, a gradient step by ``1 - alpha lambda/(1-p)`` with probability ``1-p``)
by taking the mean and the variance over the coin; the Local SGD round mean factor ``(1-gamma) + gamma (1 - alpha lambda)^H`` is the
quadratic mean map of Khaled, Jin, Kale, Fergus, Douillard and Zaheer (NeurIPS 2025,
arXiv 2509.10439). Because every ``f_k`` has the same Hessian, ``mean_k g_k(x_k) =
A (xbar - bbar) + mean_k xi_k``: under Local SGD with averaging the averaged iterate follows
minibatch-K SGD exactly (the mechanism of Woodworth et al., ICML 2020), with or without
heterogeneous ``b_k``; the tests check this equality of the exact curves.

The pull-fraction option of the trainer (pulling only part of the parameters) is not
modelled here; a spec that asks for it is rejected.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from theory.algorithm import AlgorithmSpec, is_landing_step, is_sync_step
from theory.moments.branches import local_step_branches
from theory.moments.inputs import EigenQuadratic, as_eig, check_x0
from theory.moments.spec import local_start, moment_spec
from theory.moments.step import (
    apply_linear,
    delayed_sync_matrix,
    landing_matrix,
    local_step,
    start_matrix,
    step_map,
    sync_matrix,
    warm_step,
)
from theory.validation import validate_one


@dataclass
class ExactCurves:
    """Exact expected curves; the state is recorded before step ``t`` for ``t = 0..T-1``.

    ``loss_gap[t] = E f(xbar_t) - f_star``; ``grad_norm_sq[t] = E||grad f(xbar_t)||^2``;
    ``consensus[t] = E (1/K) sum_k ||x_k,t - xbar_t||^2``; ``anchor_dist[t] =
    E (1/K) sum_k ||x_k,t - z_t||^2`` (zero during warm-up, where the anchor is the model).
    ``final_loss_gap``, ``final_grad_norm_sq``: the same after the last step.
    Rounds: ``round_steps[r]`` is the step before which anchor ``z_r`` is in place
    (``r = 0``: start of the local phase, ``r >= 1``: after the ``r``-th sync; a sync after
    the last step gives ``T``); ``z_dist_sq[r] = E||z_r - x*||^2`` and
    ``z_mean[r] = E z_r - x*`` (shape ``(rounds, d)``), with ``x* = bbar``.
    """

    steps: np.ndarray
    loss_gap: np.ndarray
    grad_norm_sq: np.ndarray
    consensus: np.ndarray
    anchor_dist: np.ndarray = field(default_factory=lambda: np.zeros(0))
    final_loss_gap: float = math.nan
    final_grad_norm_sq: float = math.nan
    round_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    z_dist_sq: np.ndarray = field(default_factory=lambda: np.zeros(0))
    z_mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    meta: dict[str, Any] = field(default_factory=dict)

    def mean_grad_norm_sq(self) -> float:
        """``(1/T) sum_t E||grad f(xbar_t)||^2``: the quantity the nonconvex bounds control."""
        return float(np.mean(self.grad_norm_sq))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (arrays as lists)."""
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}
        out["mean_grad_norm_sq"] = self.mean_grad_norm_sq()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_csv(self) -> str:
        """Per-step CSV: ``step,loss_gap,grad_norm_sq,consensus,anchor_dist``."""
        rows = ["step,loss_gap,grad_norm_sq,consensus,anchor_dist"]
        cols = (self.steps, self.loss_gap, self.grad_norm_sq, self.consensus, self.anchor_dist)
        for t, f, g, c, a in zip(*cols, strict=True):
            rows.append(f"{int(t)},{f!r},{g!r},{c!r},{a!r}")
        return "\n".join(rows) + "\n"


# ----------------------------------------------------------------------------- engine


def exact_moments(
    problem: Any, spec: Any, *, T: int, x0: Any = None, progress: bool = False
) -> ExactCurves:
    """Exact expected curves of the algorithm ``spec`` on the quadratic ``problem``.

    ``problem``: a :class:`MatrixQuadratic`, a quadratic of :mod:`theory.problems`
    (``gaussian``, ``rademacher``, ``finite_sum`` or ``none`` noise), or any object with
    ``A`` and ``b`` (see :func:`as_eig`). ``spec``: a :class:`theory.algorithm.AlgorithmSpec`
    of a kind with a moment recursion, or a mapping of its fields read by
    :meth:`~theory.algorithm.AlgorithmSpec.of` (:func:`theory.moments.spec.moment_spec`);
    ``kind='sgd'`` (also ``'minibatch'``, ``'ddp'``) runs minibatch SGD at every step.
    ``T``: number of steps (pull steps count). ``x0``: starting point (default: the
    problem's). All workers start at ``x0``; the anchor starts at ``x0`` (``T0 = 0``) or at
    the warm-up iterate (``T0 > 0``), the outer momentum buffer at zero. ``progress``
    shows a tqdm bar over the steps. Cost ``O(T d K^2 + (T/H) d K^3)``.
    """
    prob = as_eig(problem)
    algo = moment_spec(spec)
    validate_one("T", T)
    run = _StepRun(prob, algo, prob.x0 if x0 is None else check_x0(x0, prob.b.shape[1]))
    # an unstable configuration overflows to inf: that is the answer, reported in meta
    from tqdm.auto import tqdm  # lazy: ~0.1 s (asyncio), not for `palsgd map --help`

    with np.errstate(over="ignore", invalid="ignore"):
        for t in tqdm(range(int(T)), desc="exact moments", disable=not progress, leave=False):
            run.step(t)
        run.finish(int(T))
        return run.curves()


class _StepRun:
    """The state ``S`` (d, n, n) of one run (``n = K + 3``, ``K + 4`` with an overlapped
    sync's ``q``), its per-step records and the rounds."""

    def __init__(self, prob: EigenQuadratic, algo: AlgorithmSpec, start: np.ndarray) -> None:
        self.prob, self.algo = prob, algo
        lam = prob.lam
        K, d = prob.b.shape
        self.K, self.iz, self.i1 = K, K, K + 2  # workers, z, buf, constant 1 (, q)
        self.n = K + (4 if algo.sync_delay else 3)
        self.in_flight = False
        bbar = prob.b.mean(axis=0)
        delta = prob.to_eig(prob.b - bbar).T  # (d, K): heterogeneity offsets per direction
        y0 = prob.to_eig(start - bbar)
        v0 = np.zeros((d, self.n))
        v0[:, :K] = y0[:, None]
        v0[:, self.iz] = y0
        v0[:, self.i1] = 1.0
        self.S = v0[:, :, None] * v0[:, None, :]
        a = algo.alpha
        # branch noise for unit variance, scaled per worker by s2 (d, K)
        branches = local_step_branches(lam, a, algo.eta, algo.p, 1.0)
        self.step_map = step_map(branches, delta, self.n - K)
        self.warm_noise = a**2 * prob.s2.sum(axis=1) / K**2  # Var of alpha * mean_k xi_k
        if algo.sync_delay:
            self.sync_J, self.land_J = delayed_sync_matrix(K), landing_matrix(K, algo)
        else:
            self.sync_J = sync_matrix(K, algo)
        self.start_J = start_matrix(K, self.n)
        self.rows: list[tuple[float, float, float, float]] = []
        self.r_steps: list[int] = []
        self.r_dist: list[float] = []
        self.r_mean: list[np.ndarray] = []

    def _record_round(self, step: int) -> None:
        S, iz = self.S, self.iz
        self.r_steps.append(step)
        self.r_dist.append(float(np.sum(S[:, iz, iz])))
        self.r_mean.append(self.prob.from_eig(S[:, iz, self.i1]))

    def _ybar_sq(self) -> np.ndarray:
        K = self.K
        return self.S[:, :K, :K].sum(axis=(1, 2)) / K**2

    def step(self, t: int) -> None:
        """Record the state before step ``t``, then apply the step (and a sync after it)."""
        algo, K, iz, lam = self.algo, self.K, self.iz, self.prob.lam
        local = t >= local_start(algo)
        if local and t == algo.T0:
            if algo.T0 > 0:
                self.S = apply_linear(self.start_J, self.S)
            self._record_round(t)
        S = self.S
        ybar2 = self._ybar_sq()
        diag = np.einsum("dkk->dk", S[:, :K, :K]).sum(axis=1) / K
        anchor = 0.0
        if local:
            anchor = float(np.sum(diag - 2 * S[:, :K, iz].mean(axis=1) + S[:, iz, iz]))
        self.rows.append(
            (
                0.5 * float(lam @ ybar2),
                float((lam**2) @ ybar2),
                float(np.sum(diag - ybar2)),
                anchor,
            )
        )
        if not local:
            self.S = warm_step(S, K, 1 - algo.alpha * lam, self.warm_noise)
            return
        self.S = local_step(S, K, self.step_map, self.prob.s2, algo.shared_coins)
        T0 = int(algo.T0)
        if is_landing_step(t, T0, algo.H, algo.sync_offset, algo.sync_delay):
            self.finish(t + 1)
        if is_sync_step(t, T0, algo.H, algo.sync_offset):
            self.S = apply_linear(self.sync_J, self.S)
            if algo.sync_delay:
                self.in_flight = True
            else:
                self._record_round(t + 1)

    def finish(self, step: int) -> None:
        """The outer update of an overlapped sync in flight lands before ``step``."""
        if self.in_flight:
            self.S = apply_linear(self.land_J, self.S)
            self.in_flight = False
            self._record_round(step)

    def curves(self) -> ExactCurves:
        """The records as :class:`ExactCurves` (the final values from the current state)."""
        lam, algo = self.prob.lam, self.algo
        K, d = self.prob.b.shape
        T = len(self.rows)
        loss, grad, cons, anch = np.asarray(self.rows, dtype=float).reshape(T, 4).T
        ybar2 = self._ybar_sq()
        return ExactCurves(
            steps=np.arange(T),
            loss_gap=loss,
            grad_norm_sq=grad,
            consensus=np.maximum(cons, 0.0),
            anchor_dist=np.maximum(anch, 0.0),
            final_loss_gap=0.5 * float(lam @ ybar2),
            final_grad_norm_sq=float((lam**2) @ ybar2),
            round_steps=np.asarray(self.r_steps, dtype=int),
            z_dist_sq=np.asarray(self.r_dist),
            z_mean=np.asarray(self.r_mean).reshape(len(self.r_mean), d),
            meta={
                "K": K,
                "d": d,
                "T": T,
                **algo.to_dict(),
                "diverged": not bool(np.all(np.isfinite(self.S))),
            },
        )
