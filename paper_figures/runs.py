"""The training runs behind the figures: the plan per scale, a cache, and one launcher.

A figure needs runs of :mod:`empirical.train`; this module decides which (:func:`plan_runs`),
keeps each in its own directory under ``RUNS_DIR`` (default ``OUT/runs``) and runs the
missing ones (:func:`execute`).

* Scales. ``quick``: a tiny GPT-Neo (``gptneo-tiny``, byte vocabulary) on the embedded
  text and a tiny CIFAR-style ResNet (``resnet-tiny``) on the embedded images, ``K = 2``
  gloo processes on the CPU, an emulated slow link (every all-reduce of ``n`` bytes is
  followed by ``latency + n / bandwidth`` seconds of delay, :data:`QUICK_LINK`; see
  :mod:`empirical.algorithms.slowlink`) so that communication costs something on one
  machine. ``paper``: the paper's model sizes and the authors' settings
  (docs/reference-implementation.md §7): GPT-Neo-8M and
  GPT-Neo-125M on TinyStories, ResNet-50 on ImageNet-1K and ResNet-18 on CIFAR-10, one
  process per GPU (NCCL), no injected delay. Both scales use the same code path.
* Cache. A run's directory is ``RUNS_DIR/<task>-<variant>-<key>``, where ``key`` hashes the
  complete resolved :class:`~empirical.config.TrainConfig` (output directory, progress and
  launcher fields excluded), the worker count and the device kind. A run is reused when its
  ``figrun.json`` carries the same key and it finished (or diverged: a finding, kept).
* Launch. The missing runs of one invocation go into one plan file; ``nproc > 1`` starts
  ``python -m torch.distributed.run --standalone --nproc-per-node N -m paper_figures.runs
  --plan FILE`` once, and every rank trains the runs one after another in the same process
  group (:func:`empirical.train.train` joins an existing group), so process start-up and
  ``import torch`` are paid once. ``nproc = 1`` trains in this process with world size 1
  (``K = 1``: no communication; Local SGD, DiLoCo and PALSGD then differ from plain SGD only
  by their outer step and pulls, so ``--nproc 1`` does not reproduce the paper's comparison).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from empirical.config import README_8M_RUN
from theory.validation import UserInputError

__all__ = [
    "SCALES",
    "FIGURES",
    "ALGORITHMS",
    "ALGORITHM_LABELS",
    "QUICK_LINK",
    "QUICK_OUTER",
    "TaskSpec",
    "RunSpec",
    "RunData",
    "Plan",
    "tasks_for",
    "plan_runs",
    "resolve_spec",
    "run_key",
    "run_directory",
    "cached",
    "execute",
    "load_run",
    "check_paper_requirements",
    "DATA_NAMES",
]

SCALES: tuple[str, ...] = ("quick", "paper")

#: every figure of ``palsgd figures``, in the order they are drawn
FIGURES: tuple[str, ...] = (
    "loss_vs_time",
    "time_to_target",
    "gain_attribution",
    "paper_scale",
    "sensitivity",
    "ablation",
    "theory",
)

#: the compared methods, in plotting order
ALGORITHMS: tuple[str, ...] = ("ddp", "local_sgd", "diloco", "palsgd")
ALGORITHM_LABELS: dict[str, str] = {
    "ddp": "DDP",
    "local_sgd": "Local SGD",
    "diloco": "DiLoCo",
    "palsgd": "PALSGD",
}

#: the emulated slow link of the quick scale: seconds per all-reduce call and per payload
#: byte (1e-7 s/B = 10 MB/s). With K = 2 a gradient all-reduce of the tiny GPT-Neo
#: (35,552 fp32 parameters, 142 kB) then costs about 19 ms, comparable to its gradient
#: step on one CPU core, as communication is comparable to compute in the paper's
#: multi-node settings. An assumption of the quick scale, not a measured network.
QUICK_LINK: dict[str, float] = {"comm_delay_s": 0.005, "comm_delay_per_byte_s": 1e-7}

#: data sets the paper scale needs: name -> (TrainConfig dataset, what the path must hold)
DATA_NAMES: dict[str, tuple[str, str]] = {
    "tinystories": ("tinystories", "TinyStories text (a .txt/.jsonl file or a saved HF dataset)"),
    "imagenet": ("imagefolder", "an ImageNet-1K root with train/ and val/ class folders"),
    "cifar10": ("cifar10", "the CIFAR-10 python batches (cifar-10-batches-py)"),
}

#: TrainConfig fields that do not change what is trained (excluded from the cache key)
#: the outer optimizer of DiLoCo and PALSGD at the quick scale: DiLoCo's gamma = 0.7
#: (Douillard et al. 2023) with momentum 0.5 instead of 0.9. A quick run has only 25 syncs;
#: with mu = 0.9 both DiLoCo and PALSGD stalled near eval loss 3.0 on the tiny GPT-Neo
#: (DDP: 2.57), with mu = 0.5 they track DDP per step (2.59 and 2.61 after 200 steps).
QUICK_OUTER: dict[str, Any] = {"outer": "nesterov", "gamma": 0.7, "mu": 0.5}

_NOT_IN_KEY = frozenset(
    {
        "output_dir",
        "progress",
        "nproc",
        "overwrite",
        "checkpoint_dir",
        "max_restarts",
        "resume",
        "max_steps_this_run",
        "crash_at_step",
        "tensorboard",
    }
)

_STATUS_FILE = "figrun.json"


# ----------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class TaskSpec:
    """One model/data setting: the TrainConfig fields shared by every method on it.

    ``outer``: the outer optimizer of DiLoCo and PALSGD (``outer``, ``gamma``, ``mu``);
    ``local``: ``H``, ``p``, ``eta``, ``T0`` of the local methods; ``data``: the
    :data:`DATA_NAMES` entry it needs (``None``: embedded data).
    """

    name: str
    label: str
    base: Mapping[str, Any]
    local: Mapping[str, Any]
    outer: Mapping[str, Any]
    data: str | None = None
    note: str = ""
    short: str = ""


@dataclass(frozen=True)
class RunSpec:
    """One training run: ``task`` x ``variant`` (an algorithm, or a sweep/ablation point)."""

    task: str
    variant: str
    algorithm: str
    overrides: Mapping[str, Any]
    label: str = ""
    group: str = "main"  # "main", "sweep_H", "sweep_p" or "ablation"
    x: Any = None  # the swept value or the ablation switch

    @property
    def name(self) -> str:
        return f"{self.task}/{self.variant}"


@dataclass
class Plan:
    """The runs a set of figures needs (deduplicated) plus what the plan assumed."""

    scale: str
    nproc: int
    seed: int
    tasks: dict[str, TaskSpec]
    runs: list[RunSpec]
    notes: list[str] = field(default_factory=list)

    def by_group(self, task: str, group: str) -> list[RunSpec]:
        return [r for r in self.runs if r.task == task and r.group == group]

    def to_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "nproc": self.nproc,
            "seed": self.seed,
            "tasks": {
                k: {
                    "label": t.label,
                    "short": t.short,
                    "base": dict(t.base),
                    "local": dict(t.local),
                    "outer": dict(t.outer),
                    "data": t.data,
                    "note": t.note,
                }
                for k, t in self.tasks.items()
            },
            "runs": [
                {
                    "name": r.name,
                    "task": r.task,
                    "variant": r.variant,
                    "algorithm": r.algorithm,
                    "group": r.group,
                    "x": r.x,
                    "label": r.label,
                    "overrides": dict(r.overrides),
                }
                for r in self.runs
            ],
            "notes": list(self.notes),
        }


def _quick_tasks(seed: int) -> dict[str, TaskSpec]:
    common = dict(
        A=1,
        optimizer="adamw",
        weight_decay=0.01,
        clip_grad_norm=1.0,
        seed=seed,
        checkpoint_interval=0,
        iid=True,
        device="cpu",
        **QUICK_LINK,
    )
    return {
        "gptneo": TaskSpec(
            "gptneo",
            "GPT-Neo (tiny, embedded text)",
            base=dict(
                common,
                model="gptneo-tiny",
                dataset="embedded-text",
                seq_len=64,
                batch_size=8,
                T=200,
                alpha=3e-3,
                eval_interval=20,
                eval_batches=8,
                log_interval=10,
            ),
            local=dict(H=8, p=0.2, eta=1.0, T0=0),
            outer=dict(QUICK_OUTER),
            note="quick scale: 2-layer GPT-Neo, hidden 32, byte vocabulary (35,552 parameters)",
            short="GPT-Neo tiny",
        ),
        "resnet": TaskSpec(
            "resnet",
            "ResNet (tiny, CIFAR-style, embedded images)",
            base=dict(
                common,
                model="resnet-tiny",
                dataset="embedded-images",
                batch_size=16,
                T=160,
                alpha=3e-3,
                eval_interval=20,
                eval_batches=8,
                log_interval=10,
            ),
            local=dict(H=8, p=0.2, eta=1.0, T0=0),
            outer=dict(QUICK_OUTER),
            note="quick scale: CIFAR-style ResNet with two BasicBlocks (widths 8, 16) on "
            "32x32 synthetic shape images",
            short="ResNet tiny",
        ),
    }


def _paper_tasks(seed: int, data: Mapping[str, str]) -> dict[str, TaskSpec]:
    # GPT-Neo: the authors' README run (empirical.config.README_8M_RUN; algorithm.md,
    # docs/reference-implementation.md §7), its algorithm fields split off per method.
    algorithm_keys = ("algorithm", "outer", "gamma", "mu", "H", "T0", "p", "eta")
    readme = {k: v for k, v in README_8M_RUN.items() if k not in algorithm_keys}
    readme.update(data_path=data.get("tinystories"), seed=seed, device="auto")
    lm_local = {k: README_8M_RUN[k] for k in ("H", "p", "eta", "T0")}
    lm_outer = {k: README_8M_RUN[k] for k in ("outer", "gamma", "mu")}
    # ResNet: the authors' repository has no ResNet command; these are the argparse
    # defaults of resnet_imagenet / resnet_cifar10 (B 128, H 100, T0 100, p 0.1 ImageNet,
    # 0.2 CIFAR, eta 0.5) with inner SGD-momentum 0.875 and wd 3.05e-5 (ImageNet; NVIDIA
    # RN50 v1.5 recipe, docs/reference-implementation.md §2). Assumptions, stated in the plan.
    imagenet = dict(
        model="resnet50-imagenet",
        dataset="imagefolder",
        data_path=data.get("imagenet"),
        batch_size=128,
        A=16,
        T=14040,
        optimizer="sgd_momentum",
        alpha=0.1,
        momentum=0.875,
        weight_decay=3.0517578125e-05,
        clip_grad_norm=None,
        eval_interval=156,
        eval_batches=50,
        log_interval=26,
        checkpoint_interval=1560,
        seed=seed,
        device="auto",
    )
    cifar = dict(
        model="resnet18-cifar",
        dataset="cifar10",
        data_path=data.get("cifar10"),
        batch_size=128,
        A=1,
        T=19600,
        optimizer="sgd_momentum",
        alpha=0.1,
        momentum=0.9,
        weight_decay=1e-4,
        clip_grad_norm=None,
        eval_interval=98,
        eval_batches=20,
        log_interval=49,
        checkpoint_interval=1960,
        seed=seed,
        device="auto",
    )
    return {
        "gptneo-8m": TaskSpec(
            "gptneo-8m",
            "GPT-Neo-8M, TinyStories",
            base=dict(readme, model="gptneo-8m"),
            local=lm_local,
            outer=lm_outer,
            data="tinystories",
            note="the authors' README run (20,000 steps)",
            short="GPT-Neo-8M",
        ),
        "gptneo-125m": TaskSpec(
            "gptneo-125m",
            "GPT-Neo-125M, TinyStories",
            base=dict(readme, model="gptneo-125m"),
            local=lm_local,
            outer=lm_outer,
            data="tinystories",
            note="the README run's settings on the 125M model",
            short="GPT-Neo-125M",
        ),
        "resnet50-imagenet": TaskSpec(
            "resnet50-imagenet",
            "ResNet-50, ImageNet-1K",
            base=imagenet,
            local=dict(H=100, p=0.1, eta=0.5, T0=100),
            outer=dict(outer="nesterov", gamma=0.25, mu=0.875),
            data="imagenet",
            note="assumption: the authors' resnet_imagenet argparse defaults (90 epochs x "
            "156 steps at K = 4); the paper's exact settings are not in the repository",
            short="ResNet-50/ImageNet",
        ),
        "resnet18-cifar": TaskSpec(
            "resnet18-cifar",
            "ResNet-18, CIFAR-10",
            base=cifar,
            local=dict(H=100, p=0.2, eta=0.5, T0=100),
            outer=dict(outer="nesterov", gamma=0.25, mu=0.9),
            data="cifar10",
            note="assumption: the authors' resnet_cifar10 argparse defaults (200 epochs)",
            short="ResNet-18/CIFAR-10",
        ),
    }


def tasks_for(
    scale: str, seed: int = 0, data: Mapping[str, str] | None = None
) -> dict[str, TaskSpec]:
    """The task settings of a scale (see the module docstring)."""
    _check_scale(scale)
    return _quick_tasks(seed) if scale == "quick" else _paper_tasks(seed, data or {})


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


def _method_overrides(task: TaskSpec, algorithm: str) -> dict[str, Any]:
    """TrainConfig fields of one method on a task (fields of other methods set to None)."""
    none = dict(H=None, p=None, eta=None, T0=None, outer=None, gamma=None, mu=None)
    local = dict(task.local)
    if algorithm == "ddp":
        return dict(none, algorithm="ddp")
    if algorithm == "local_sgd":
        name = "local_sgd" if int(local.get("T0", 0)) == 0 else "post_local_sgd"
        return dict(none, algorithm=name, H=local["H"], T0=local.get("T0", 0), outer="average")
    if algorithm == "diloco":
        return dict(
            none, algorithm="diloco", H=local["H"], T0=local.get("T0", 0), **dict(task.outer)
        )
    if algorithm == "palsgd":
        return dict(none, algorithm="palsgd", **local, **dict(task.outer))
    raise UserInputError(f"unknown algorithm {algorithm!r}: known are {', '.join(ALGORITHMS)}")


def _ablation_value(switch: str, scale: str) -> Any:
    return {
        "pull_first_tensor_only": True,
        "shared_coins": "shared",
        "discard_batch_on_pull": True,
        "repeated_outer_steps": REPEATED_OUTER_STEPS[scale],
        "sync_offset": 1,
    }[switch]


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
    _check_scale(scale)
    figures = list(figures)
    unknown = [f for f in figures if f not in FIGURES]
    if unknown:
        raise UserInputError(f"unknown figure(s) {unknown}: valid figures are {', '.join(FIGURES)}")
    tasks = tasks_for(scale, seed, data)
    runs: list[RunSpec] = []

    def main_runs(task: TaskSpec) -> None:
        for alg in ALGORITHMS:
            ov = dict(task.base, **_method_overrides(task, alg))
            runs.append(RunSpec(task.name, alg, alg, ov, ALGORITHM_LABELS[alg], "main"))

    want_main = {"loss_vs_time", "time_to_target", "gain_attribution"} & set(figures)
    for task in tasks.values():
        if want_main:
            main_runs(task)
    sweep = tasks[SWEEP_TASK[scale]]
    if "sensitivity" in figures and not want_main:  # DDP is drawn for reference
        runs.append(
            RunSpec(
                sweep.name,
                "ddp",
                "ddp",
                dict(sweep.base, **_method_overrides(sweep, "ddp")),
                "DDP",
                "main",
            )
        )
    palsgd = dict(sweep.base, **_method_overrides(sweep, "palsgd"))
    if "sensitivity" in figures:
        for key in ("H", "p"):
            values = sorted(set(SWEEP_VALUES[scale][key]) | {sweep.local[key]})
            for v in values:
                ov = dict(palsgd, **{key: v})
                if key == "p" and v == 0:
                    ov["eta"] = 0.0  # no pulls: eta is irrelevant, keep the pull rate defined
                runs.append(
                    RunSpec(
                        sweep.name,
                        f"palsgd-{key}{v:g}",
                        "palsgd",
                        ov,
                        f"PALSGD {key} = {v:g}",
                        f"sweep_{key}",
                        v,
                    )
                )
    if "ablation" in figures:
        runs.append(
            RunSpec(
                sweep.name,
                "palsgd-as-described",
                "palsgd",
                palsgd,
                "as described",
                "ablation",
                "none",
            )
        )
        all_on: dict[str, Any] = {}
        for switch, (label, fname) in ABLATION_SWITCHES.items():
            val = _ablation_value(switch, scale)
            all_on[fname] = val
            if switch == "repeated_outer_steps":
                label = f"{val} outer steps per sync (Q5)"
            runs.append(
                RunSpec(
                    sweep.name,
                    f"palsgd-{switch}",
                    "palsgd",
                    dict(palsgd, **{fname: val}),
                    label,
                    "ablation",
                    switch,
                )
            )
        runs.append(
            RunSpec(
                sweep.name,
                "palsgd-all-quirks",
                "palsgd",
                dict(palsgd, **all_on),
                "all switches on",
                "ablation",
                "all",
            )
        )
    # deduplicate by name (the same run may serve several figures); keep the first group
    seen: dict[str, RunSpec] = {}
    for r in runs:
        seen.setdefault(r.name, r)
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
        notes.append(f"paper scale: {nproc} process(es), one per GPU (NCCL)")
    for t in tasks.values():
        if t.note:
            notes.append(f"{t.name}: {t.note}")
    return Plan(scale, nproc, seed, tasks, list(seen.values()), notes)


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise UserInputError(f"unknown scale {scale!r}: valid scales are {', '.join(SCALES)}")


# ----------------------------------------------------------------------------- cache


def resolve_spec(spec: RunSpec) -> dict[str, Any]:
    """The complete, validated TrainConfig of a run as a dict (output_dir not yet set)."""
    from empirical.config import TrainConfig, config_to_dict, resolve_config

    known = {f.name for f in dataclasses.fields(TrainConfig)}
    ov = {k: v for k, v in spec.overrides.items() if k in known}
    cfg = resolve_config(overrides=ov)
    return config_to_dict(cfg)


def _device_kind() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def run_key(config: Mapping[str, Any], nproc: int, device_kind: str | None = None) -> str:
    """Hash of what determines a run's results (16 hex digits)."""
    payload = {k: v for k, v in sorted(config.items()) if k not in _NOT_IN_KEY}
    payload["__world_size__"] = int(nproc)
    payload["__device_kind__"] = device_kind or _device_kind()
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_directory(runs_dir: Path, spec: RunSpec, key: str) -> Path:
    """``RUNS_DIR/<task>-<algorithm>-<key>``: runs with the same key share one directory
    (a sweep point equal to the main run is the main run)."""
    slug = f"{spec.task}-{spec.algorithm}".replace("/", "-").replace(" ", "_")
    return Path(runs_dir) / f"{slug}-{key[:12]}"


def cached(directory: Path, key: str) -> dict[str, Any] | None:
    """The run's status record if it is complete and belongs to ``key``, else None."""
    status = Path(directory) / _STATUS_FILE
    if not status.is_file() or not (Path(directory) / "metrics.jsonl").is_file():
        return None
    try:
        rec = json.loads(status.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("key") != key or rec.get("status") not in ("finished", "diverged"):
        return None
    return rec


# ----------------------------------------------------------------------------- execution


@dataclass
class RunResult:
    """Where a planned run lives and how it was obtained."""

    spec: RunSpec
    key: str
    directory: Path
    status: str  # finished | diverged | failed | missing
    cached: bool
    elapsed_s: float | None = None
    message: str = ""


def _status_record(key: str, code: int, elapsed: float, message: str = "") -> dict[str, Any]:
    status = {0: "finished", 3: "diverged"}.get(code, "failed")
    return {
        "key": key,
        "status": status,
        "exit_code": code,
        "elapsed_s": elapsed,
        "message": message,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _train_one(item: Mapping[str, Any], rank: int) -> int:
    """Train one planned run in the current process group; rank 0 writes figrun.json."""
    from empirical.config import config_from_dict
    from empirical.metrics import atomic_write_json
    from empirical.train import train

    started = time.perf_counter()
    out = Path(item["config"]["output_dir"])
    try:
        cfg = config_from_dict(item["config"])
        code = train(cfg)
        message = ""
    except UserInputError as exc:  # raised on every rank before any collective
        code, message = 2, str(exc)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            out / _STATUS_FILE,
            _status_record(item["key"], code, time.perf_counter() - started, message),
        )
    return code


def _worker(plan_file: str) -> int:
    """Entry of every rank under torchrun: train the plan's runs in one process group."""
    from tqdm.auto import tqdm

    from empirical.distributed import cleanup, init_distributed

    items = json.loads(Path(plan_file).read_text())["runs"]
    device = (
        "cuda"
        if _device_kind() == "cuda" and not all(it["config"].get("device") == "cpu" for it in items)
        else "cpu"
    )
    ctx = init_distributed(device=device)
    failures = 0
    try:
        bar = tqdm(items, desc="figure runs", unit="run", disable=ctx.rank != 0, dynamic_ncols=True)
        for item in bar:
            bar.set_postfix_str(item["name"])
            if _train_one(item, ctx.rank) not in (0, 3):
                failures += 1
    finally:
        cleanup(ctx)
    return 1 if failures else 0


def _launch(plan_file: Path, nproc: int, log) -> int:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "paper_figures.runs",
        "--plan",
        str(plan_file),
    ]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    log(
        f"palsgd figures: training {len(json.loads(plan_file.read_text())['runs'])} run(s) "
        f"on {nproc} processes: {' '.join(cmd[1:])}"
    )
    return subprocess.run(cmd, env=env, check=False).returncode


def execute(
    plan: Plan, runs_dir: Path, *, train_missing: bool = True, progress: bool = True, log=None
) -> dict[str, RunResult]:
    """Make every run of ``plan`` available in ``runs_dir``; returns name -> RunResult.

    Cached runs are reused; missing ones are trained in one launch (see the module
    docstring) unless ``train_missing`` is False, in which case a missing run raises
    :class:`UserInputError` naming it. A run that fails for another reason than
    divergence is reported with status ``failed`` (its figures mark it as missing).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    runs_dir = Path(runs_dir)
    results: dict[str, RunResult] = {}
    todo: list[dict[str, Any]] = []
    dev = _device_kind()
    for spec in plan.runs:
        cfg = resolve_spec(spec)
        key = run_key(cfg, plan.nproc, dev)
        directory = run_directory(runs_dir, spec, key)
        rec = cached(directory, key)
        if rec is not None:
            results[spec.name] = RunResult(
                spec,
                key,
                directory,
                rec["status"],
                True,
                rec.get("elapsed_s"),
                rec.get("message", ""),
            )
            continue
        results[spec.name] = RunResult(spec, key, directory, "missing", False)
        if any(t["key"] == key for t in todo):
            continue
        cfg.update(
            output_dir=str(directory),
            overwrite=True,
            progress=bool(progress and plan.scale == "paper"),
            nproc=plan.nproc,
        )
        todo.append({"name": spec.name, "key": key, "config": cfg})
    if todo and not train_missing:
        names = ", ".join(t["name"] for t in todo)
        raise UserInputError(
            f"run(s) not found in the runs directory '{runs_dir}' (and "
            f"--no-train was given): {names}"
        )
    if todo:
        runs_dir.mkdir(parents=True, exist_ok=True)
        if plan.nproc > 1:
            plan_file = runs_dir / f"plan-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
            plan_file.write_text(json.dumps({"runs": todo}, indent=1, default=str))
            code = _launch(plan_file, plan.nproc, log)
            if code != 0:
                log(f"palsgd figures: the training launcher exited with {code}")
        else:
            for item in todo:
                _train_one(item, 0)
    for res in results.values():
        if res.cached:
            continue
        status_path = res.directory / _STATUS_FILE
        if status_path.is_file():
            rec = json.loads(status_path.read_text())
            res.status = rec.get("status", "failed") if rec.get("key") == res.key else "failed"
            res.elapsed_s = rec.get("elapsed_s")
            res.message = rec.get("message", "")
        else:
            res.status = "failed"
            res.message = "the run did not finish (see the training output above)"
    return results


# ----------------------------------------------------------------------------- reading


@dataclass
class RunData:
    """A finished run as the figures read it.

    ``train``/``eval``: the ``"train"`` and ``"eval"`` records of ``metrics.jsonl``
    (:data:`empirical.metrics.TRAIN_FIELDS`, :data:`empirical.metrics.EVAL_FIELDS`);
    ``summary``: ``summary.json``; ``config``: the run's resolved TrainConfig dict.
    """

    name: str
    task: str
    algorithm: str
    label: str
    config: dict[str, Any]
    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    summary: dict[str, Any]
    status: str = "finished"
    directory: str | None = None
    group: str = "main"
    x: Any = None

    @property
    def world_size(self) -> int:
        return int(self.summary.get("world_size") or self.config.get("nproc") or 1)

    @property
    def parameters(self) -> int | None:
        v = self.summary.get("totals", {}).get("parameters")
        return int(v) if v is not None else None


def load_run(directory: str | os.PathLike, spec: RunSpec | None = None) -> RunData:
    """Read a run directory (metrics.jsonl, summary.json, config.json)."""
    from empirical.metrics import read_jsonl

    d = Path(directory)
    if not (d / "metrics.jsonl").is_file():
        raise UserInputError(f"run directory '{d}' has no metrics.jsonl")
    recs = read_jsonl(d / "metrics.jsonl")
    summary = json.loads((d / "summary.json").read_text()) if (d / "summary.json").is_file() else {}
    config = summary.get("config") or (
        json.loads((d / "config.json").read_text()) if (d / "config.json").is_file() else {}
    )
    alg = spec.algorithm if spec else config.get("algorithm", "?")
    if alg == "post_local_sgd":
        alg = "local_sgd"
    return RunData(
        name=spec.name if spec else d.name,
        task=spec.task if spec else config.get("model", "?"),
        algorithm=alg,
        label=(spec.label if spec else "") or ALGORITHM_LABELS.get(alg, alg),
        config=config,
        train=[r for r in recs if r.get("kind") == "train"],
        eval=[r for r in recs if r.get("kind") == "eval"],
        summary=summary,
        status=summary.get("status", "finished"),
        directory=str(d),
        group=spec.group if spec else "main",
        x=spec.x if spec else None,
    )


# ----------------------------------------------------------------------------- paper checks


def check_paper_requirements(plan: Plan, data: Mapping[str, str]) -> list[str]:
    """What the paper scale lacks here (GPUs, data sets); an empty list when runnable."""
    problems = []
    try:
        import torch

        n_gpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:  # pragma: no cover
        n_gpu = 0
    if n_gpu < plan.nproc:
        problems.append(f"--scale paper needs {plan.nproc} CUDA GPU(s) (--nproc), found {n_gpu}")
    needed = sorted({plan.tasks[r.task].data for r in plan.runs if plan.tasks[r.task].data})
    for name in needed:
        path = data.get(name)
        what = DATA_NAMES[name][1]
        if not path:
            problems.append(f"data set '{name}' is needed: pass --data {name}=PATH ({what})")
        elif not Path(path).exists():
            problems.append(f"data set '{name}': path '{path}' does not exist ({what})")
    return problems


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m paper_figures.runs",
        description="train the runs of a figures plan (one rank)",
    )
    parser.add_argument("--plan", required=True, help="plan file written by palsgd figures")
    args = parser.parse_args(argv)
    return _worker(args.plan)


if __name__ == "__main__":  # pragma: no cover - run by torchrun
    sys.exit(_main())
