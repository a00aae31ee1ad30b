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
import json
import os
import platform
import resource
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.distributed import spawn_workers

TARGETS = {
    "palsgd_over_local_sgd": 1.02,
    "pull_over_grad": 0.05,
    "flat_over_per_tensor": 0.5,
    "sync_over_torch_average": 1.05,
}


class ResidualMLP(nn.Module):
    """``depth`` residual blocks ``x + Linear(LayerNorm(x))`` of width ``width``."""

    def __init__(self, width: int, depth: int, classes: int = 10) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU())
            for _ in range(depth)
        )
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(x)


def make_model(args: argparse.Namespace, seed: int = 0) -> nn.Module:
    model = ResidualMLP(args.width, args.depth)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * p.shape[1] ** -0.5)
    return model


def make_data(
    args: argparse.Namespace, rank: int, n: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1000 + rank)
    return [
        (
            torch.randn(args.batch, args.width, generator=g),
            torch.randint(0, 10, (args.batch,), generator=g),
        )
        for _ in range(n)
    ]


@dataclass
class Timing:
    """One training iteration: the action, whether a sync followed, wall and process-CPU
    seconds of the whole iteration and of the algorithm's part (``next_action`` + ``step``)."""

    action: str
    synced: bool
    wall: float
    cpu: float
    algo_wall: float
    algo_cpu: float


def iteration(algo, batch) -> Timing:
    """One training iteration (forward/backward only on gradient steps)."""
    w0, c0 = time.perf_counter(), time.process_time()
    action = algo.next_action()
    w1, c1 = time.perf_counter(), time.process_time()
    if action == "grad":
        x, y = batch
        nn.functional.cross_entropy(algo.model(x), y).backward()
    w2, c2 = time.perf_counter(), time.process_time()
    info = algo.step()
    w3, c3 = time.perf_counter(), time.process_time()
    return Timing(
        action, info.synced, w3 - w0, c3 - c0, (w1 - w0) + (w3 - w2), (c1 - c0) + (c3 - c2)
    )


def _mean_over_ranks(value: float) -> float:
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t) / dist.get_world_size()


def _max_over_ranks(value: float) -> float:
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def timing_worker(rank: int, world: int, args: argparse.Namespace) -> dict[str, Any]:
    from tqdm.auto import tqdm

    out: dict[str, Any] = {}
    data = make_data(args, rank, 16)
    H = args.H
    bar = tqdm(total=4, desc="bench_algorithms", disable=rank != 0)

    # 1. PALSGD (coin every step, no pull) vs Local SGD, alternating single steps
    algos = {}
    for name, cfg in (
        ("local_sgd", AlgorithmConfig(name="local_sgd", H=H)),
        ("palsgd", AlgorithmConfig(name="palsgd", H=H, p=1e-12, eta=1.0, seed=0)),
    ):
        model = make_model(args)
        algos[name] = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.01))
    runs: dict[str, list[Timing]] = {"local_sgd": [], "palsgd": []}
    n_steps = args.warmup_blocks * H + args.blocks * H
    for i in range(n_steps):
        for name in ("local_sgd", "palsgd") if i % 2 == 0 else ("palsgd", "local_sgd"):
            tm = iteration(algos[name], data[i % len(data)])
            assert tm.action == "grad"
            if i >= args.warmup_blocks * H:
                runs[name].append(tm)
    loc, pal = runs["local_sgd"], runs["palsgd"]
    pairs = [b.wall / a.wall for a, b in zip(loc, pal, strict=True)]
    out["step_time_local_sgd_s"] = statistics.median(t.wall for t in loc)
    out["step_time_palsgd_p0_s"] = statistics.median(t.wall for t in pal)
    out["algo_cpu_per_step_local_sgd_s"] = sum(t.algo_cpu for t in loc) / len(loc)
    out["algo_cpu_per_step_palsgd_s"] = sum(t.algo_cpu for t in pal) / len(pal)
    extra = sum(t.algo_cpu for t in pal) - sum(t.algo_cpu for t in loc)
    out["palsgd_over_local_sgd"] = _mean_over_ranks(1.0 + extra / sum(t.cpu for t in loc))
    out["palsgd_over_local_sgd_cpu_total"] = _mean_over_ranks(
        sum(t.cpu for t in pal) / sum(t.cpu for t in loc)
    )
    out["palsgd_over_local_sgd_wall_median"] = _mean_over_ranks(statistics.median(pairs))
    out["palsgd_pull_steps"] = algos["palsgd"].stats["pull_steps"]
    out["syncs_each"] = algos["local_sgd"].stats["syncs"]
    bar.update()

    # 2. pull step vs gradient step
    model = make_model(args)
    cfg = AlgorithmConfig(name="palsgd", H=16, p=0.5, eta=1.0, seed=1)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.01))
    grad_t, pull_t, grad_c, pull_c = [], [], [], []
    for i in range(args.pull_steps):
        tm = iteration(algo, data[i % len(data)])
        if i >= 4 and not tm.synced:
            (pull_t if tm.action == "pull" else grad_t).append(tm.wall)
            (pull_c if tm.action == "pull" else grad_c).append(tm.cpu)
    out["grad_step_s"] = statistics.median(grad_t)
    out["pull_step_s"] = statistics.median(pull_t)
    out["pull_over_grad_wall"] = _mean_over_ranks(out["pull_step_s"] / out["grad_step_s"])
    out["pull_over_grad"] = _mean_over_ranks(statistics.median(pull_c) / statistics.median(grad_c))
    out["pull_samples"], out["grad_samples"] = len(pull_t), len(grad_t)
    bar.update()

    # 3. flat sync vs one all-reduce per tensor (parameter averaging)
    params = [p for p in model.parameters()]
    flat_algo = build_algorithm(
        AlgorithmConfig(name="local_sgd", H=1), model, torch.optim.SGD(model.parameters(), lr=0.01)
    )

    def per_tensor() -> None:
        with torch.no_grad():
            for p in params:
                dist.all_reduce(p.data)
                p.data.div_(world)

    def flat_sync() -> None:
        flat_algo._sync()

    res = {"flat": [], "per_tensor": []}
    for rep in range(args.comm_reps + 2):
        for name, fn in (("flat", flat_sync), ("per_tensor", per_tensor)):
            dist.barrier()
            start = time.perf_counter()
            fn()
            dt = _max_over_ranks(time.perf_counter() - start)
            if rep >= 2:
                res[name].append(dt)
    out["flat_sync_s"] = statistics.median(res["flat"])
    out["per_tensor_sync_s"] = statistics.median(res["per_tensor"])
    out["flat_over_per_tensor"] = out["flat_sync_s"] / out["per_tensor_sync_s"]
    out["n_tensors"] = len(params)
    out["n_params"] = sum(p.numel() for p in params)
    bar.update()

    # 4. one sync against torch's model_averaging.utils.average_parameters, same processes
    out.update(sync_vs_torch(args, world))
    bar.update()
    bar.close()
    return out


def sync_vs_torch(args: argparse.Namespace, world: int) -> dict[str, Any]:
    """Median seconds (max over ranks) of one sync of each kind, alternating repetitions:
    torch's ``average_parameters`` (one ``torch.cat`` copy, one all-reduce, re-pointing),
    Local SGD's sync (parameters are views of the flat buffer: all-reduced in place) with
    the consensus statistic off and on, and DiLoCo's (``Delta = z - x``, all-reduce, outer
    Nesterov step on the flat anchor, ``x <- z``) off and on."""
    from torch.distributed.algorithms.model_averaging.utils import average_parameters

    def build(name: str, consensus: int):
        m = make_model(args)
        cfg = AlgorithmConfig(name=name, H=1, consensus_interval=consensus)
        return build_algorithm(cfg, m, torch.optim.SGD(m.parameters(), lr=0.01))

    torch_model = make_model(args)
    algos = {
        "local_sgd": build("local_sgd", 0),
        "local_sgd_consensus": build("local_sgd", 1),
        "diloco": build("diloco", 0),
        "diloco_consensus": build("diloco", 1),
    }

    def torch_avg() -> None:
        average_parameters(iter(torch_model.parameters()), dist.group.WORLD)

    fns = {"torch_average_parameters": torch_avg, **{k: a._sync for k, a in algos.items()}}
    res: dict[str, list[float]] = {k: [] for k in fns}
    for rep in range(args.comm_reps + 2):
        for name, fn in fns.items():
            dist.barrier()
            start = time.perf_counter()
            fn()
            dt = _max_over_ranks(time.perf_counter() - start)
            if rep >= 2:
                res[name].append(dt)
    med = {k: statistics.median(v) for k, v in res.items()}
    ref = med["torch_average_parameters"]
    out: dict[str, Any] = {f"sync_{k}_s": v for k, v in med.items()}
    for k in algos:
        out[f"sync_{k}_over_torch"] = med[k] / ref
    return out


def _sq_norm_chunked(v: torch.Tensor, chunk: int = 1 << 16) -> float:
    """The consensus norm as the toolkit computed it before (a host loop over chunks)."""
    chunks = (v.numel() + chunk - 1) // chunk
    partial = torch.empty(chunks, dtype=torch.float64, device=v.device)
    for i in range(chunks):
        c = v[i * chunk : (i + 1) * chunk]
        partial[i] = torch.dot(c, c)
    return float(partial.sum())


def consensus_cost(n: int, reps: int = 5) -> dict[str, Any]:
    """Seconds of the consensus statistic's squared norm over ``n`` float32 values: the
    one-kernel form in use (``empirical.algorithms.local.sq_norm``), the former chunked host
    loop, and one plain ``torch.dot`` (the memory-bound floor). On the CPU every figure is
    compute included; ``host_launches`` counts the kernels each form launches."""
    from empirical.algorithms.local import _CHUNK, sq_norm

    v = torch.randn(n, generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {"fused": [], "chunked": [], "dot": []}
    for _ in range(reps):
        for name, fn in (
            ("fused", lambda: float(sq_norm(v))),
            ("chunked", lambda: _sq_norm_chunked(v)),
            ("dot", lambda: float(torch.dot(v, v))),
        ):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(t) for k, t in times.items()}
    return {
        "n": n,
        **{f"{k}_s": t for k, t in med.items()},
        "fused_over_dot": med["fused"] / med["dot"],
        "chunked_over_fused": med["chunked"] / med["fused"],
        "host_launches": {"fused": 4, "chunked": 2 * (-(-n // _CHUNK)) + 1, "dot": 1},
    }


def memory_worker(rank: int, world: int, args: argparse.Namespace, name: str) -> dict[str, Any]:
    data = make_data(args, rank, 4)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    model = make_model(args)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if name == "palsgd":
        cfg = AlgorithmConfig(name="palsgd", H=args.H, p=0.5, eta=1.0, seed=2)
    else:
        cfg = AlgorithmConfig(name="local_sgd", H=args.H)
    algo = build_algorithm(cfg, model, opt)
    for i in range(2 * args.H):
        iteration(algo, data[i % len(data)])
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "peak_rss_bytes": rss1,
        "rss_before_bytes": rss0,
        "algorithm_bytes": algo.memory_bytes(),
        "model_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "pulls": algo.stats["pull_steps"],
        "syncs": algo.stats["syncs"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--depth", type=int, default=24)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument(
        "--blocks",
        type=int,
        default=10,
        help="measured steps per algorithm = blocks * H (after warmup-blocks * H)",
    )
    ap.add_argument("--warmup-blocks", type=int, default=2)
    ap.add_argument("--pull-steps", type=int, default=80)
    ap.add_argument("--comm-reps", type=int, default=15)
    ap.add_argument(
        "--consensus-params",
        type=int,
        default=124_000_000,
        help="size of the consensus-statistic measurement (0: skip)",
    )
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)

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
    result = {
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
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
