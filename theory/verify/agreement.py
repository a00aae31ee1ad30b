"""Exact curves vs Monte Carlo on quadratics, and the consensus error vs H."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy import stats

from core.errors import UserInputError
from theory import moments, problems, simulate
from theory.algorithm import AlgorithmSpec
from theory.verify.montecarlo import _finite_or_none
from theory.verify.oracle_montecarlo import simulate_config
from theory.verify.records import AgreementRow, AgreementSummary, ConsensusRow
from theory.verify.sampling import ProblemCache, _child_seed, problem_constants
from theory.verify.settings import Config, VerifySettings
from theory.verify.stats import _mean_se


def exact_specs(H: int = 4) -> list[tuple[str, dict[str, float | int | str]]]:
    """The algorithms compared exactly vs Monte Carlo: (label, AlgorithmSpec kwargs)."""
    return [
        ("sgd", dict(kind="sgd", alpha=0.2)),
        ("local_sgd", dict(kind="local_sgd", alpha=0.2, H=H)),
        ("post_local_sgd", dict(kind="post_local_sgd", alpha=0.2, H=H, T0=8)),
        ("diloco", dict(kind="diloco", alpha=0.2, H=H, outer="nesterov", gamma=0.7, mu=0.9)),
        ("palsgd", dict(kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5)),
        (
            "palsgd_shared_coins",
            dict(kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5, coins="shared"),
        ),
        (
            "palsgd_outer_sgd",
            dict(kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5, outer="sgd", gamma=0.8),
        ),
        (
            "palsgd_nesterov",
            dict(
                kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5, outer="nesterov", gamma=0.7, mu=0.9
            ),
        ),
    ]


def exact_vs_mc(
    settings: VerifySettings, *, seed: int, progress: Any = None
) -> tuple[list[AgreementRow], list[AgreementSummary]]:
    """Exact expected curves (:func:`theory.moments.exact_moments`) vs the simulator's mean.

    On the heterogeneous quadratic; for every algorithm of :func:`exact_specs`, the
    standardised deviation ``z = (MC mean - exact)/se`` at every step and metric; the
    largest ``|z|`` is compared with the Bonferroni threshold over all steps, metrics and
    algorithms at the run's level. Returns (per-step rows, per-algorithm summaries).
    """
    quad, sim = moments, simulate
    prob = problems.make_problem(
        "quadratic",
        K=4,
        d=4,
        noise="gaussian",
        sigma=settings.sigma if settings.sigma is not None else 1.0,
        zeta=settings.zeta,
        seed=_child_seed(seed, 7),
    )
    L = float(prob.L)
    specs = exact_specs()
    metrics = ("grad_norm_sq", "loss_gap", "consensus")
    T, R = settings.exact_T, settings.exact_replicas
    n_tests = len(specs) * len(metrics) * T
    thr = float(stats.norm.ppf(1 - settings.level / (2 * n_tests)))
    rows, summaries = [], []
    for i, (label, kw) in enumerate(specs):
        kw = dict(kw)
        kw["alpha"] = kw["alpha"] / L
        if "eta" in kw:
            kw["eta"] = kw["eta"] * L
        spec = sim.AlgorithmSpec(**kw, seed=_child_seed(seed, 8, i))
        try:
            ex = quad.exact_moments(prob, spec, T=T)
        except UserInputError as exc:
            summaries.append(AgreementSummary(label, status=f"no exact recursion: {exc}"))
            if progress is not None:
                progress.update(1)
            continue
        with np.errstate(all="ignore"):
            tr = sim.simulate(prob, spec, T=T, R=R, seed=_child_seed(seed, 9, i))
        zmax = 0.0
        steps = np.asarray(tr.steps)
        for metric in metrics:
            e = np.asarray(getattr(ex, metric), dtype=float)[:T]
            mc = np.asarray(getattr(tr, metric), dtype=float)
            mean, se = mc.mean(axis=0), mc.std(axis=0, ddof=1) / math.sqrt(mc.shape[0])
            # floating-point rounding of deterministic steps (e.g. t = 0) is not Monte-Carlo error
            z = (mean - e) / np.sqrt(se**2 + (1e-10 * (1 + np.abs(e))) ** 2)
            zmax = max(zmax, float(np.max(np.abs(z))))
            for t in range(T):
                rows.append(
                    AgreementRow(
                        algorithm=spec.kind,
                        label=label,
                        metric=metric,
                        step=int(steps[t]),
                        exact=float(e[t]),
                        mc_mean=float(mean[t]),
                        mc_se=float(se[t]),
                        z=float(z[t]),
                    )
                )
        summaries.append(
            AgreementSummary(
                algorithm=label,
                spec={k: _finite_or_none(v) for k, v in dataclasses.asdict(spec).items()},
                T=T,
                R=R,
                max_abs_z=zmax,
                threshold=thr,
                status="agrees" if zmax <= thr else "DISAGREES",
            )
        )
        if progress is not None:
            progress.update(1)
    return rows, summaries


def consensus_vs_H(
    settings: VerifySettings,
    problem_name: str,
    problems: ProblemCache,
    *,
    seed: int,
    progress: Any = None,
) -> list[ConsensusRow]:
    """Time-averaged consensus error ``(1/K) sum_k ||x_k - xbar||^2`` vs ``H`` for Local SGD
    and PALSGD (``p = 0.2``, ``eta = 0.5 L``) with common random numbers (same seed)."""
    K = int(max(settings.K))
    prob = problems.get(problem_name, K, iid=False)
    c = problem_constants(prob)
    alpha = 0.25 / c["L"]
    rows = []
    for j, H in enumerate(settings.consensus_H):
        T = int(math.ceil(settings.consensus_T / H) * H)
        for algo, p, eta in (("local_sgd", 0.0, 0.0), ("palsgd", 0.2, 0.5 * c["L"])):
            cfg = Config(
                bound="",
                problem=problem_name,
                algorithm=AlgorithmSpec.of(algo),
                K=K,
                T=T,
                alpha=alpha,
                H=int(H),
                p=p,
                eta=eta,
                seed=_child_seed(seed, 10, j),
            )
            tr = simulate_config(prob, cfg, settings.rate_replicas)
            cons = np.asarray(tr.consensus, dtype=float).mean(axis=1)
            cons_mean, cons_se = _mean_se(cons)
            g_mean, g_se = _mean_se(tr.mean_grad_norm_sq())
            rows.append(
                ConsensusRow(
                    problem=problem_name,
                    algorithm=algo,
                    K=K,
                    H=int(H),
                    p=p,
                    eta=eta,
                    alpha=alpha,
                    T=T,
                    R=settings.rate_replicas,
                    consensus_mean=cons_mean,
                    consensus_se=cons_se,
                    grad_norm_sq_mean=g_mean,
                    grad_norm_sq_se=g_se,
                )
            )
            if progress is not None:
                progress.update(1)
    return rows
