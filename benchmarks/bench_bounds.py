"""Benchmark: bound evaluations per second, compiled (``Bound.evaluate``) vs sympy ``subs``.

For ``--n`` random configurations (default 10^5) the bound is evaluated once, vectorised,
through :meth:`theory.bound.Bound.evaluate` (lambdified numpy function, input validation
included); the best of ``--repeat`` timings is used. Sympy substitution
(``float(expr.subs(values))``) is timed on the first ``--n-subs`` configurations (default
200) and its per-evaluation cost extrapolated. Both paths must agree (relative difference
reported and checked). Prints both rates and their ratio; ``--json FILE`` (``-`` for stdout)
writes the numbers.

Run: ``python benchmarks/bench_bounds.py [--n 100000] [--n-subs 200] [--bound local_sgd_noniid]``.
Targets: >= 1e6 evaluations/s compiled, >= 1000x faster than subs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from typing import Any

import numpy as np
from tqdm import tqdm

from core.io import emit_json
from core.options import declare, option
from theory import bounds as registry
from theory import symbols as S
from theory.bound import param_name

__all__ = ["random_configs", "run_benchmark", "main"]

#: log10 ranges (continuous) and integer ranges used to draw configurations
_LOG_RANGES = {"L": (-2, 2), "alpha": (-6, 0)}
_UNIFORM = {"sigma": (0.0, 10.0), "zeta": (0.0, 10.0), "F0": (0.0, 100.0), "beta": (0.0, 1.0)}
_INT_RANGES = {"K": (1, 256), "H": (1, 1000), "T": (10**3, 10**8), "R": (1, 1000)}
_OTHER = {
    "p": (0.0, 0.9),
    "eta": (0.0, 10.0),
    "gamma": (0.1, 2.0),
    "mu": (0.0, 0.99),
    "eps": (1e-4, 1.0),
}


def random_configs(
    names: tuple[str, ...], n: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """``n`` random valid configurations of the parameters ``names`` (arrays of length n)."""
    out: dict[str, np.ndarray] = {}
    for name in names:
        if name in _LOG_RANGES:
            lo, hi = _LOG_RANGES[name]
            out[name] = 10.0 ** rng.uniform(lo, hi, n)
        elif name in _UNIFORM:
            out[name] = rng.uniform(*_UNIFORM[name], n)
        elif name in _INT_RANGES:
            lo, hi = _INT_RANGES[name]
            out[name] = rng.integers(lo, hi + 1, n).astype(float)
        elif name in _OTHER:
            out[name] = rng.uniform(*_OTHER[name], n)
        else:
            raise KeyError(f"no sampling range for parameter {name!r}")
    return out


def run_benchmark(
    bound_name: str = "local_sgd_noniid",
    n: int = 100_000,
    n_subs: int = 200,
    repeat: int = 5,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Time both evaluation paths; return a JSON-ready dict of rates, ratio and agreement."""
    bound = registry.get(bound_name)
    rng = np.random.default_rng(seed)
    names = tuple(
        param_name(s) for s in sorted(bound.expression.free_symbols, key=lambda s: s.name)
    )
    cfg = random_configs(names, n, rng)

    bound.evaluate(**{k: v[:2] for k, v in cfg.items()})  # compile once (not timed)
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fast = bound.evaluate(**cfg)
        best = min(best, time.perf_counter() - t0)
    fast_rate = n / best

    m = min(n_subs, n)
    syms = {param_name(s): s for s in bound.expression.free_symbols}
    slow = np.empty(m)
    t0 = time.perf_counter()
    for i in tqdm(range(m), desc="sympy subs", disable=not progress, leave=False):
        slow[i] = float(bound.expression.subs({syms[k]: cfg[k][i] for k in names}))
    subs_time = time.perf_counter() - t0
    subs_rate = m / subs_time

    rel = np.abs(fast[:m] - slow) / np.maximum(np.abs(slow), 1e-300)
    return {
        "bound": bound_name,
        "n_compiled": n,
        "n_subs": m,
        "compiled_seconds": best,
        "compiled_evals_per_s": fast_rate,
        "subs_seconds": subs_time,
        "subs_evals_per_s": subs_rate,
        "speedup": fast_rate / subs_rate,
        "max_rel_diff": float(rel.max()),
        "seed": seed,
        "python": platform.python_version(),
        "symbols": [s.name for s in S.ALL if param_name(s) in names],
    }


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--bound", default="local_sgd_noniid", help="registered bound to time"),
    option("--n", type=int, default=100_000, help="configurations for Bound.evaluate"),
    option("--n-subs", type=int, default=200, help="configurations for sympy subs"),
    option("--repeat", type=int, default=5, help="timings of the compiled path (best kept)"),
    option("--seed", type=int, default=0),
    option("--json", metavar="FILE", help="write the results as JSON ('-' for stdout)"),
    option("--no-progress", action="store_true"),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(ap, OPTIONS)
    args = ap.parse_args(argv)
    if args.n < 1 or args.n_subs < 1 or args.repeat < 1:
        ap.error("--n, --n-subs and --repeat must be positive")
    res = run_benchmark(
        args.bound, args.n, args.n_subs, args.repeat, args.seed, progress=not args.no_progress
    )
    print(
        f"bound {res['bound']}: compiled Bound.evaluate {res['compiled_evals_per_s']:.3g} evals/s "
        f"({res['n_compiled']} configs in {res['compiled_seconds'] * 1e3:.2f} ms); "
        f"sympy subs {res['subs_evals_per_s']:.3g} evals/s ({res['n_subs']} configs in "
        f"{res['subs_seconds']:.2f} s); ratio {res['speedup']:.3g}x; "
        f"max relative difference {res['max_rel_diff']:.1e}",
        file=sys.stderr if args.json == "-" else sys.stdout,
    )
    emit_json(args.json, res)
    if res["max_rel_diff"] > 1e-9:
        print("compiled and sympy values disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
