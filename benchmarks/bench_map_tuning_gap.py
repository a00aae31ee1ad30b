"""The tuner's acceptance check: the map's tuner against an outside search with much wider grids.

For each of ``--problems`` held-out problem files (seeded, drawn by
:func:`theory.compare.outside.held_out_problem`, not the map's default family) the map is
run with the first-passage criterion (``run_map``, its own tuner: 25 x 4 grids extended at
their edges), and every method in every cell is searched again by
:func:`theory.compare.outside.outside_rounds`: a fixed log grid of inner steps over
``--alpha-decades`` decades (``--per-decade`` a decade) times outer rates over
``[2^-8, 2^15]`` (``--per-octave`` an octave), each configuration evaluated by the exact
engine, the optimum rechecked in long double. The cells: ``--H`` x ``--eta`` x ``--p``, the
problem's own heterogeneity, targets ``--eps-frac`` times ``||grad f(x0)||^2``, the budgets
``--budget``. It prints, per method, the worst and median ratio tuned cost / outside cost
(acceptance: at most 1.25 everywhere) and writes every row as JSON and CSV.

    python benchmarks/bench_map_tuning_gap.py [--problems 3] [--out reports/tuning_gap]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from core.io import atomic_write_json, write_csv
from core.options import declare, option
from theory.compare import MapSpec, ProblemSource, run_map
from theory.compare.exact import Quadratic
from theory.compare.outside import GapRow, WideGrid, held_out_problem, tuning_gap
from theory.options import notation_option
from theory.problems.hessians import load_hetero_hessian

#: the acceptance bound: tuned cost at most 1.25x the outside search's
LIMIT = 1.25


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--problems", type=int, default=3, help="held-out problem files"),
    option("--first-seed", type=int, default=1, help="seed of the first problem"),
    notation_option("H", nargs="+", default=[16, 64, 256],
                    help="the sync intervals tried (default 16 64 256)"),
    notation_option("eta", nargs="+", default=[1.0, 20.0], metavar="ETA",
                    help="PALSGD's values tried (default 1 20)"),
    notation_option("p", nargs="+", default=[0.2, 0.5], metavar="P",
                    help="PALSGD's values tried (default 0.2 0.5)"),
    option("--eps-frac", type=float, nargs="+", default=[0.02, 0.002],
           help="targets as fractions of ||grad f(x0)||^2"),
    option("--budget", nargs="+", default=["grads:2e5", "rounds:2e4"]),
    option("--criterion", choices=["first", "sustained"], default="first",
           help="the acceptance is stated for first passage; the map's default is sustained"),
    option("--methods", nargs="+", default=None, help="default: every method"),
    option("--alpha-decades", type=float, default=9.0),
    option("--per-decade", type=int, default=8),
    option("--per-octave", type=int, default=2),
    option("--out", default=None, help="folder for gap.json and gap.csv"),
)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    declare(ap, OPTIONS)
    return ap.parse_args(argv)


def per_method(rows: list[GapRow]) -> dict[str, dict[str, float | int | None]]:
    """Per method: the worst and median finite ratio, cells compared, cells above
    :data:`LIMIT` and cells only the outside search reaches (``inf``)."""
    out: dict[str, dict[str, float | int | None]] = {}
    for name in dict.fromkeys(r.method for r in rows):
        rs = [r.ratio for r in rows if r.method == name and r.ratio is not None]
        fin = [x for x in rs if math.isfinite(x) and x > 0]
        out[name] = {
            "cells": len(rs),
            "worst": max(rs) if rs else None,
            "median": float(np.median(fin)) if fin else None,
            "best": min(fin) if fin else None,
            "above_limit": sum(x > LIMIT for x in rs),
            "outside_only": sum(math.isinf(x) for x in rs),
        }
    return out


def run(args: argparse.Namespace, folder: Path) -> tuple[list[GapRow], dict]:
    grid = WideGrid(alpha_decades=args.alpha_decades, per_decade=args.per_decade,
                    per_octave=args.per_octave)  # fmt: skip
    budgets = {k: float(v) for k, v in (b.split(":") for b in args.budget)}
    rows: list[GapRow] = []
    times = {}
    for seed in range(args.first_seed, args.first_seed + args.problems):
        path = held_out_problem(folder / f"held_out_{seed}.json", seed)
        prob = load_hetero_hessian(path)
        q = Quadratic.of(prob)
        g0 = q.initial_value()
        kw = {} if args.methods is None else {"methods": tuple(args.methods)}
        spec = MapSpec(
            H=tuple(args.H), eta=tuple(args.eta), p=tuple(args.p), zeta=None,
            eps=tuple(f * g0 for f in args.eps_frac), budgets=budgets, criterion=args.criterion, **kw,
        )  # fmt: skip
        t0 = time.perf_counter()
        res = run_map(spec, ProblemSource(path=str(path)), bounds=False)
        t1 = time.perf_counter()
        rows += tuning_gap(spec, res, q, prob.L, grid, path.name)
        times[path.name] = {"map_s": t1 - t0, "outside_s": time.perf_counter() - t1,
                            "K": prob.K, "d": prob.d, "L": prob.L}  # fmt: skip
        print(f"{path.name}: K = {prob.K}, d = {prob.d}, L = {prob.L:.3g}; map {t1 - t0:.1f} s, "
              f"outside search {times[path.name]['outside_s']:.1f} s", file=sys.stderr)  # fmt: skip
    return rows, {"problems": times, "grid": grid.__dict__, "limit": LIMIT}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out) if args.out else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows, meta = run(args, folder)
    summary = per_method(rows)
    print(f"{'method':16s} {'cells':>5s} {'worst':>7s} {'median':>7s} {'best':>7s} "
          f"{'>1.25':>5s} {'inf':>4s}")  # fmt: skip
    fmt = lambda x: "-" if x is None else f"{x:7.3f}"  # noqa: E731
    for name, s in summary.items():
        print(f"{name:16s} {s['cells']:5d} {fmt(s['worst'])} {fmt(s['median'])} "
              f"{fmt(s['best'])} {s['above_limit']:5d} {s['outside_only']:4d}")  # fmt: skip
    worst = max((s["worst"] for s in summary.values() if s["worst"] is not None), default=0.0)
    print(f"worst ratio tuned / outside: {worst:.3f} (limit {LIMIT})")
    if args.out:
        data = {**meta, "per_method": summary, "rows": [r.to_dict() for r in rows]}
        atomic_write_json(Path(args.out) / "gap.json", json.loads(json.dumps(data, default=str)))
        write_csv(Path(args.out) / "gap.csv", [r.to_dict() for r in rows])
    return 0 if worst <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
