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
for the CPU and the two ranks drift apart (a sync then also waits for the slower rank);
the model charges neither (its docstring says so).

A second part isolates the mechanism from that noise: the same communicator
(:meth:`~empirical.algorithms.base.Communicator.all_reduce_sum_async` on the same emulated
link, a buffer of the check model's sync size) with a window of idle time (a sleep, no
CPU) between start and wait, ``--windows`` fractions of the blocking all-reduce time
measured first in the same processes; the measured wait against the model's
``max(0, t_allreduce - window)`` (median of ``--mechanism-repeats``).

Run: ``python benchmarks/bench_overlap.py [--taus 1 2 3] [--H 4] [--rounds 8]
[--batch 64] [--delay-s 0.02] [--repeats 3] [--windows 0 0.25 0.5 0.75 1 1.5]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import platform
import sys
from typing import Any

import numpy as np

from core.io import emit_json
from core.options import declare, option
from empirical import cost as cm
from theory.options import notation_option

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


def _mechanism_worker(rank: int, world: int, spec: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch
    import torch.distributed as dist

    from empirical.algorithms.base import Communicator, new_stats
    from empirical.algorithms.slowlink import link_delay_fn

    comm = Communicator(None, new_stats(), delay=link_delay_fn(*spec["delay"]))
    buf = torch.zeros(spec["numel"])
    blocking = []
    for _ in range(spec["repeats"]):
        dist.barrier()
        t0 = time.perf_counter()
        comm.all_reduce_sum(buf)
        blocking.append(time.perf_counter() - t0)
    t_ar = float(np.median(blocking))
    waits = {}
    for frac in spec["windows"]:
        got = []
        for _ in range(spec["repeats"]):
            dist.barrier()
            pending = comm.all_reduce_sum_async(buf)
            time.sleep(frac * t_ar)
            t0 = time.perf_counter()
            pending.wait()
            got.append(time.perf_counter() - t0)
        waits[frac] = float(np.median(got))
    return {"t_allreduce_s": t_ar, "waits": waits}


def mechanism(windows: list[float], repeats: int, delay: tuple[float, float]) -> list[dict]:
    """Exposed wait of an overlapped all-reduce behind an idle window (module docstring)."""
    from empirical.distributed import spawn_workers

    spec = {"numel": 76296 + 1, "windows": windows, "repeats": repeats, "delay": delay}
    res = spawn_workers(_mechanism_worker, 2, spec, timeout_s=600)[0]
    t_ar = res["t_allreduce_s"]
    return [
        {
            "window_fraction": f,
            "t_allreduce_s": t_ar,
            "exposed_measured_s": res["waits"][f],
            "exposed_predicted_s": max(t_ar - f * t_ar, 0.0),
            "hidden_measured": 1.0 - res["waits"][f] / t_ar,
            "hidden_predicted": min(f, 1.0),
        }
        for f in windows
    ]


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--algorithms", nargs="+", default=["local_sgd", "palsgd"], choices=sorted(_BASE)),
    option("--taus", nargs="+", type=int, default=[1, 2, 3]),
    notation_option("H", default=4, help="default 4"),
    option("--rounds", type=int, default=8),
    option("--batch", type=int, default=64),
    option("--delay-s", type=float, default=0.02),
    option("--delay-per-byte-s", type=float, default=2e-8),
    option("--repeats", type=int, default=3, help="checks; medians are printed"),
    option("--windows", nargs="+", type=float, default=[0, 0.25, 0.5, 0.75, 1, 1.5]),
    option("--mechanism-repeats", type=int, default=5),
    option("--json", default=None, help="write the results here ('-': stdout)"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(parser, OPTIONS)
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
    mech = mechanism(args.windows, args.mechanism_repeats, (args.delay_s, args.delay_per_byte_s))
    print(
        f"mechanism: idle window vs the blocking all-reduce ({mech[0]['t_allreduce_s'] * 1e3:.1f}"
        f" ms), medians of {args.mechanism_repeats}"
    )
    print(f"{'window':>8} {'exposed meas':>13} {'exposed pred':>13} {'hidden meas':>12} "
          f"{'hidden pred':>12}")  # fmt: skip
    for m in mech:
        print(
            f"{m['window_fraction']:7.2f}x {m['exposed_measured_s'] * 1e3:11.1f}ms "
            f"{m['exposed_predicted_s'] * 1e3:11.1f}ms {100 * m['hidden_measured']:11.0f}% "
            f"{100 * m['hidden_predicted']:11.0f}%"
        )
    out = {
        "mechanism": mech,
        "machine": platform.platform(),
        "args": vars(args),
        "checks": checks,
        "per_check": per_check,
        "median": rows,
    }
    emit_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
