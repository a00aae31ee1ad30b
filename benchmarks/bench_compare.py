"""The exact comparison engine: a 1,000-cell map against a per-step loop, in one run.

The map: ``H`` in {16, 32, 64, 256, 1024} x ``eta`` in {1, 5, 20, 50, 200} x ``p`` in
{0.2, 0.5} x ``zeta`` in {0.3, 1, 3, 10} x ``eps`` in {0.05, 0.02, 0.01, 0.005, 0.002}, one
budget (2e5 gradient evaluations per worker): 1,000 cells, every method (minibatch SGD,
Local SGD, DiLoCo, PALSGD with both outer families and with shared coins) tuned over
25 x 4 configurations (grids extended at their edges until every optimum is interior or a cap
is reached, tuned for the first and the sustained passage, every optimum rechecked in long
double), without the bounds' side (:func:`theory.compare.run_map`).

The reference: the same numbers by a per-step loop: the pair moments of a round propagated
one local step at a time and the anchor's moments one round at a time until the smallest
target is reached or the cap, on a sample of the map's tuned and untuned configurations. It
prints the map's time, the per-configuration time of both, their ratio, and asserts that
the two agree. Target: the map in under 60 s on two cores.

    python benchmarks/bench_compare.py [--sample 12] [--small]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from core.options import declare, option
from theory.compare import METHODS, MapSpec, run_map
from theory.compare.exact import Quadratic
from theory.compare.pairs import _aggregate, pair_step_matrix, start_state
from theory.compare.scan import anchor_map, start_vector
from theory.moments.rounds import Z2
from theory.problems.hessians import make_hetero_hessian

FULL = dict(
    H=(16, 32, 64, 256, 1024),
    eta=(1.0, 5.0, 20.0, 50.0, 200.0),
    p=(0.2, 0.5),
    zeta=(0.3, 1.0, 3.0, 10.0),
    eps=(0.05, 0.02, 0.01, 0.005, 0.002),
)
SMALL = dict(H=(16, 256), eta=(5.0, 200.0), p=(0.5,), zeta=(3.0,), eps=(0.05, 0.002))


def per_step_rounds(q: Quadratic, m, *, H, eta, p, alpha, gamma, mu, eps, cap) -> int:
    """The first round reaching ``eps`` by the naive loop (-1: not by ``cap``)."""
    K = q.K
    H = 1 if m.kind == "sgd" else H
    p = p if m.pulls else 0.0
    eta = eta if m.pulls else 0.0
    pairs = [(j, k) for j in range(K) for k in range(j, K) if m.shared or j == k]
    one = np.ones(1)
    mom = {}
    for j, k in pairs:
        P = pair_step_matrix(
            q.lam[None, :, j], q.lam[None, :, k], q.delta[None, :, j], q.delta[None, :, k],
            q.s2[None, :], alpha * one[:, None], eta * one[:, None], p * one[:, None],
            same_coin=m.shared or j == k, same_worker=j == k,
        )[0]  # fmt: skip
        u = start_state((q.lam.shape[0],))
        for _ in range(H):
            u = np.einsum("dij,dj->di", P, u)
        mom[j, k] = u[None]
    rm = _aggregate(mom, K, m.shared)
    outer = "sgd" if m.outer in ("sgd", "none") else "nesterov"
    g = 1.0 if m.kind == "sgd" else gamma
    mu_ = mu if outer == "nesterov" else 0.0
    M = anchor_map(rm, outer, np.array([g]), np.array([mu_]))[0]
    v = start_vector(q.y0, 1)[0]
    for r in range(cap + 1):
        val = float(np.sum(q.weight * v[:, Z2]))
        if val <= eps:
            return r
        if not np.isfinite(val) or val > 1e200:
            return -1
        v = np.einsum("dij,dj->di", M, v)
    return -1


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--sample", type=int, default=12, help="configurations for the loop"),
    option("--small", action="store_true", help="a 16-cell map (a smoke run)"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args()
    axes = SMALL if args.small else FULL
    # the loop checks first passages: the map tunes both criteria alike, so reading the
    # first-passage answers costs nothing extra
    spec = MapSpec(**axes, budgets={"grads": 2e5}, criterion="first")
    t0 = time.perf_counter()
    res = run_map(spec, bounds=False)
    t_map = time.perf_counter() - t0
    n_cells = len(res.cells)
    units = {}
    for c in res.cells:
        for name, t in c.tuned.items():
            m = METHODS[name]
            key = (c.zeta, name, 1 if m.kind == "sgd" else c.H, (c.eta, c.p) if m.pulls else None)
            units[key] = t["configs"]
    configs = sum(units.values())
    print(f"map: {n_cells} cells in {t_map:.1f} s (target < 60 s on two cores)")
    rng = np.random.default_rng(0)
    probs = {z: Quadratic.of(make_hetero_hessian(zeta=z)) for z in spec.zeta}
    picks = rng.choice(len(res.cells), size=min(args.sample, n_cells), replace=False)
    t_loop, agree, n = 0.0, 0, 0
    for i in picks:
        c = res.cells[int(i)]
        for name, t in c.tuned.items():
            if t["rounds"] is None:
                continue
            m = METHODS[name]
            t1 = time.perf_counter()
            r = per_step_rounds(
                probs[c.zeta], m, H=c.H, eta=c.eta, p=c.p, alpha=t["alpha"],
                gamma=t["gamma"] or 1.0, mu=t["mu"] or 0.0, eps=c.eps, cap=t["rounds"] + 1,
            )  # fmt: skip
            t_loop += time.perf_counter() - t1
            n += 1
            agree += int(r == t["rounds"])
    per_loop = t_loop / max(n, 1)
    per_map = t_map / max(configs, 1)
    print(
        f"per configuration: map {1e6 * per_map:.0f} us (over {configs} configurations with "
        f"their whole first-passage search), per-step loop {1e6 * per_loop:.0f} us (only up to "
        f"the known first passage); ratio {per_loop / per_map:.1f}x"
    )
    print(f"the loop reproduces the map's first rounds in {agree} of {n} tuned configurations")
    assert agree == n, "the per-step loop disagrees with the map"


if __name__ == "__main__":
    main()
