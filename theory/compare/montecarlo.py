"""The comparison by Monte Carlo, with confidence intervals, on nonconvex heterogeneous problems.

Where no exact recursion exists, each configuration is simulated
(:func:`theory.simulate.simulate`, ``R`` replicas) and ``E||grad f(z_r)||^2`` at the anchor
after every sync is estimated by the replicas' mean ``m_r`` with standard error ``s_r``.
The first round reaching ``eps`` has the point estimate ``min{r: m_r <= eps}`` and the
interval ``[min{r: m_r - z s_r <= eps}, min{r: m_r + z s_r <= eps}]`` (``z = 2.576``: 99% per
round, no correction for the number of rounds).

Tuning (:func:`theory.compare.tune.tune` with :func:`mc_evaluator`) picks each method's
configuration by the point estimate on one seed; the chosen configuration is then simulated
again on fresh seeds (:func:`holdout`) so that the reported cost and interval are not biased
by the selection. A method beats another in a cell only when the intervals of their costs
separate (:func:`decide`).

Families (:data:`FAMILIES`): ``"hetero_cosine"`` (per-worker curvatures plus a common cosine,
:mod:`theory.problems.hetero_cosine`) and ``"cosine"`` (a common nonconvex curvature with
per-worker linear terms, :func:`theory.problems.make_cosine`). On both the workers' local
minimisers differ, the gradient is nonlinear, and Local SGD's fixed point is biased away from
the stationary points of ``f`` (``tests/test_compare_montecarlo.py`` shows it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.errors import UserInputError
from core.records import JsonRow
from core.validation import check_choice
from theory.algorithm import AlgorithmSpec
from theory.compare.methods import Method
from theory.problems import Problem

# make_problem, make_hetero_cosine and simulate (scipy) are imported where they run:
# `palsgd map --help` reads FAMILIES without them (tests/test_cli_startup.py)

__all__ = [
    "FAMILIES", "Z", "Estimate", "spec_of", "estimate", "estimate_many", "mc_evaluator",
    "holdout", "decide",
]  # fmt: skip

#: the normal quantile of the per-round intervals (99%)
Z = 2.576


def _hetero_cosine(zeta: float, K: int, d: int, sigma: float, seed: int) -> Problem:
    from theory.problems.hetero_cosine import make_hetero_cosine

    return make_hetero_cosine(K=K, d=d, zeta=zeta, sigma=sigma, seed=seed)


def _cosine(zeta: float, K: int, d: int, sigma: float, seed: int) -> Problem:
    from theory.problems import make_problem

    return make_problem("cosine", K=K, d=d, zeta=zeta, sigma=sigma, seed=seed, x0_value=1.5)


#: name -> build(zeta, K, d, sigma, seed)
FAMILIES: dict[str, Callable[..., Problem]] = {
    "hetero_cosine": _hetero_cosine,
    "cosine": _cosine,
}


def spec_of(
    m: Method, *, H: int, eta: float, p: float, alpha: float, gamma: float, mu: float, seed: int
) -> AlgorithmSpec:
    """The :class:`AlgorithmSpec` that ``m`` runs with these hyperparameters: its own spec
    (:data:`theory.compare.methods.METHODS`) with them set (Local SGD with an outer rate is
    the ``"diloco"`` kind with outer SGD; ``gamma = 1, mu = 0`` is averaging; the method's
    ``sync_delay``, an overlapped sync)."""
    if not m.local:
        return m.spec.replace(alpha=alpha, seed=seed)
    pull = dict(p=p, eta=eta) if m.pulls else {}
    mu = m.outer_momentum(mu)
    return m.spec.replace(
        alpha=alpha, H=H, gamma=gamma, mu=mu, seed=seed, sync_delay=m.sync_delay, **pull
    )


@dataclass(frozen=True)
class Estimate(JsonRow):
    """First round reaching ``eps`` (rounds): the point estimate ``rounds`` and its 99%
    interval ``[lo, hi]`` (``None``: not by the cap); ``diverged``: the replicas' mean
    blew up before the cap."""

    rounds: int | None
    lo: int | None
    hi: int | None
    diverged: bool = False


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def _stays(mask: np.ndarray) -> int | None:
    """The first round from which ``mask`` holds through its last round (``None``: never)."""
    if not mask.size or not mask[-1]:
        return None
    bad = np.flatnonzero(~mask)
    return int(bad[-1]) + 1 if bad.size else 0


def _estimates(g: np.ndarray, eps: np.ndarray, sustained: bool = False) -> list[Estimate]:
    """:class:`Estimate` per target from replicas x rounds values ``g``: the first passage
    below each ``eps``, then with ``sustained`` the sustained one (the mean stays below
    ``eps`` through the last round simulated, the cap: the horizon of the Monte-Carlo
    engine)."""
    with np.errstate(all="ignore"):
        mean = g.mean(axis=0)
        se = g.std(axis=0, ddof=1) / math.sqrt(g.shape[0])
    bad = ~np.isfinite(mean) | (mean > 1e100)
    stop = _first(bad)
    if stop is not None:
        mean, se = mean[:stop], se[:stop]
    eps = np.asarray(eps, dtype=float)
    first = [
        Estimate(
            rounds=_first(mean <= e),
            lo=_first(mean - Z * se <= e),
            hi=_first(mean + Z * se <= e),
            diverged=stop is not None,
        )  # fmt: skip
        for e in eps
    ]
    if not sustained:
        return first
    never = stop is not None  # a run that blows up does not stay below anything
    sustained = [
        Estimate(
            rounds=None if never else _stays(mean <= e),
            lo=None if never else _stays(mean - Z * se <= e),
            hi=None if never else _stays(mean + Z * se <= e),
            diverged=never,
        )  # fmt: skip
        for e in eps
    ]
    return first + sustained


def estimate_many(
    problem: Problem,
    m: Method,
    *,
    H: int,
    p: float,
    eta: np.ndarray,
    alpha: np.ndarray,
    gamma: np.ndarray,
    mu: float,
    eps: np.ndarray,
    cap: int,
    replicas: int,
    seed: int,
    sustained: bool = False,
) -> list[list[Estimate]]:
    """:class:`Estimate` per configuration and target (``E``: first passage below each
    ``eps``; ``2E`` with ``sustained``: then the sustained passages, :func:`_estimates`):
    ``n`` configurations (arrays ``eta,
    alpha, gamma``) of one method at one ``H`` and ``p``, simulated together in one run of
    ``n * replicas`` replicas (:func:`theory.simulate.simulate` with ``per_replica``),
    ``cap`` rounds each, the anchor recorded after every sync."""
    n = len(alpha)
    Hs = int(H) if m.local else 1
    spec = spec_of(m, H=Hs, eta=float(eta[0]), p=p, alpha=float(alpha[0]),
                   gamma=float(gamma[0]), mu=mu, seed=seed)  # fmt: skip
    per = {"alpha": np.repeat(np.asarray(alpha, dtype=float), replicas)}
    if m.pulls:
        per["eta"] = np.repeat(np.asarray(eta, dtype=float), replicas)
    if m.has_outer:
        per["gamma"] = np.repeat(np.asarray(gamma, dtype=float), replicas)
    from theory.simulate import simulate

    with np.errstate(all="ignore"):
        tr = simulate(problem, spec, T=int(cap) * Hs + 1, R=n * int(replicas), seed=seed,
                      record_every=Hs, per_replica=per)  # fmt: skip
    g = tr.grad_norm_sq.reshape(n, int(replicas), -1)
    return [_estimates(g[i], eps, sustained) for i in range(n)]


def estimate(problem: Problem, m: Method, *, H: int, eta: float, p: float, alpha: float,
             gamma: float, mu: float, eps: np.ndarray, cap: int, replicas: int,
             seed: int, sustained: bool = False) -> list[Estimate]:  # fmt: skip
    """:class:`Estimate` per target of one configuration (:func:`estimate_many`)."""
    return estimate_many(
        problem, m, H=H, p=p, eta=np.array([eta]), alpha=np.array([alpha]),
        gamma=np.array([gamma]), mu=mu, eps=eps, cap=cap, replicas=replicas, seed=seed,
        sustained=sustained,
    )[0]  # fmt: skip


def mc_evaluator(problem: Problem, *, replicas: int, seed: int) -> Callable:
    """An evaluator for :func:`theory.compare.tune.tune`: point estimates of the first and
    the sustained rounds (``2E`` targets; -1: not reached by the cap) of each
    configuration, simulated on ``seed`` (``known`` is not used); the
    configurations sharing ``p`` and a cap run together (:func:`estimate_many`)."""

    def evaluate(m, *, H, eta, p, alpha, gamma, eps, cap, group, mu, known=None):
        n, E = len(alpha), 2 * np.size(eps)
        rounds = np.full((n, E), -1, dtype=np.int64)
        div = np.zeros(n, dtype=bool)
        keys = sorted({(float(p[i]), int(cap[i])) for i in range(n)})
        for pk, ck in keys:
            idx = [i for i in range(n) if (float(p[i]), int(cap[i])) == (pk, ck)]
            ests = estimate_many(
                problem, m, H=H, p=pk, eta=np.asarray(eta)[idx], alpha=np.asarray(alpha)[idx],
                gamma=np.asarray(gamma)[idx], mu=float(mu), eps=eps, cap=ck,
                replicas=replicas, seed=seed, sustained=True,
            )  # fmt: skip
            for i, est in zip(idx, ests, strict=True):
                rounds[i] = [-1 if x.rounds is None else x.rounds for x in est]
                div[i] = est[0].diverged
        return rounds, div

    return evaluate


def holdout(problem: Problem, m: Method, *, config: dict[str, float], eps: float, cap: int,
            replicas: int, seed: int) -> Estimate:  # fmt: skip
    """The tuned configuration simulated again on a fresh ``seed`` (the reported estimate)."""
    return estimate(problem, m, eps=np.array([eps]), cap=cap, replicas=replicas, seed=seed,
                    **config)[0]  # fmt: skip


def decide(a: tuple[float, float] | None, b: tuple[float, float] | None) -> str:
    """``"a"``, ``"b"`` or ``"undecided"``: which cost interval ``(lo, hi)`` lies wholly below
    the other (``None``: not reached, an interval at infinity)."""
    inf = (math.inf, math.inf)
    a, b = a or inf, b or inf
    if a[1] < b[0]:
        return "a"
    if b[1] < a[0]:
        return "b"
    return "undecided"


def build_family(name: str, *, zeta: float, K: int, d: int, sigma: float, seed: int) -> Problem:
    """A problem of the family ``name`` (:data:`FAMILIES`) with heterogeneity ``zeta``."""
    check_choice("family", name, tuple(FAMILIES))
    if not (math.isfinite(zeta) and zeta >= 0):
        raise UserInputError(f"zeta must be a finite number >= 0, got {zeta}")
    return FAMILIES[name](zeta, K, d, sigma, seed)
