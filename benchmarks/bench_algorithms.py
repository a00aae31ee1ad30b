"""Benchmark of empirical.algorithms on CPU: K gloo processes, a model of a few million
parameters, ratios measured in one run.

Measured (each ratio from the same run, paired where possible):

1. ``palsgd_over_local_sgd``: step time of PALSGD with ``p = 1e-12`` (a coin is drawn every
   step, no pull ever happens, the anchor is kept and used for the consensus) over Local SGD,
   both with outer averaging and the same ``H`` (syncs included). The two run in the same
   processes, alternating single steps. The forward/backward pass is the same computation
   in both, so the ratio is ``1 + (extra CPU time of PALSGD's next_action + step) / (CPU
   time of a Local SGD iteration)``, process CPU time (``time.process_time``, all
   threads), averaged over ranks; on a shared machine the timing noise of the
   forward/backward pass (and wall time, which also measures other users' load) would
   otherwise swamp a 2% effect. The whole-iteration ratios are reported too
   (``palsgd_over_local_sgd_cpu_total``, ``palsgd_over_local_sgd_wall_median``: median of
   paired wall-time ratios). Target <= 1.02.
2. ``pull_over_grad``: median CPU time of a pull step over that of a gradient step
   (forward, backward, inner step) in one PALSGD run (``p = 0.5``); steps followed by a
   sync are excluded (the wall-time ratio is ``pull_over_grad_wall``). Target <= 0.05.
3. ``flat_over_per_tensor``: the flat sync (parameters are views of one buffer: ONE
   all-reduce in place) over one all-reduce per parameter tensor (the authors' GPT-Neo-8M
   averaging); median of repetitions, each after a barrier. Target <= 0.5.
3b. ``sync_over_torch_average``: Local SGD's sync over torch's
   ``model_averaging.utils.average_parameters`` on an identical model in the same
   processes (alternating repetitions, consensus statistic off; the figures with it on and
   for DiLoCo's outer-Nesterov sync are printed beside). Target <= 1.05. The consensus
   statistic's squared norm at ``--consensus-params`` (124M) values is timed in the parent:
   the one-kernel form, the former chunked host loop, and a plain ``torch.dot``.
4. Memory of PALSGD vs Local SGD, in separate processes: (a) accounting,
   ``algo.memory_bytes()`` (tensors the algorithm allocates), (b) peak resident set size
   (``getrusage(RUSAGE_SELF).ru_maxrss``) after building the model, the inner optimizer and
   the algorithm and running ``2 H`` steps (maximum over ranks). ``tracemalloc`` cannot see
   torch's CPU allocations (they bypass Python's allocator), hence RSS; the memory workers
   run with ``MALLOC_MMAP_THRESHOLD_=65536`` so that glibc returns freed tensors to the OS
   and the peak RSS tracks the peak of live allocations (without it the peak varies by
   several MiB between identical runs). Expected accounted difference: two model copies,
   the anchor ``z`` and the work buffer that PALSGD with outer averaging uses for the
   consensus statistic's ``x - z`` (none with ``consensus_interval = 0``); Local SGD's
   averaging reduces the parameters in place and allocates no work buffer at all.

Usage: ``python benchmarks/bench_algorithms.py [--world-size 2] [--out results.json]``.
All randomness is seeded; the data are synthetic tensors generated up front.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import torch
from algorithms_timing import consensus_cost, memory_worker, timing_worker

from core.io import atomic_write_json
from core.options import declare, option
from empirical.distributed import spawn_workers
from theory.options import notation_option
from theory.validation import PARAMS

TARGETS = {
    "palsgd_over_local_sgd": 1.02,
    "pull_over_grad": 0.05,
    "flat_over_per_tensor": 0.5,
    "sync_over_torch_average": 1.05,
}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement, in gloo processes spawned here; the result dict of the run."""
    t0 = time.perf_counter()
    timing = spawn_workers(timing_worker, args.world_size, args, timeout_s=1800)[0]
    consensus = consensus_cost(args.consensus_params) if args.consensus_params > 0 else None
    saved_env = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"  # inherited by the spawned workers
    try:
        mem = {}
        for name in ("local_sgd", "palsgd"):
            ranks = spawn_workers(memory_worker, args.world_size, args, name, timeout_s=600)
            mem[name] = max(ranks, key=lambda r: r["peak_rss_bytes"])
            mem[name]["peak_rss_bytes_per_rank"] = [r["peak_rss_bytes"] for r in ranks]
    finally:
        if saved_env is None:
            os.environ.pop("MALLOC_MMAP_THRESHOLD_", None)
        else:
            os.environ["MALLOC_MMAP_THRESHOLD_"] = saved_env
    model_bytes = mem["palsgd"]["model_bytes"]
    acc_local = sum(mem["local_sgd"]["algorithm_bytes"].values())
    acc_pal = sum(mem["palsgd"]["algorithm_bytes"].values())
    rss_diff = mem["palsgd"]["peak_rss_bytes"] - mem["local_sgd"]["peak_rss_bytes"]
    return {
        "machine": {
            "platform": platform.platform(),
            "torch": torch.__version__,
            "threads_per_worker": 1,
            "world_size": args.world_size,
            "backend": "gloo",
        },
        "args": vars(args),
        "timing": timing,
        "consensus": consensus,
        "memory": mem,
        "ratios": {
            "palsgd_over_local_sgd": timing["palsgd_over_local_sgd"],
            "pull_over_grad": timing["pull_over_grad"],
            "flat_over_per_tensor": timing["flat_over_per_tensor"],
            "sync_over_torch_average": timing["sync_local_sgd_over_torch"],
            "extra_memory_accounted_in_model_copies": (acc_pal - acc_local) / model_bytes,
            "extra_peak_rss_in_model_copies": rss_diff / model_bytes,
        },
        "wall_s": time.perf_counter() - t0,
    }


def print_report(result: dict[str, Any], args: argparse.Namespace) -> None:
    """The ratios against their targets, and the figures behind them."""
    timing, consensus = result["timing"], result["consensus"]
    mem = result["memory"]
    model_bytes = mem["palsgd"]["model_bytes"]
    rss_diff = mem["palsgd"]["peak_rss_bytes"] - mem["local_sgd"]["peak_rss_bytes"]
    r = result["ratios"]
    print(
        f"model: {timing['n_params']:,} parameters in {timing['n_tensors']} tensors, "
        f"batch {args.batch}, K = {args.world_size} gloo processes x 1 thread"
    )
    print(
        f"step time  Local SGD {timing['step_time_local_sgd_s'] * 1e3:.1f} ms, "
        f"PALSGD(p=1e-12) {timing['step_time_palsgd_p0_s'] * 1e3:.1f} ms"
    )
    for key, target in TARGETS.items():
        verdict = "meets" if r[key] <= target else "MISSES"
        print(f"{key:26s} {r[key]:.4f}   (target <= {target}: {verdict})")
    print(
        f"{'  (whole iteration)':26s} PALSGD/Local SGD: CPU "
        f"{timing['palsgd_over_local_sgd_cpu_total']:.4f}, wall (median of pairs) "
        f"{timing['palsgd_over_local_sgd_wall_median']:.4f}; pull/grad wall "
        f"{timing['pull_over_grad_wall']:.4f}"
    )
    print(
        f"{'  (algorithm part)':26s} next_action + step CPU per step: Local SGD "
        f"{timing['algo_cpu_per_step_local_sgd_s'] * 1e3:.2f} ms, PALSGD "
        f"{timing['algo_cpu_per_step_palsgd_s'] * 1e3:.2f} ms"
    )
    print(
        f"{'grad step / pull step':26s} {timing['grad_step_s'] * 1e3:.1f} ms / "
        f"{timing['pull_step_s'] * 1e3:.2f} ms"
    )
    print(
        f"{'flat / per-tensor sync':26s} {timing['flat_sync_s'] * 1e3:.2f} ms / "
        f"{timing['per_tensor_sync_s'] * 1e3:.2f} ms"
    )
    print(
        f"extra memory PALSGD vs Local SGD: accounted {r['extra_memory_accounted_in_model_copies']:.3f}"
        f" model copies; peak RSS {rss_diff / 2**20:.1f} MiB = "
        f"{r['extra_peak_rss_in_model_copies']:.2f} model copies (model {model_bytes / 2**20:.1f} MiB)"
    )
    print(
        f"{'one sync (3.57M-class)':26s} torch average_parameters "
        f"{timing['sync_torch_average_parameters_s'] * 1e3:.2f} ms; Local SGD "
        f"{timing['sync_local_sgd_s'] * 1e3:.2f} ms (consensus on "
        f"{timing['sync_local_sgd_consensus_s'] * 1e3:.2f} ms, "
        f"{timing['sync_local_sgd_consensus_over_torch']:.3f}x); DiLoCo "
        f"{timing['sync_diloco_s'] * 1e3:.2f} ms ({timing['sync_diloco_over_torch']:.3f}x; "
        f"consensus on {timing['sync_diloco_consensus_over_torch']:.3f}x)"
    )
    if consensus is not None:
        print(
            f"{'consensus norm':26s} {consensus['n']:,} fp32 values: one kernel "
            f"{consensus['fused_s'] * 1e3:.1f} ms ({consensus['host_launches']['fused']} "
            f"launches), former chunk loop {consensus['chunked_s'] * 1e3:.1f} ms "
            f"({consensus['host_launches']['chunked']} launches), torch.dot "
            f"{consensus['dot_s'] * 1e3:.1f} ms (CPU: compute included)"
        )


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--world-size", type=int, default=2, range=PARAMS["K"], help="workers (default 2)"),
    option("--width", type=int, default=384),
    option("--depth", type=int, default=24),
    option("--batch", type=int, default=256),
    notation_option("H", default=8, help="default 8"),
    option(
        "--blocks",
        type=int,
        default=10,
        help="measured steps per algorithm = blocks * H (after warmup-blocks * H)",
    ),
    option("--warmup-blocks", type=int, default=2),
    option("--pull-steps", type=int, default=80),
    option("--comm-reps", type=int, default=15),
    option(
        "--consensus-params",
        type=int,
        default=124_000_000,
        help="size of the consensus-statistic measurement (0: skip)",
    ),
    option("--out", default=None, help="write the results as JSON here"),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args(argv)

    result = measure(args)
    print_report(result, args)
    if args.out:
        atomic_write_json(args.out, result)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
