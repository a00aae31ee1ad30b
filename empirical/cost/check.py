"""End-to-end check of the cost model on this machine: predicted against measured
wall-clock of DDP, Local SGD and PALSGD on gloo processes with an emulated slow link
(:mod:`empirical.algorithms.slowlink`), link and compute calibrated in the same processes."""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from core.errors import UserInputError
from core.limits import check_processes
from core.validation import ParameterError, check_int, check_number
from empirical.algorithms import AlgorithmConfig, DDPAlgorithm, build_algorithm
from empirical.cost.checks import check_workers
from empirical.cost.compute_timing import profile_compute
from empirical.cost.link_calibration import calibrate_link, combine_ranks, time_allreduce
from empirical.cost.profiles import ComputeProfile, LinkProfile
from empirical.cost.trace import step_trace
from empirical.cost.wallclock import time_breakdown
from empirical.distributed import spawn_workers
from theory.algorithm import lookup
from theory.validation import validate

__all__ = ["CHECK_CONFIGS", "emulated_link_check", "planned_delay_s"]

#: the runs of :func:`emulated_link_check`: AlgorithmConfig fields plus ``T`` (steps)
CHECK_CONFIGS: dict[str, dict[str, Any]] = {
    "ddp": {"name": "ddp", "T": 32},
    "local_sgd": {"name": "local_sgd", "H": 4, "T": 64},
    "palsgd": {"name": "palsgd", "H": 4, "p": 0.3, "eta": 1.0, "seed": 3, "T": 64},
}


def _check_model(seed: int) -> nn.Module:
    """The check's model: a 3-layer tanh MLP (76,296 parameters), seeded initialisation."""
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 8)
    )
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(0.1 * torch.randn(prm.shape, generator=g))
    return model


def _check_loss(model: Any, b: Any) -> Any:
    return nn.functional.cross_entropy(model(b[0]), b[1])


def _build(cfg: AlgorithmConfig, model: nn.Module, spec: Mapping[str, Any]) -> Any:
    """The algorithm of one check run (DDP with the spec's bucket cap, when given)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if not cfg.spec.local and spec.get("bucket_cap_mb"):
        return DDPAlgorithm(cfg, model, opt, ddp_kwargs={"bucket_cap_mb": spec["bucket_cap_mb"]})
    return build_algorithm(cfg, model, opt)


def _timed_run(
    cfg: AlgorithmConfig, base: nn.Module, data: list[Any], T: int, spec: Mapping[str, Any]
) -> dict[str, Any]:
    """``T`` steps of ``cfg`` on a copy of ``base``: wall-clock, counts and the bytes the
    model needs (DDP's buckets and gradient bytes, or the flat buffer of a sync)."""
    model = copy.deepcopy(base)
    algo = _build(cfg, model, spec)
    dist.barrier()
    algo.resolve_timings()
    comm_before = float(algo.stats["time_comm_s"])  # the initial broadcast is not the run's
    start = time.perf_counter()
    for i in range(T):
        if algo.next_action() == "grad":
            _check_loss(algo.model, data[i % len(data)]).backward()
        algo.step()
    algo.finish()  # an overlapped sync still in flight lands (inside the timed run)
    wall = time.perf_counter() - start
    algo.resolve_timings()
    info: dict[str, Any] = {
        "wall_s": wall,
        "comm_s": float(algo.stats["time_comm_s"]) - comm_before,
        "stats": {k: v for k, v in algo.stats.items() if k != "last_consensus"},
    }
    if not cfg.spec.local:
        log = algo.model._get_ddp_logging_data()
        sizes = str(log.get("rebuilt_bucket_sizes") or log.get("bucket_sizes", ""))
        info["buckets"] = [float(x) for x in sizes.split(",") if x.strip()]
        info["grad_bytes"] = sum(prm.numel() * prm.element_size() for prm in model.parameters())
    else:
        # the flat buffer of a sync (parameters, floating-point buffers, one scalar)
        info["sync_bytes"] = algo.flat_model.n_sync * algo.flat_model.work().element_size()
    return info


def _check_worker(rank: int, world: int, spec: dict[str, Any]) -> dict[str, Any]:
    """One rank of :func:`emulated_link_check`: link calibration, then per run a compute
    calibration and the timed run."""
    g = torch.Generator().manual_seed(1000 + rank)
    data = [
        (
            torch.randn(spec["batch"], 32, generator=g),
            torch.randint(0, 8, (spec["batch"],), generator=g),
        )
        for _ in range(8)
    ]
    base = _check_model(0)
    delays = {"comm_delay_s": spec["delay_s"], "comm_delay_per_byte_s": spec["delay_per_byte_s"]}
    steps = 1 + len(spec["configs"])
    _progress(rank, f"[1/{steps}] calibrating the emulated link ({len(spec['cal_sizes'])} sizes)")
    link_times = time_allreduce(
        spec["cal_sizes"],
        repeats=spec["cal_repeats"],
        warmup=1,
        trials=3,
        delay_s=spec["delay_s"],
        delay_per_byte_s=spec["delay_per_byte_s"],
    )
    runs: dict[str, Any] = {}
    for i, (name, kw) in enumerate(spec["configs"].items()):
        kw = dict(kw)
        T = int(kw.pop("T"))
        _progress(rank, f"[{i + 2}/{steps}] {name}: compute calibration, then {T} timed steps")
        # compute, right before the run: the real model's gradient step, pull and sync work
        # on a copy, both ranks at once, pausing like the communication-bound run does
        # (after every step for DDP, every H steps for the local methods)
        dist.barrier()
        burst = int(kw.get("H", 1)) if lookup(kw["name"]).local else 1
        comp = profile_compute(
            copy.deepcopy(base),
            lambda i: data[i % len(data)],
            _check_loss,
            repeats=max(spec["compute_repeats"], 2 * burst),
            warmup=2,
            idle_s=spec["delay_s"],
            burst=burst,
        )
        info = _timed_run(AlgorithmConfig(**kw, **delays), base, data, T, spec)
        runs[name] = {"wall_s": info.pop("wall_s"), "compute": comp.to_dict(), **info}
    dist.barrier()
    return {"link_times": link_times, "runs": runs}


def _progress(rank: int, text: str) -> None:
    """One progress line on stderr, from rank 0 only."""
    if rank == 0:
        print(f"palsgd cost check: {text}", file=sys.stderr, flush=True)


def _param_bytes() -> int:
    """Bytes of the check model's parameters (fp32): what a DDP step or a sync all-reduces."""
    return 4 * sum(prm.numel() for prm in _check_model(0).parameters())


def planned_delay_s(
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    delay_s: float = 0.06,
    delay_per_byte_s: float = 8e-8,
    cal_sizes: Sequence[int] = (16384, 262144, 1048576),
    cal_repeats: int = 4,
) -> float:
    """A lower estimate of the wall-clock of :func:`emulated_link_check`: the emulated link
    delays alone (the link calibration's all-reduces, one per DDP step, one per sync of the
    local methods), before any compute. ``inf`` when it overflows."""
    configs = configs or CHECK_CONFIGS
    cal = sum((cal_repeats + 1) * 3 * (delay_s + n * delay_per_byte_s) for n in cal_sizes)
    per_call = delay_s + _param_bytes() * delay_per_byte_s
    calls = sum(
        int(kw["T"]) // int(kw.get("H", 1)) if lookup(kw["name"]).local else int(kw["T"])
        for kw in configs.values()
    )
    return float(cal + calls * per_call)


def _slower(profiles: Sequence[ComputeProfile]) -> ComputeProfile:
    """Every DDP step and every sync waits for the slower worker: its compute profile."""
    slow = max(profiles, key=lambda c: c.grad_step_s)
    return ComputeProfile(
        grad_step_s=slow.grad_step_s,
        inner_step_s=slow.inner_step_s,
        pull_step_s=max(c.pull_step_s for c in profiles),
        sync_local_s=max(c.sync_local_s for c in profiles),
        backward_s=slow.backward_s,
        source="slower rank of: " + slow.source,
    )


def _check_configs(configs: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict]:
    """The runs of the check, each with ``T`` and valid AlgorithmConfig fields."""
    configs = {k: dict(v) for k, v in (configs or CHECK_CONFIGS).items()}
    for name, kw in configs.items():
        if "T" not in kw:
            raise UserInputError(f"check run {name!r} is missing the field 'T'")
        validate(T=kw["T"])
        AlgorithmConfig(**{k: v for k, v in kw.items() if k != "T"})
    return configs


def _predict_run(
    name: str, kw: Mapping[str, Any], res: list[dict[str, Any]], link: LinkProfile, K: int
) -> dict[str, Any]:
    """The model's prediction for one check run next to rank 0's measurement; the exact
    step trace must give the counts the run made."""
    T = int(kw["T"])
    cfg = AlgorithmConfig(**{k: v for k, v in kw.items() if k != "T"})
    run0 = res[0]["runs"][name]
    stats = run0["stats"]
    comp = _slower([ComputeProfile(**r["runs"][name]["compute"]) for r in res])
    trace = step_trace(cfg, K, T)
    for key in ("grad_steps", "pull_steps", "syncs"):
        if trace[key][-1] != stats[key]:
            raise RuntimeError(
                f"run {name!r}: step_trace gives {key} = {trace[key][-1]}, the run "
                f"counted {stats[key]}"
            )
    if not cfg.spec.local:
        nbytes = float(run0["grad_bytes"])
        kw_model: dict[str, Any] = {"ddp_buckets": run0["buckets"] or None}
    else:
        nbytes = float(run0["sync_bytes"])
        kw_model = {"H": cfg.H, "p": cfg.p, "coins": cfg.coins, "sync_delay": cfg.sync_delay}
    parts = time_breakdown(
        trace,
        compute=comp,
        link=link,
        K=K,
        param_bytes=nbytes,
        algorithm=cfg.name,
        overlap_ddp=True,
        **kw_model,
    )
    pred = float(parts["total"][-1])
    measured = float(run0["wall_s"])
    return {
        "measured_s": measured,
        "predicted_s": pred,
        "error": pred / measured - 1.0,
        "grad_step_s": comp.grad_step_s,
        "steps": T,
        "syncs": int(stats["syncs"]),
        "measured_comm_s": float(run0["comm_s"]),
        "param_bytes": nbytes,
        "breakdown": {k: float(v[-1]) for k, v in parts.items()},
    }


def emulated_link_check(
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    batch: int = 32,
    delay_s: float = 0.06,
    delay_per_byte_s: float = 8e-8,
    cal_sizes: Sequence[int] = (16384, 262144, 1048576),
    cal_repeats: int = 4,
    compute_repeats: int = 10,
    bucket_cap_mb: float | None = None,
    world_size: int = 2,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """End-to-end check of the model on this machine: predicted vs measured wall-clock.

    Spawns ``world_size`` gloo processes on the CPU with an emulated slow link (every
    all-reduce followed by ``delay_s + bytes * delay_per_byte_s``,
    :mod:`empirical.algorithms.slowlink`). In the same processes: the link is calibrated
    (:func:`time_allreduce` through the algorithms' communicator, :func:`calibrate_link`),
    then for every run of ``configs`` (default :data:`CHECK_CONFIGS`; AlgorithmConfig fields
    plus ``T`` steps) the compute is calibrated (:func:`profile_compute` on the same model,
    idle ``delay_s`` before every step for DDP, before every ``H`` steps for the local
    methods) and the run is timed on rank 0. The prediction
    is :func:`modelled_time` of the exact step trace (:func:`step_trace`, checked against the
    run's counts), with the slower rank's compute profile and, for DDP, the buckets DDP
    built. Model: a 76k-parameter MLP, micro-batch ``batch``, AdamW.

    Returns ``{"link", "injected", "runs": {name: {measured_s, predicted_s, error,
    grad_step_s, syncs, measured_comm_s, breakdown}}}`` with ``error = predicted / measured
    - 1`` and ``measured_comm_s`` the time rank 0 was blocked in communication during the
    timed steps (for an overlapped sync, ``sync_delay``, only the exposed part of its
    all-reduces).
    """
    configs = _check_configs(configs)
    K = check_workers(world_size)
    if K < 2:
        raise ParameterError("world_size", world_size, "integer in [2, inf)")
    check_processes(K, "world_size")
    check_int("batch", batch, 1)
    spec = {
        "configs": configs,
        "batch": int(batch),
        "delay_s": check_number("delay_s", delay_s, 0.0),
        "delay_per_byte_s": check_number("delay_per_byte_s", delay_per_byte_s, 0.0),
        "cal_sizes": [int(x) for x in cal_sizes],
        "cal_repeats": int(cal_repeats),
        "compute_repeats": int(compute_repeats),
        "bucket_cap_mb": bucket_cap_mb,
    }
    planned = planned_delay_s(
        configs,
        delay_s=spec["delay_s"],
        delay_per_byte_s=spec["delay_per_byte_s"],
        cal_sizes=spec["cal_sizes"],
        cal_repeats=spec["cal_repeats"],
    )
    if not planned < timeout_s:
        raise UserInputError(
            f"the emulated delays alone would take {planned:.3g} s, more than the "
            f"timeout of {timeout_s:g} s: lower delay_s, delay_per_byte_s or the steps"
        )
    res = spawn_workers(_check_worker, K, spec, timeout_s=timeout_s)
    meas = combine_ranks(spec["cal_sizes"], [r["link_times"] for r in res], K)
    link = calibrate_link(meas, "ring", name="emulated")
    runs = {name: _predict_run(name, kw, res, link, K) for name, kw in configs.items()}
    return {
        "link": link.to_dict(),
        "link_measurements": [list(m) for m in meas],
        "injected": {"delay_s": spec["delay_s"], "delay_per_byte_s": spec["delay_per_byte_s"]},
        "world_size": K,
        "runs": runs,
    }
