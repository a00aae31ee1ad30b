"""The class oracle: seconds per design, and the class stage's share of ``palsgd verify``.

Part 1 solves the class worst case (:func:`theory.worstcase.worst_case`) at ``K = 2``,
``T = 6`` (``H = 2``, ``L = F0 = zeta = 1``) for minibatch SGD, Local SGD (iterates and
anchors), DiLoCo (Nesterov 0.7/0.9) and PALSGD with shared coins (``T = 4``: every coin path),
on both relaxations, ``--repeat`` times each, and prints the median seconds per design
(goal: at most 10 s per design at ``K = 2, T = 6`` on two cores). Part 2 (unless
``--no-verify``) runs ``palsgd verify`` on its embedded default once, writing into a
temporary directory, and prints the class stage's seconds (the sum of its per-bound times
in ``class.csv``) against the run's (goal: the whole main job within 60 s on two idle cores).

    python benchmarks/bench_worstcase.py [--repeat 3] [--no-verify] [--json FILE]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.io import emit_json
from core.options import declare, option
from theory.worstcase import worst_case

CASES = (
    ("sgd", dict(T=6)),
    ("local_sgd", dict(H=2, T=6)),
    ("local_sgd", dict(H=2, T=6, measured="anchors")),
    ("diloco", dict(H=2, T=6, measured="anchors")),
    ("palsgd", dict(H=2, T=4, p=0.3, eta=2.0, coins="shared")),
)


def per_design(repeat: int) -> list[dict]:
    rows = []
    for algorithm, params in CASES:
        for relaxation in ("full", "compact"):
            times, value = [], None
            for _ in range(repeat):
                t = time.perf_counter()
                wc = worst_case(algorithm, K=2, L=1.0, alpha=0.2, zeta=1.0, F0=1.0,
                                relaxation=relaxation, **params)  # fmt: skip
                times.append(time.perf_counter() - t)
                value = wc.value
            rows.append({"algorithm": algorithm, **params, "relaxation": relaxation,
                         "value": value, "points": wc.points,
                         "seconds": statistics.median(times)})  # fmt: skip
            print(f"{algorithm:10s} {str(params):52s} {relaxation:8s} worst case {value:9.5g} "
                  f"{wc.points:3d} points  {statistics.median(times):6.2f} s", flush=True)  # fmt: skip
    return rows


def verify_share() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "palsgd", "verify", "--out", tmp + "/r"],
                             capture_output=True, text=True)  # fmt: skip
        total = time.perf_counter() - t
        rows = list(csv.DictReader(open(Path(tmp) / "r" / "class.csv")))
    stage = sum(float(r["elapsed_s"] or 0) for r in rows)
    print(f"palsgd verify: {total:.1f} s (exit {out.returncode}); class stage {stage:.1f} s "
          f"({stage / total:.0%})")  # fmt: skip
    return {"verify_s": total, "class_stage_s": stage, "exit": out.returncode}


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--repeat", type=int, default=3, help="solves per design (median)"),
    option("--no-verify", action="store_true", help="skip part 2"),
    option("--json", metavar="FILE", help="write the figures as JSON ('-': stdout)"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(ap, OPTIONS)
    a = ap.parse_args()
    result = {"per_design": per_design(max(1, a.repeat))}
    if not a.no_verify:
        result["verify"] = verify_share()
    if a.json:
        emit_json(a.json, result)


if __name__ == "__main__":
    main()
