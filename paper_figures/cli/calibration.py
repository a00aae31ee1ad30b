"""The cost model of this machine for ``palsgd figures``: the link and each task's steps."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.io import atomic_write_json
from empirical import cost as costmodel
from paper_figures import runs as R
from paper_figures.analysis import CostSetup, compute_from_runs
from paper_figures.cli.options import DEFAULT_PROFILE

__all__ = ["calibrate"]

#: the per-step timings of a compute profile, merged over concurrent ranks
_STEP_FIELDS = ("grad_step_s", "pull_step_s", "inner_step_s", "backward_s", "sync_local_s")


def _compute_specs(plan: R.Plan, names: Sequence[str]) -> list[dict[str, Any]]:
    specs = []
    for name in names:
        b = plan.tasks[name].base
        model = str(b["model"])
        spec: dict[str, Any] = {
            "task": name,
            "model_name": model,
            "batch_size": int(b.get("batch_size", 8)),
            "accumulation": int(b.get("A", 1)),
            "optimizer": "adamw" if b.get("optimizer", "adamw") == "adamw" else "sgd",
        }
        if model.startswith("gptneo"):
            spec["seq_len"] = int(b.get("seq_len", 64))
        else:
            spec["image_size"] = 224 if b.get("dataset") == "imagefolder" else 32
        specs.append(spec)
    return specs


def _compute_worker(
    rank: int, world: int, specs: list[dict[str, Any]], device: str, repeats: int
) -> list[dict[str, Any]]:
    out = []
    for s in specs:
        kw = {k: v for k, v in s.items() if k != "task"}
        prof = costmodel.measure_compute(device=device, repeats=repeats, **kw)
        out.append(prof.to_dict())
    return out


def _merge_profiles(per_rank: Sequence[Sequence[Mapping[str, Any]]], world: int) -> list[dict]:
    """The slowest rank's time per field (a step ends when its slowest worker finishes)."""
    merged = []
    for i in range(len(per_rank[0])):
        d = dict(per_rank[0][i])
        for key in _STEP_FIELDS:
            vals = [r[i][key] for r in per_rank if r[i].get(key) is not None]
            if vals:
                d[key] = max(vals)
        d["inner_step_s"] = min(d["inner_step_s"], d["grad_step_s"])
        d["source"] = (
            f"{d['source']}; {world} concurrent processes (as the training ranks), "
            "slowest rank per field"
        )
        merged.append(d)
    return merged


def _measure_in_processes(specs: list[dict[str, Any]], nproc: int) -> list[dict[str, Any]]:
    """:func:`_compute_worker` in ``nproc`` concurrent CPU processes, merged; imports
    :mod:`empirical.distributed` (torch) here, when measuring, for its start-up cost."""
    from empirical.distributed import spawn_workers

    per_rank = spawn_workers(_compute_worker, nproc, specs, "cpu", 8, timeout_s=900)
    return _merge_profiles(per_rank, nproc)


def _torch_facts() -> dict[str, Any]:
    """torch's version and whether it sees a GPU."""
    torch = R.torch_module()
    if torch is None:  # pragma: no cover
        return {"torch": None, "cuda": False}
    return {"torch": torch.__version__, "cuda": torch.cuda.is_available()}


def _cal_key(plan: R.Plan, names: Sequence[str], profile: str | None) -> str:
    payload = {
        "scale": plan.scale,
        "nproc": plan.nproc,
        "profile": profile,
        "tasks": {n: dict(plan.tasks[n].base) for n in names},
        "link": R.QUICK_LINK if plan.scale == "quick" else None,
        "host": socket.gethostname(),
        **_torch_facts(),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cached_record(path: Path, key: str) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        cached = json.loads(path.read_text())
    except ValueError:
        return {}
    return cached if cached.get("key") == key else {}


def _link(
    plan: R.Plan, profile: str | None, cached: Mapping, details: dict, log: Callable
) -> tuple[Any, str]:
    """The link and where it comes from: fitted at quick scale (``K > 1``), the cluster
    profile's at paper scale."""
    if plan.scale != "quick":
        prof_name = profile or DEFAULT_PROFILE
        return costmodel.cluster_profile(prof_name).link, f"link of cluster profile {prof_name!r}"
    source = "link fitted to gloo all-reduces through the emulated slow link"
    if plan.nproc <= 1:
        return None, source
    if cached.get("link"):
        details["allreduce_measurements"] = cached.get("allreduce_measurements")
        details["link_cached"] = True
        return costmodel.link_from_dict(cached["link"]), source
    log(f"palsgd figures: calibrating the emulated link ({plan.nproc} gloo processes)")
    meas = costmodel.measure_allreduce(
        (4096, 65536, 262144, 1 << 20),
        world_size=plan.nproc,
        repeats=6,
        delay_s=R.QUICK_LINK["comm_delay_s"],
        delay_per_byte_s=R.QUICK_LINK["comm_delay_per_byte_s"],
    )
    details["allreduce_measurements"] = [list(m) for m in meas]
    return costmodel.calibrate_link(meas, "ring", name="gloo + emulated slow link"), source


def _measured_compute(
    plan: R.Plan, names: Sequence[str], cached: Mapping, log: Callable
) -> dict[str, Any]:
    """:func:`empirical.cost.measure_compute` per task (cached measurements reused)."""
    specs = _compute_specs(plan, names)
    if cached.get("measured_compute") and all(
        s["task"] in cached["measured_compute"] for s in specs
    ):
        profs = [cached["measured_compute"][s["task"]] for s in specs]
    else:
        log(f"palsgd figures: measuring the compute of {', '.join(names)}")
        device = "cpu" if plan.scale == "quick" else "cuda"
        if plan.nproc > 1 and device == "cpu":
            profs = _measure_in_processes(specs, plan.nproc)
        else:
            profs = _compute_worker(0, 1, specs, device, 10)
    return {s["task"]: costmodel.ComputeProfile(**p) for s, p in zip(specs, profs, strict=True)}


def calibrate(
    plan: R.Plan,
    task_names: Sequence[str],
    out: Path,
    *,
    profile: str | None = None,
    compute: str = "runs",
    runs: Mapping[str, Sequence[R.RunData]] | None = None,
    log: Callable[[str], None] | None = None,
) -> CostSetup:
    """The :class:`paper_figures.analysis.CostSetup` of this machine.

    Link: quick scale with ``K > 1``, fitted to gloo all-reduces through the emulated slow
    link (:data:`paper_figures.runs.QUICK_LINK`); paper scale, the link of the cluster
    ``profile``. Compute per task: ``"runs"``, from the finished runs' own timers
    (:func:`paper_figures.analysis.compute_from_runs`; ``runs`` maps a task to its runs);
    ``"measure"``, :func:`empirical.cost.measure_compute` on this machine (CPU at quick
    scale in ``K`` concurrent processes, as the training ranks run; GPU at paper scale).
    Measurements are cached in ``out/calibration.json`` while the plan, host and torch
    version stay the same.
    """
    if compute not in ("runs", "measure"):
        raise UserInputError(f"unknown compute calibration {compute!r}: valid are runs, measure")
    log = log or (lambda m: print(m, file=sys.stderr))
    names = [n for n in task_names if n in plan.tasks]
    key = _cal_key(plan, names, profile)
    path = out / "calibration.json"
    cached = _cached_record(path, key)
    details: dict[str, Any] = {"compute_calibration": compute}
    t0 = time.perf_counter()
    link, link_source = _link(plan, profile, cached, details, log)
    if compute == "runs":
        profiles = {name: compute_from_runs(list((runs or {}).get(name, []))) for name in names}
        comp_source = "compute per step from the runs' own timers"
    else:
        profiles = _measured_compute(plan, names, cached, log)
        comp_source = "compute per step measured by empirical.cost.measure_compute"
    details["elapsed_s"] = time.perf_counter() - t0
    record = {
        "key": key,
        "link": link.to_dict() if link else cached.get("link"),
        "allreduce_measurements": details.get("allreduce_measurements"),
        "measured_compute": cached.get("measured_compute", {}),
    }
    if compute == "measure":
        record["measured_compute"] = {k: v.to_dict() for k, v in profiles.items()}
    atomic_write_json(path, record)
    return CostSetup(profiles, link, f"{plan.scale} scale: {link_source}; {comp_source}", details)
