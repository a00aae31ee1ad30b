"""The GPUs of a ``palsgd figures`` invocation and ``--dry-run``'s printed plan: each run,
its state, its GPU set and estimated duration, and the estimated wall time."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from empirical import cost as costmodel
from paper_figures import runs as R
from paper_figures.cli.options import DEFAULT_PROFILE
from paper_figures.runs.device import cuda_device_count, torch_module
from paper_figures.runs.estimate import assumptions, cost_gpu, estimate_run, schedule
from paper_figures.runs.placement import Placement, place

__all__ = ["GpuPlan", "gpu_plan", "print_plan"]

#: the plan fields printed per run by ``--dry-run``
_PLAN_FIELDS = ("model", "algorithm", "T", "H", "p", "eta", "outer", "gamma", "mu")


@dataclass(frozen=True)
class GpuPlan:
    """Where a paper-scale plan trains: the placement, the GPU the estimates assume
    (an :data:`empirical.cost.GPUS` entry) and why; ``seen``: the GPUs torch sees here
    (the placement is for ``--gpus``, or for ``K`` GPUs when none is seen)."""

    placement: Placement
    gpu: str
    gpu_note: str
    seen: int


def _device_name() -> str | None:
    torch = torch_module()
    if torch is None or not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(0))


def gpu_plan(args: argparse.Namespace, nproc: int) -> GpuPlan:
    """The placement of ``nproc`` workers on ``--gpus`` (default: every GPU seen; ``K``
    when none is seen, for a dry run) at most ``--max-parallel-runs`` runs at a time."""
    seen = cuda_device_count()
    gpus = args.gpus or seen or nproc
    placement = place(nproc, gpus, max_parallel=args.max_parallel_runs)
    profile_gpu = costmodel.cluster_profile(args.profile or DEFAULT_PROFILE).gpu
    gpu, note = cost_gpu(_device_name(), profile_gpu)
    return GpuPlan(placement, gpu, note, seen)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _rows(
    plan: R.Plan, runs_dir: Path, gp: GpuPlan | None
) -> tuple[list[tuple[R.RunSpec, str, dict]], list[tuple[str, float]]]:
    """Each run with its state and resolved config; the runs to train with their estimates
    (seconds, unknown as 0), in the order they are launched (longest first)."""
    dev = "cuda" if gp is not None else R.current_device_kind()
    backend = gp.placement.config_backend if gp is not None else None
    seen: set[str] = set()
    rows, to_train = [], []
    for r in plan.runs:
        cfg = R.resolve_spec(r, backend)
        key = R.run_key(cfg, plan.nproc, dev)
        state = "cached" if R.cached(R.run_directory(runs_dir, r, key), key) else "to train"
        if key in seen and state == "to train":
            state = "same as above"
        elif state == "to train" and gp is not None:
            est = estimate_run(cfg, gp.placement, gp.gpu).total_s
            to_train.append((r.name, est or 0.0))
        seen.add(key)
        rows.append((r, state, cfg))
    to_train.sort(key=lambda item: -item[1])  # stable: ties keep the plan's order
    return rows, to_train


def print_plan(plan: R.Plan, runs_dir: Path, problems: Sequence[str], gp: GpuPlan | None) -> None:
    """The plan as ``--dry-run`` prints it (paper scale: GPUs and estimates per run)."""
    print(
        f"palsgd figures plan: scale {plan.scale}, {plan.nproc} process(es), seed {plan.seed}, "
        f"{len(plan.runs)} run(s)"
    )
    for note in plan.notes:
        print(f"  note: {note}")
    rows, to_train = _rows(plan, runs_dir, gp)
    timeline = {}
    if gp is not None:
        pl = gp.placement
        where = "" if gp.seen else " (none seen here: the GPUs planned for)"
        print(f"placement: {pl.describe()}{where}")
        timeline = {s.name: s for s in schedule(to_train, pl.parallel)}
    estimates = dict(to_train)
    width = max((len(r.name) for r in plan.runs), default=10)
    for r, state, cfg in rows:
        fields = ", ".join(f"{k}={cfg[k]}" for k in _PLAN_FIELDS if cfg.get(k) is not None)
        if r.group == "ablation":
            fields += f"; switch: {r.x}"
        where = ""
        if r.name in timeline:
            slot = gp.placement.gpu_label(timeline[r.name].slot) if gp else ""
            where = f"  {slot:<10} est. {_duration(estimates[r.name]):>8}"
        print(f"  {r.name:<{width}}  [{state}]{where}  {fields}")
    if gp is not None:
        _print_totals(gp, list(timeline.values()), estimates)
    if problems:
        print("missing on this machine:")
        for p in problems:
            print(f"  - {p}")


def _print_totals(gp: GpuPlan, timeline: list, estimates: dict[str, float]) -> None:
    wall = max((s.end_s for s in timeline), default=0.0)
    total = sum(estimates.values())
    days = f" ({wall / 86400:.1f} days)" if wall >= 86400 else ""
    print(
        f"estimated wall time: {_duration(wall)}{days} for {len(timeline)} run(s) to train, "
        f"{gp.placement.parallel} at a time (the runs' sum: {_duration(total)}); longest "
        "runs first, each on the first free GPU set"
    )
    print("estimate: the cost model (empirical/cost; docs/paper_figures_gpus.md), assuming")
    for line in assumptions(gp.placement, gp.gpu_note):
        print(f"  - {line}")
