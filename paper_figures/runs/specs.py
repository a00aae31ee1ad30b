"""What a plan is made of: scales, figures, the compared methods, task and run specs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from core.errors import UserInputError
from theory.algorithm import DISTRIBUTED_NAMES, LABELS, lookup

__all__ = [
    "SCALES",
    "FIGURES",
    "ALGORITHMS",
    "ALGORITHM_LABELS",
    "QUICK_LINK",
    "QUICK_OUTER",
    "DATA_NAMES",
    "TaskSpec",
    "RunSpec",
    "Plan",
    "check_scale",
    "distributed_name",
    "figure_method",
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

#: the compared methods, in plotting order: the distributed algorithms of the table
#: (:data:`theory.algorithm.DISTRIBUTED_NAMES`) but the one that is another's warm-up
#: variant (``local_sgd`` runs as ``post_local_sgd`` when the task has a warm-up, see
#: :func:`distributed_name`) and those with an elastic sync (EASGD is not among the paper's
#: methods: DDP, Local SGD, DiLoCo and PALSGD in Naganuma et al. 2025)
ALGORITHMS: tuple[str, ...] = tuple(
    n
    for n in DISTRIBUTED_NAMES
    if n not in {lookup(m).warmup_name for m in DISTRIBUTED_NAMES} and not lookup(n).elastic
)
#: their display names (:data:`theory.algorithm.LABELS`, as :data:`paper_figures.style.LABELS`;
#: the run plan and its training ranks do not import matplotlib)
ALGORITHM_LABELS: dict[str, str] = {n: LABELS[n] for n in ALGORITHMS}

#: the compared methods whose algorithm takes a DDP warm-up of ``T0 >= 1`` steps under
#: another name (:attr:`theory.algorithm.Algorithm.warmup_name`)
_WITH_WARMUP: dict[str, str] = {
    n: lookup(n).warmup_name for n in ALGORITHMS if lookup(n).warmup_name
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

#: the outer optimizer of DiLoCo and PALSGD at the quick scale: DiLoCo's gamma = 0.7
#: (Douillard et al. 2023) with momentum 0.5 instead of 0.9. A quick run has only 25 syncs;
#: with mu = 0.9 both DiLoCo and PALSGD stalled near eval loss 3.0 on the tiny GPT-Neo
#: (DDP: 2.57), with mu = 0.5 they track DDP per step (2.59 and 2.61 after 200 steps).
QUICK_OUTER: dict[str, Any] = {"outer": "nesterov", "gamma": 0.7, "mu": 0.5}


def distributed_name(method: str, T0: int) -> str:
    """The :data:`theory.algorithm.DISTRIBUTED_NAMES` entry a compared method trains as with
    ``T0`` warm-up steps (Local SGD after a warm-up is Post-Local SGD)."""
    return _WITH_WARMUP.get(method, method) if int(T0) > 0 else method


def figure_method(name: str) -> str:
    """The compared method (:data:`ALGORITHMS`) a trained algorithm ``name`` is drawn as."""
    return next((m for m, w in _WITH_WARMUP.items() if w == name), name)


def check_scale(scale: str) -> None:
    """Raise :class:`UserInputError` unless ``scale`` is one of :data:`SCALES`."""
    if scale not in SCALES:
        raise UserInputError(f"unknown scale {scale!r}: valid scales are {', '.join(SCALES)}")


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

    def to_dict(self) -> dict[str, Any]:
        """The fields but ``name`` (the key of the task in a plan), mappings as dicts."""
        return {k: v for k, v in asdict(self).items() if k != "name"}


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

    def to_dict(self) -> dict[str, Any]:
        """``name`` and the fields, ``overrides`` as a dict."""
        return {"name": self.name, **asdict(self)}


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
            "tasks": {k: t.to_dict() for k, t in self.tasks.items()},
            "runs": [r.to_dict() for r in self.runs],
            "notes": list(self.notes),
        }
