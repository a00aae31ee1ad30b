"""Which runs a set of figures needs at a scale: the methods, the sweeps and the ablation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from paper_figures.runs.device import cuda_device_count
from paper_figures.runs.specs import (
    ALGORITHM_LABELS,
    ALGORITHMS,
    DATA_NAMES,
    FIGURES,
    QUICK_LINK,
    Plan,
    RunSpec,
    TaskSpec,
    check_scale,
    distributed_name,
)
from paper_figures.runs.tasks import tasks_for
from theory.algorithm import lookup

__all__ = [
    "SWEEP_TASK",
    "SWEEP_VALUES",
    "REPEATED_OUTER_STEPS",
    "ABLATION_SWITCHES",
    "method_overrides",
    "plan_runs",
    "check_paper_requirements",
]

#: the task of the sensitivity and ablation figures, per scale
SWEEP_TASK = {"quick": "gptneo", "paper": "gptneo-8m"}
#: swept values (the task's own H and p are always included)
SWEEP_VALUES = {
    "quick": {"H": (2, 8, 32), "p": (0.0, 0.2, 0.5)},
    "paper": {"H": (8, 16, 32, 64, 128), "p": (0.0, 0.1, 0.2, 0.3, 0.5)},
}
#: outer steps per sync of the "repeated outer steps" ablation: the authors' README runs
#: A = 16 (docs/reference-implementation.md §4); the quick scale has A = 1 and uses 4
REPEATED_OUTER_STEPS = {"quick": 4, "paper": 16}

#: the reference-faithful switches (AlgorithmConfig fields; docs/reference-implementation.md §6)
ABLATION_SWITCHES: dict[str, tuple[str, str]] = {
    "pull_first_tensor_only": ("pull on first tensor only (Q1)", "pull_first_tensor_only"),
    "shared_coins": ("shared coins (Q4)", "coins"),
    "discard_batch_on_pull": ("discard batch on pull (Q3)", "discard_batch_on_pull"),
    "repeated_outer_steps": ("repeated outer steps (Q5)", "outer_steps_per_sync"),
    "sync_offset": ("sync offset t = H-1 mod H (Q8)", "sync_offset"),
}
_MAIN_FIGURES = frozenset({"loss_vs_time", "time_to_target", "gain_attribution"})


def method_overrides(task: TaskSpec, algorithm: str) -> dict[str, Any]:
    """TrainConfig fields of one method on a task (fields of other methods set to None)."""
    none = dict(H=None, p=None, eta=None, T0=None, outer=None, gamma=None, mu=None)
    local = dict(task.local)
    T0 = local.get("T0", 0)
    if algorithm not in ALGORITHMS:
        raise UserInputError(f"unknown algorithm {algorithm!r}: known are {', '.join(ALGORITHMS)}")
    row = lookup(algorithm)
    if not row.local:  # minibatch SGD: no local settings
        return dict(none, algorithm=algorithm)
    if row.pulls:  # every local setting and the task's outer optimizer
        return dict(none, algorithm=algorithm, **local, **dict(task.outer))
    if row.outers == ("average",):  # Local SGD: plain averaging, after a warm-up as Post-Local
        name = distributed_name(algorithm, T0)
        return dict(none, algorithm=name, H=local["H"], T0=T0, outer="average")
    return dict(none, algorithm=algorithm, H=local["H"], T0=T0, **dict(task.outer))


def _ablation_value(switch: str, scale: str) -> Any:
    return {
        "pull_first_tensor_only": True,
        "shared_coins": "shared",
        "discard_batch_on_pull": True,
        "repeated_outer_steps": REPEATED_OUTER_STEPS[scale],
        "sync_offset": 1,
    }[switch]


def _method_run(task: TaskSpec, alg: str) -> RunSpec:
    ov = dict(task.base, **method_overrides(task, alg))
    return RunSpec(task.name, alg, alg, ov, ALGORITHM_LABELS[alg], "main")


def _sweep_runs(sweep: TaskSpec, scale: str, palsgd: Mapping[str, Any]) -> list[RunSpec]:
    """PALSGD at each swept ``H`` and ``p`` (the task's own value included)."""
    runs = []
    for key in ("H", "p"):
        for v in sorted(set(SWEEP_VALUES[scale][key]) | {sweep.local[key]}):
            ov = dict(palsgd, **{key: v})
            if key == "p" and v == 0:
                ov["eta"] = 0.0  # no pulls: eta is irrelevant, keep the pull rate defined
            variant, label = f"palsgd-{key}{v:g}", f"PALSGD {key} = {v:g}"
            runs.append(RunSpec(sweep.name, variant, "palsgd", ov, label, f"sweep_{key}", v))
    return runs


def _ablation_runs(sweep: TaskSpec, scale: str, palsgd: Mapping[str, Any]) -> list[RunSpec]:
    """PALSGD as described, with each switch on, and with all of them on."""
    name = sweep.name
    runs = [
        RunSpec(name, "palsgd-as-described", "palsgd", palsgd, "as described", "ablation", "none")
    ]
    all_on: dict[str, Any] = {}
    for switch, (label, fname) in ABLATION_SWITCHES.items():
        val = _ablation_value(switch, scale)
        all_on[fname] = val
        if switch == "repeated_outer_steps":
            label = f"{val} outer steps per sync (Q5)"
        ov = dict(palsgd, **{fname: val})
        runs.append(RunSpec(name, f"palsgd-{switch}", "palsgd", ov, label, "ablation", switch))
    ov = dict(palsgd, **all_on)
    runs.append(
        RunSpec(name, "palsgd-all-quirks", "palsgd", ov, "all switches on", "ablation", "all")
    )
    return runs


def _plan_notes(scale: str, nproc: int, tasks: Mapping[str, TaskSpec]) -> list[str]:
    notes = []
    if scale == "quick":
        notes.append(
            f"quick scale: {nproc} gloo process(es) on the CPU, emulated slow link "
            f"{QUICK_LINK} on every all-reduce"
        )
        if nproc == 1:
            notes.append(
                "--nproc 1: K = 1, one process, no communication: not the paper's comparison"
            )
    else:
        notes.append(
            f"paper scale: K = {nproc} worker(s), one process each: a GPU each (NCCL) when "
            "there are enough, else sharing GPUs (gloo); runs side by side on spare GPUs"
        )
    notes += [f"{t.name}: {t.note}" for t in tasks.values() if t.note]
    return notes


def plan_runs(
    scale: str,
    figures: Iterable[str],
    *,
    seed: int = 0,
    nproc: int = 2,
    data: Mapping[str, str] | None = None,
) -> Plan:
    """The runs needed by ``figures`` at ``scale`` (each run once).

    ``loss_vs_time``, ``time_to_target`` and ``gain_attribution`` need the four methods on
    every task; ``sensitivity`` PALSGD at several ``H`` and ``p`` on the sweep task (plus
    DDP there, drawn for reference); ``ablation`` PALSGD as described, with each
    reference-faithful switch on, and with all of them on; ``paper_scale`` and ``theory``
    need no training run.
    """
    check_scale(scale)
    figures = list(figures)
    unknown = [f for f in figures if f not in FIGURES]
    if unknown:
        raise UserInputError(f"unknown figure(s) {unknown}: valid figures are {', '.join(FIGURES)}")
    tasks = tasks_for(scale, seed, data)
    want_main = bool(_MAIN_FIGURES & set(figures))
    runs = [_method_run(t, alg) for t in tasks.values() for alg in ALGORITHMS] if want_main else []
    sweep = tasks[SWEEP_TASK[scale]]
    palsgd = dict(sweep.base, **method_overrides(sweep, "palsgd"))
    if "sensitivity" in figures:
        if not want_main:  # DDP is drawn for reference
            runs.append(_method_run(sweep, "ddp"))
        runs += _sweep_runs(sweep, scale, palsgd)
    if "ablation" in figures:
        runs += _ablation_runs(sweep, scale, palsgd)
    # deduplicate by name (the same run may serve several figures); keep the first group
    seen: dict[str, RunSpec] = {}
    for r in runs:
        seen.setdefault(r.name, r)
    return Plan(scale, nproc, seed, tasks, list(seen.values()), _plan_notes(scale, nproc, tasks))


def check_paper_requirements(
    plan: Plan, data: Mapping[str, str], *, gpus: int | None = None
) -> list[str]:
    """What the paper scale lacks here (a GPU, the ``gpus`` asked for, data sets); an empty
    list when runnable. Any number of GPUs will do: with fewer than ``K`` the workers share
    them (:mod:`paper_figures.runs.placement`)."""
    problems = []
    n_gpu = cuda_device_count()
    if n_gpu < 1:
        problems.append("--scale paper needs at least one CUDA GPU, found none")
    elif gpus is not None and gpus > n_gpu:
        problems.append(f"--gpus {gpus}: only {n_gpu} CUDA GPU(s) found")
    needed = sorted({plan.tasks[r.task].data for r in plan.runs if plan.tasks[r.task].data})
    for name in needed:
        path = data.get(name)
        what = DATA_NAMES[name][1]
        if not path:
            problems.append(f"data set '{name}' is needed: pass --data {name}=PATH ({what})")
        elif not Path(path).exists():
            problems.append(f"data set '{name}': path '{path}' does not exist ({what})")
    return problems
