"""The measurements of ``benchmarks/bench_algorithms.py``: a model of a few million
parameters, synthetic data, and the workers each measurement runs in (see that script's
docstring for what is measured and why)."""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from tqdm.auto import tqdm

from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.algorithms.sync import _CHUNK, sq_norm


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
    """Measurements 1-3b of the benchmark in one process group (rank 0 returns them)."""
    data = make_data(args, rank, 16)
    bar = tqdm(total=4, desc="bench_algorithms", disable=rank != 0)
    out: dict[str, Any] = {}
    for measure in (
        lambda: palsgd_vs_local_sgd(args, data),
        lambda: pull_vs_grad(args, data),
        lambda: flat_vs_per_tensor(args, world),
        lambda: sync_vs_torch(args, world),
    ):
        out.update(measure())
        bar.update()
    bar.close()
    return out


def palsgd_vs_local_sgd(args: argparse.Namespace, data: list) -> dict[str, Any]:
    """1. PALSGD (a coin every step, no pull) vs Local SGD, alternating single steps."""
    H = args.H
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
    extra = sum(t.algo_cpu for t in pal) - sum(t.algo_cpu for t in loc)
    return {
        "step_time_local_sgd_s": statistics.median(t.wall for t in loc),
        "step_time_palsgd_p0_s": statistics.median(t.wall for t in pal),
        "algo_cpu_per_step_local_sgd_s": sum(t.algo_cpu for t in loc) / len(loc),
        "algo_cpu_per_step_palsgd_s": sum(t.algo_cpu for t in pal) / len(pal),
        "palsgd_over_local_sgd": _mean_over_ranks(1.0 + extra / sum(t.cpu for t in loc)),
        "palsgd_over_local_sgd_cpu_total": _mean_over_ranks(
            sum(t.cpu for t in pal) / sum(t.cpu for t in loc)
        ),
        "palsgd_over_local_sgd_wall_median": _mean_over_ranks(statistics.median(pairs)),
        "palsgd_pull_steps": algos["palsgd"].stats["pull_steps"],
        "syncs_each": algos["local_sgd"].stats["syncs"],
    }


def pull_vs_grad(args: argparse.Namespace, data: list) -> dict[str, Any]:
    """2. A pull step vs a gradient step in one PALSGD run (steps before a sync excluded)."""
    model = make_model(args)
    cfg = AlgorithmConfig(name="palsgd", H=16, p=0.5, eta=1.0, seed=1)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.01))
    grad_t, pull_t, grad_c, pull_c = [], [], [], []
    for i in range(args.pull_steps):
        tm = iteration(algo, data[i % len(data)])
        if i >= 4 and not tm.synced:
            (pull_t if tm.action == "pull" else grad_t).append(tm.wall)
            (pull_c if tm.action == "pull" else grad_c).append(tm.cpu)
    out = {"grad_step_s": statistics.median(grad_t), "pull_step_s": statistics.median(pull_t)}
    out["pull_over_grad_wall"] = _mean_over_ranks(out["pull_step_s"] / out["grad_step_s"])
    out["pull_over_grad"] = _mean_over_ranks(statistics.median(pull_c) / statistics.median(grad_c))
    out["pull_samples"], out["grad_samples"] = len(pull_t), len(grad_t)
    return out


def flat_vs_per_tensor(args: argparse.Namespace, world: int) -> dict[str, Any]:
    """3. The flat sync vs one all-reduce per parameter tensor (parameter averaging)."""
    model = make_model(args)
    params = list(model.parameters())
    flat_algo = build_algorithm(
        AlgorithmConfig(name="local_sgd", H=1), model, torch.optim.SGD(model.parameters(), lr=0.01)
    )

    def per_tensor() -> None:
        with torch.no_grad():
            for p in params:
                dist.all_reduce(p.data)
                p.data.div_(world)

    med = _median_times({"flat": flat_algo.sync._sync, "per_tensor": per_tensor}, args.comm_reps)
    return {
        "flat_sync_s": med["flat"],
        "per_tensor_sync_s": med["per_tensor"],
        "flat_over_per_tensor": med["flat"] / med["per_tensor"],
        "n_tensors": len(params),
        "n_params": sum(p.numel() for p in params),
    }


def _median_times(fns: dict[str, Any], reps: int) -> dict[str, float]:
    """Median seconds (max over ranks, after a barrier) of each function, alternating
    repetitions, the first two left out."""
    res: dict[str, list[float]] = {k: [] for k in fns}
    for rep in range(reps + 2):
        for name, fn in fns.items():
            dist.barrier()
            start = time.perf_counter()
            fn()
            dt = _max_over_ranks(time.perf_counter() - start)
            if rep >= 2:
                res[name].append(dt)
    return {k: statistics.median(v) for k, v in res.items()}


def sync_vs_torch(args: argparse.Namespace, world: int) -> dict[str, Any]:
    """Median seconds (max over ranks) of one sync of each kind, alternating repetitions:
    torch's ``average_parameters`` (one ``torch.cat`` copy, one all-reduce, re-pointing),
    Local SGD's sync (parameters are views of the flat buffer: all-reduced in place) with
    the consensus statistic off and on, and DiLoCo's (``Delta = z - x``, all-reduce, outer
    Nesterov step on the flat anchor, ``x <- z``) off and on."""

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

    fns = {"torch_average_parameters": torch_avg, **{k: a.sync._sync for k, a in algos.items()}}
    med = _median_times(fns, args.comm_reps)
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
    one-kernel form in use (``empirical.algorithms.sync.sq_norm``), the former chunked host
    loop, and one plain ``torch.dot`` (the memory-bound floor). On the CPU every figure is
    compute included; ``host_launches`` counts the kernels each form launches."""
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
