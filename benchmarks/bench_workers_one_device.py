"""Benchmark: K workers on ONE device, as K gloo ranks or as one process of K stacked workers.

Two ``palsgd train`` runs of the same configuration (``--algorithm``, default Local SGD,
``--H 8``, GPT-Neo ``--model``, micro-batch ``--batch-size x --seq-len``), measured in one
invocation:

* ``ranks``: ``--nproc K --backend gloo`` on the device: each sync copies the parameters
  through the host (gloo);
* ``stacked``: ``--nproc 1 --workers-per-process K``: one vmapped step for the K workers,
  the sync a mean over the worker axis on the device (docs/stacked_workers.md).

From each run's ``summary.json`` (rank 0's totals; the trainer times its steps with CUDA
events on a GPU, so the figures are device times): the wall time of the steps
(``wall_s``, set-up excluded), the time in the syncs (``time_sync_s``: for the ranks the
all-reduce through the host and the outer step, for the stacked workers the mean on the
device) and its share of the wall time, tokens per second over all K workers, and the
speed ratio ``stacked / ranks``. The issue's target for K = 4 at H = 8 on one GPU: at most
10% of the time in the syncs. Printed and written as JSON (``--out``).

Run on a GPU: ``python benchmarks/bench_workers_one_device.py --device cuda --out FILE``;
``--dry-run``: tiny sizes on the CPU (checks the script end to end).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from core.io import emit_json
from core.options import declare, option
from empirical.config.flags import POSITIVE
from theory.validation import PARAMS

ROOT = Path(__file__).resolve().parents[1]

OPTIONS = (
    option("--K", type=int, default=4, range=PARAMS["K"], help="workers (default 4)"),
    option("--H", type=int, default=8, range=PARAMS["H"], help="steps between syncs (default 8)"),
    option("--T", type=int, default=64, range=PARAMS["T"], help="steps of a run (default 64)"),
    option("--model", default="gptneo-8m", help="model (default gptneo-8m)"),
    option("--algorithm", default="local_sgd", help="algorithm (default local_sgd)"),
    option(
        "--batch-size",
        type=int,
        default=16,
        range=POSITIVE,
        help="micro-batch per worker (default 16)",
    ),
    option("--seq-len", type=int, default=256, range=POSITIVE, help="context (default 256)"),
    option("--device", default="cuda", help="device of both runs (default cuda)"),
    option("--precision", default="fp32", choices=["fp32", "bf16"], help="(default fp32)"),
    option("--out", help="write the results as JSON to this file"),
    option("--dry-run", action="store_true", help="tiny sizes on the CPU"),
)


def _train(args: argparse.Namespace, out: Path, **layout: Any) -> dict[str, Any]:
    """One ``palsgd train`` run; its summary's totals (exit code checked)."""
    flags = {"T": args.T, "H": args.H, "T0": 0, "model": args.model,
             "algorithm": args.algorithm, "batch_size": args.batch_size,
             "seq_len": args.seq_len, "device": args.device, "precision": args.precision,
             "eval_interval": 0, "checkpoint_interval": 0, "log_interval": args.H,
             "output_dir": out, **layout}  # fmt: skip
    cmd = [sys.executable, "-m", "palsgd", "train", "--no-progress", "--overwrite"]
    cmd += [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        print(f"bench_workers_one_device: the run {layout} failed ({proc.returncode})",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(proc.returncode)  # palsgd train's code: 2 for a bad input
    totals = json.loads((out / "summary.json").read_text())["totals"]
    wall, sync = float(totals["wall_s"]), float(totals["time_sync_s"])
    return {
        "layout": layout,
        "wall_s": wall,
        "time_sync_s": sync,
        "sync_share": sync / wall if wall > 0 else None,
        "time_comm_s": float(totals["time_comm_s"]),
        "tokens": int(totals["tokens"]),
        "tokens_per_s": int(totals["tokens"]) / wall if wall > 0 else None,
        "syncs": int(totals["syncs"]),
    }


def main(argv: list[str] | None = None) -> int:
    """Run both layouts, print the comparison, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(parser, OPTIONS)
    args = parser.parse_args(argv)
    if args.dry_run:
        args.model, args.device, args.T, args.H = "gptneo-tiny", "cpu", 8, 4
        args.batch_size, args.seq_len = 2, 16
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        runs = {
            "ranks": _train(args, Path(tmp) / "ranks", nproc=args.K, backend="gloo"),
            "stacked": _train(args, Path(tmp) / "stacked", nproc=1, workers_per_process=args.K),
        }
    ranks, stacked = runs["ranks"], runs["stacked"]
    print(f"{args.K} workers of {args.model} on {args.device}, {args.algorithm}, H = {args.H}, "
          f"{args.batch_size} x {args.seq_len}, {args.precision}, {args.T} steps")  # fmt: skip
    for name, r in runs.items():
        print(f"  {name:<8} wall {r['wall_s']:8.2f} s, in syncs {r['time_sync_s']:7.2f} s "
              f"({100 * (r['sync_share'] or 0):5.1f}%), {r['tokens_per_s'] or 0:10.0f} tokens/s")  # fmt: skip
    speed = stacked["tokens_per_s"] / ranks["tokens_per_s"] if ranks["tokens_per_s"] else None
    print(f"  stacked / ranks tokens per second: {speed:.2f}" if speed else "")
    emit_json(args.out, {"args": vars(args), "runs": runs, "stacked_over_ranks": speed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
