"""``palsgd figures --scale paper --smoke-runs N``: the first ``N`` runs of the plan, each
shrunk to a few steps at tiny sizes on the embedded data, trained on the same GPU
placement as the real plan (the same workers, backend, GPU sets and launches): a check
of the launch path in minutes before a run of days. Its runs are no results: they keep
the model, the algorithm and its switches, nothing else of the recipe."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.errors import UserInputError
from paper_figures.runs.specs import Plan, RunSpec

__all__ = ["SMOKE_FIELDS", "smoke_plan"]

#: the fields a smoke run changes (the rest of the paper run is kept)
SMOKE_FIELDS: dict[str, Any] = {
    "T": 4,
    "batch_size": 2,
    "A": 1,
    "eval_interval": 2,
    "eval_batches": 1,
    "log_interval": 2,
    "checkpoint_interval": 0,
    "data_path": None,
}


def _shrunk(spec: RunSpec) -> RunSpec:
    ov = dict(spec.overrides, **SMOKE_FIELDS)
    lm = str(ov.get("model", "")).startswith("gptneo")
    ov["dataset"] = "embedded-text" if lm else "embedded-images"
    if lm:
        ov["seq_len"] = 16
    if ov.get("H"):
        ov["H"] = 2
    if ov.get("T0"):
        ov["T0"] = 1
    if ov.get("outer_steps_per_sync"):
        ov["outer_steps_per_sync"] = min(int(ov["outer_steps_per_sync"]), 2)
    return replace(spec, overrides=ov)


def smoke_plan(plan: Plan, count: int) -> Plan:
    """The first ``count`` runs of ``plan``, shrunk (module docstring)."""
    if count < 1:
        raise UserInputError(f"--smoke-runs must be >= 1, got {count}")
    runs = [_shrunk(r) for r in plan.runs[:count]]
    note = (
        f"smoke: the first {len(runs)} run(s) of the plan at {SMOKE_FIELDS['T']} steps, tiny "
        "sizes, embedded data: a check of the launch, not a result"
    )
    return replace(plan, runs=runs, notes=[note, *plan.notes])
