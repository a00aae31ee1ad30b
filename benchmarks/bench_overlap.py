"""Benchmark: blocking against overlapped sync on the emulated slow link of ``palsgd cost
check``, measured next to the cost model's prediction in the same run.

One :func:`empirical.cost.emulated_link_check` (2 gloo processes on the CPU, every
all-reduce followed by ``--delay-s + bytes * --delay-per-byte-s``; link and compute
calibrated in the same processes) runs, for each algorithm of ``--algorithms``, the
blocking sync (``sync_delay = 0``) and the overlapped sync for every ``tau`` of ``--taus``
(``sync_delay = tau``: the all-reduce started with ``async_op=True``, its outer step
landing ``tau`` local steps later, :mod:`empirical.algorithms.overlap`). Each run takes
``--rounds`` rounds of ``H`` steps plus ``tau`` steps, so its last sync lands inside the
run. The check is repeated ``--repeats`` times (compute and link calibrated afresh each
time) and the medians are printed. Reported per run, measured on rank 0 and predicted by
the cost model (:func:`empirical.cost.time_breakdown` with ``sync_delay``):

* ``time per round``: wall-clock / rounds (measured) and modelled total / rounds;
* ``sync exposed per round``: the time blocked in communication per sync (measured:
  ``time_comm_s / syncs``; predicted: the exposed ``communication`` / syncs);
* ``share hidden``: ``1 - exposed / blocking`` with ``blocking`` the same algorithm's
  blocking run in the same invocation (measured), against the model's
  ``communication_hidden / (communication + communication_hidden)``.

On two shared CPU cores the background all-reduce (gloo threads) competes with the steps
for the CPU; the model does not charge that (its docstring says so), so the measured share
can fall below the predicted one while the emulated delay (a sleep) is hidden in full.

Run: ``python benchmarks/bench_overlap.py [--taus 1 2 3] [--H 4] [--rounds 8]
[--batch 256] [--delay-s 0.02] [--repeats 3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

import numpy as np

from empirical import cost as cm

__all__ = ["configs", "summarise", "main"]

_BASE = {
    "local_sgd": {"name": "local_sgd"},
    "palsgd": {"name": "palsgd", "p": 0.2, "eta": 1.0, "seed": 3},
}


def configs(algorithms: list[str], taus: list[int], H: int, rounds: int) -> dict[str, dict]:
    """The runs: per algorithm, the blocking sync and one overlapped sync per ``tau``."""
    out: dict[str, dict] = {}
    for alg in algorithms:
        for tau in [0, *taus]:
            name = f"{alg}_tau{tau}"
            out[name] = {**_BASE[alg], "H": H, "sync_delay": tau, "T": rounds * H + tau}
    return out


def summarise(res: dict[str, Any], runs: dict[str, dict]) -> dict[str, dict]:
    """Per run: time per round, exposed sync per round and share hidden, measured and
    predicted (module docstring)."""
    rows: dict[str, dict] = {}
    for name, spec in runs.items():
        r = res["runs"][name]
        b = r["breakdown"]
        syncs = max(r["syncs"], 1)
        rounds = (spec["T"] - spec["sync_delay"]) / spec["H"]
        comm = b["communication"] + b.get("communication_hidden", 0.0)
        rows[name] = {
            "sync_delay": spec["sync_delay"],
            "round_measured_s": r["measured_s"] / rounds,
            "round_predicted_s": r["predicted_s"] / rounds,
            "exposed_measured_s": r["measured_comm_s"] / syncs,
            "exposed_predicted_s": b["communication"] / syncs,
            "hidden_predicted": b.get("communication_hidden", 0.0) / comm if comm else 0.0,
            "error": r["error"],
        }
    for name, row in rows.items():
        blocking = rows[name.rsplit("_tau", 1)[0] + "_tau0"]["exposed_measured_s"]
        row["hidden_measured"] = 1.0 - row["exposed_measured_s"] / blocking if blocking else 0.0
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", nargs="+", default=["local_sgd", "palsgd"],
                        choices=sorted(_BASE))  # fmt: skip
    parser.add_argument("--taus", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--H", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--delay-s", type=float, default=0.02)
    parser.add_argument("--delay-per-byte-s", type=float, default=2e-8)
    parser.add_argument("--repeats", type=int, default=3, help="checks; medians are printed")
    parser.add_argument("--json", default=None, help="write the results here ('-': stdout)")
    args = parser.parse_args(argv)
    runs = configs(args.algorithms, args.taus, args.H, args.rounds)
    checks, per_check = [], []
    for _ in range(args.repeats):
        res = cm.emulated_link_check(
            runs, batch=args.batch, delay_s=args.delay_s, delay_per_byte_s=args.delay_per_byte_s
        )
        checks.append(res)
        per_check.append(summarise(res, runs))
    rows = {
        name: {k: float(np.median([c[name][k] for c in per_check])) for k in per_check[0][name]}
        for name in runs
    }
    link = checks[-1]["link"]
    print(
        f"emulated link: latency {link['latency_s'] * 1e3:.1f} ms, bandwidth "
        f"{link['bandwidth_Bps'] / 1e6:.1f} MB/s (calibrated, last check); medians of "
        f"{args.repeats} checks"
    )
    print(
        f"{'run':>16} {'round meas':>11} {'round pred':>11} {'sync exp meas':>14} "
        f"{'sync exp pred':>14} {'hidden meas':>12} {'hidden pred':>12}"
    )
    for name, r in rows.items():
        print(
            f"{name:>16} {r['round_measured_s'] * 1e3:9.1f}ms {r['round_predicted_s'] * 1e3:9.1f}ms "
            f"{r['exposed_measured_s'] * 1e3:12.1f}ms {r['exposed_predicted_s'] * 1e3:12.1f}ms "
            f"{100 * r['hidden_measured']:11.0f}% {100 * r['hidden_predicted']:11.0f}%"
        )
    out = {
        "machine": platform.platform(),
        "args": vars(args),
        "checks": checks,
        "per_check": per_check,
        "median": rows,
    }
    if args.json == "-":
        print(json.dumps(out, indent=2))
    elif args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
