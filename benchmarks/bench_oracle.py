"""Exact oracle cost per configuration: round transfer maps vs the step-by-step recursion.

For PALSGD (independent coins) on a heterogeneous quadratic (d = 8, T = 4 H) at
H in {64, 256, 1024} and K in {4, 16, 64}, one run measures, per configuration:

* ``step``: :func:`theory.moments.exact_moments` (the (K+3)^2 moment matrix, step by step);
* ``round``: :func:`theory.moments.exact_oracle` (one worker's coin-path moments and
  the round map by matrix powers);
* ``batch``: :func:`theory.moments.oracle_batch` on 256 designs at once, per
  design (how the verifier calls it).

It prints the ratios and the largest relative difference of the three results. Targets:
round >= 100x step at H = 1024, K = 4, and no slower than step anywhere.

    python benchmarks/bench_oracle.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

from core.options import declare, option
from theory import problems, simulate
from theory.moments import exact_moments, oracle_batch
from theory.moments import oracle as rm


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


#: the command's options (:func:`core.options.declare`)
OPTIONS = (option("--repeat", type=int, default=3),)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(ap, OPTIONS)
    args = ap.parse_args()
    print(f"{'K':>3} {'H':>5} {'T':>6} {'step s':>9} {'round ms':>9} {'batch ms':>9} "
          f"{'step/round':>11} {'step/batch':>11} {'max rel diff':>13}")  # fmt: skip
    worst = []
    for K in (4, 16, 64):
        prob = problems.make_problem("quadratic", K=K, d=8, sigma=1.0, zeta=1.0, seed=1)
        L = float(prob.L)
        dirs = rm.directions_of(prob)
        for H in (64, 256, 1024):
            T = 4 * H
            spec = simulate.AlgorithmSpec(kind="palsgd", alpha=0.05 / L, H=H, p=0.3, eta=0.5 * L)
            t_step = _best(partial(exact_moments, prob, spec, T=T), 1)
            t_round = _best(partial(rm.exact_oracle, prob, spec, T=T), args.repeat)
            n = 256
            tile = [np.tile(getattr(dirs, f), (n, 1)) for f in ("lam", "y0", "s2", "Q")]
            kw = dict(K=np.full(n, K), alpha=np.full(n, spec.alpha), T=np.full(n, T),
                      H=np.full(n, H), p=np.full(n, 0.3), eta=np.full(n, spec.eta))  # fmt: skip
            t_batch = _best(partial(oracle_batch, *tile, **kw), args.repeat) / n
            a = exact_moments(prob, spec, T=T).mean_grad_norm_sq()
            b = rm.exact_oracle(prob, spec, T=T).mean_grad_norm_sq
            c = float(oracle_batch(*tile, **kw).mean_grad_norm_sq[0])
            diff = max(abs(b / a - 1), abs(c / a - 1))
            worst.append((K, H, t_step / t_round))
            print(f"{K:>3} {H:>5} {T:>6} {t_step:>9.3f} {t_round * 1e3:>9.2f} "
                  f"{t_batch * 1e3:>9.3f} {t_step / t_round:>10.0f}x {t_step / t_batch:>10.0f}x "
                  f"{diff:>13.1e}")  # fmt: skip
    at = {(k, h): r for k, h, r in worst}
    print(
        f"target: round/step >= 100x at H = 1024, K = 4: {at[(4, 1024)]:.0f}x; "
        f"slowest ratio anywhere {min(r for _, _, r in worst):.0f}x (target >= 1x)"
    )


if __name__ == "__main__":
    main()
