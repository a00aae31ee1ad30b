"""The run against the theory: every way it is outside the assumptions (:func:`theory_scope`),
the values handed to :func:`theory.check.check` and the measured-vs-bound comparison."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from torch import nn

from theory.algorithm import lookup
from theory.check import CheckReport, check
from theory.check.render import fmt
from theory.check.vacuity import Vacuity, vacuity


def theory_scope(
    cfg: Any, algorithm: Mapping[str, Any], model: nn.Module | None = None
) -> list[str]:
    """Every way in which a run is outside the assumptions of the encoded bounds.

    ``cfg`` is a :class:`empirical.config.TrainConfig`, ``algorithm`` the resolved
    :class:`empirical.algorithms.AlgorithmConfig` as a dict. An empty list means inside.
    """
    out: list[str] = []
    name = algorithm.get("name")
    row = lookup(name)
    if cfg.optimizer == "adamw":
        out.append("inner optimizer AdamW: the bounds assume plain SGD steps (S1)")
    elif cfg.optimizer == "sgd_momentum":
        out.append(f"inner SGD with momentum {cfg.momentum}: the bounds assume plain SGD (S1)")
    if cfg.weight_decay:
        out.append(
            f"weight decay {cfg.weight_decay}: the run minimises f plus a "
            "regulariser, the probe measures f"
        )
    if algorithm.get("clip_grad_norm") is not None:
        out.append(
            f"gradient clipping at {algorithm['clip_grad_norm']}: clipped steps are "
            "biased, not covered"
        )
    if row.local and (
        algorithm.get("gamma") != 1
        or algorithm.get("mu") != 0
        or algorithm.get("outer") != "average"
    ):
        out.append(
            f"outer optimizer {algorithm.get('outer')} (gamma = {algorithm.get('gamma')}, "
            f"mu = {algorithm.get('mu')}): the bounds assume plain averaging (S2)"
        )
    if row.pulls and algorithm.get("p", 0) > 0:
        if algorithm.get("coins") == "shared":
            out.append(
                "shared coins (authors' code): the PALSGD analysis assumes independent coins (S3)"
            )
        if algorithm.get("pull_first_tensor_only"):
            out.append("pull on the first parameter tensor only (authors' code quirk)")
        if algorithm.get("discard_batch_on_pull"):
            out.append("pull steps discard their batch (authors' code quirk)")
    if algorithm.get("outer_steps_per_sync", 1) > 1:
        out.append(
            f"{algorithm['outer_steps_per_sync']} outer steps per sync (authors' README quirk)"
        )
    if algorithm.get("sync_offset", 0):
        out.append(f"sync offset {algorithm['sync_offset']}: the first round is shorter than H")
    if algorithm.get("sync_delay", 0):
        out.append(
            f"overlapped sync (sync_delay = {algorithm['sync_delay']}): the bounds assume the "
            "blocking sync; theory.simulate and theory.moments.exact_moments model the delay"
        )
    if model is not None:
        out += _model_scope(model, name, algorithm)
    return out


def _model_scope(model: nn.Module, name: Any, algorithm: Mapping[str, Any]) -> list[str]:
    """What of the model puts a run outside the theory (BatchNorm, buffers, dropout)."""
    out: list[str] = []
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        out.append(
            "BatchNorm: the training loss depends on the batch; the probe uses eval "
            "mode (running statistics)"
        )
    has_buffers = any(b.is_floating_point() for b in model.buffers())
    if lookup(name).local and has_buffers and algorithm.get("buffers", "average") != "average":
        out.append(
            f"buffer policy {algorithm['buffers']!r} at syncs (the authors' code "
            "resets workers to the anchor's buffers): not averaged"
        )
    drop = [m.p for m in model.modules() if isinstance(m, nn.Dropout) and m.p > 0]
    config = getattr(model, "config", None)
    for key in ("resid_dropout", "embed_dropout", "attention_dropout"):
        if config is not None and getattr(config, key, 0) and not drop:
            drop.append(getattr(config, key))
    if drop:
        out.append(
            f"dropout {max(drop)}: training gradients carry dropout noise the probe "
            "(eval mode) does not measure"
        )
    return out


def warmup_steps(algorithm: Mapping[str, Any]) -> int:
    """``T0``: the DDP warm-up steps of an algorithm that takes one (0 for the others)."""
    return int(algorithm.get("T0") or 0) if lookup(algorithm.get("name")).warms_up else 0


def checker_algorithm(algorithm: Mapping[str, Any]) -> str:
    """The algorithm name :func:`theory.check.check` takes for a run's algorithm (PALSGD
    with ``p = 0`` is Local SGD)."""
    name = algorithm.get("name")
    row = lookup(name)
    if not row.local or (row.pulls and algorithm.get("p", 0) > 0):
        return name
    return "local_sgd"


def theory_values(
    estimates: Mapping[str, Any],
    *,
    K: int,
    T: int,
    alpha: float,
    algorithm: Mapping[str, Any],
    A: int = 1,
) -> dict[str, float]:
    """The parameters handed to :func:`theory.check.check`.

    ``T`` is the length of the local phase (warm-up steps excluded). ``sigma`` is the
    square root of the step-gradient variance, ``zeta`` of the heterogeneity fed.
    """
    values: dict[str, float] = {
        "L": float(estimates["L"]["value"]),
        "sigma": math.sqrt(max(float(estimates["sigma2"]["value"]), 0.0)),
        "zeta": math.sqrt(max(float(estimates["zeta2"]["value"]), 0.0)),
        "F0": float(estimates["F0"]["lower_bound"]),
        "K": int(K),
        "T": int(T),
        "alpha": float(alpha),
    }
    row = lookup(algorithm.get("name"))
    if row.local:
        values.update(
            H=int(algorithm["H"]), gamma=float(algorithm["gamma"]), mu=float(algorithm["mu"])
        )
    if row.pulls:
        values.update(p=float(algorithm["p"]), eta=float(algorithm["eta"]))
    T0 = warmup_steps(algorithm)
    if T0 > 0:
        values["T0"] = T0
    if A > 1:
        values["A"] = int(A)
    return values


def _verdict(b: Any, measured: float | None, outside: bool, vac: Vacuity | None) -> str:
    """How a measured rate stands against one bound of a :class:`theory.check.CheckReport`;
    a bound that is vacuous at the run (:mod:`theory.check.vacuity`) with the measurement
    below it is ``"vacuous (reason)"``, never covered."""
    if b.status != "evaluated" or b.value is None:
        return f"not evaluated: {b.reason}"
    if measured is None:
        return "no measured rate (no recorded point in the local phase)"
    side = "above" if measured > b.value else "below"
    if measured <= b.value and vac is not None and vac.vacuous:
        ctx = ""
        if not b.conditions_hold:
            ctx = "; its conditions fail, the bound does not apply (indication)"
        elif outside or not b.applicable:
            ctx = "; run outside the theory (indication)"
        return f"{vac.label}; measured is below it, which says nothing{ctx}"
    if not b.conditions_hold:
        return (
            f"conditions fail, the bound does not apply; measured is {side} its value (indication)"
        )
    if outside or not b.applicable:
        return f"run outside the theory; measured is {side} the bound (indication)"
    if measured > b.value:
        return (
            "measured ABOVE the bound with its conditions holding: a "
            "finding (one realisation, estimated constants)"
        )
    return "measured below the bound"


def _vacuous_verdict(rep: CheckReport, vac: Mapping[str, Vacuity]) -> None:
    """Replace a ``covered`` verdict by ``vacuous (reason)`` when the bound it names (the
    smallest clean bound, as :func:`theory.check.check` picks it) is vacuous at the run."""
    if rep.verdict_code != "covered":
        return
    clean = [
        b
        for b in rep.bounds
        if b.status == "evaluated" and b.conditions_hold and b.applicable and not b.caveats
    ]
    b = min(clean, key=lambda b: b.value if b.value is not None else math.inf)
    v = vac.get(b.name)
    if v is not None and v.vacuous:
        rep.verdict_code = "vacuous"
        rep.verdict = (
            f"{v.label}: the conditions of {b.name} hold at alpha = {fmt(b.alpha)}, but its "
            f"value {fmt(b.value)} says nothing about this run"
        )


def compare_with_theory(
    values: Mapping[str, float],
    measured: float | None,
    *,
    algorithm: str,
    outside: Sequence[str] = (),
    bounds: Sequence[str] | None = None,
    start_grad_sq: float | None = None,
) -> dict[str, Any]:
    """Run the checker on ``values`` and set ``measured`` against every evaluated bound.

    Returns ``{"check": CheckReport.to_dict(), "text": CheckReport.to_text(),
    "comparison": [...], "verdict", "verdict_code"}``; each comparison entry has the
    bound's value, whether its conditions hold, ``ratio = measured / bound``, its vacuity at
    the run (:func:`theory.check.vacuity.vacuity` with ``start_grad_sq``, the run's own
    ``||grad f(x0)||^2``; ``None``: that reason is not tested) and a verdict. A vacuous
    bound's comparison is ``"vacuous (reason)"`` and the check's ``covered`` verdict becomes
    ``vacuous`` when the bound it names is vacuous. A measured value above a bound whose
    conditions hold, for a run inside the theory, is flagged as a finding (still one
    realisation, with estimated constants).
    """
    notes = [f"outside the theory: {o}" for o in outside]
    rep = check(dict(values), bounds, algorithm=algorithm, notes=notes)
    vac = {
        b.name: vacuity(b.value, b.terms, start_grad_sq)
        for b in rep.bounds
        if b.status == "evaluated" and b.value is not None
    }
    _vacuous_verdict(rep, vac)
    comp = []
    for b in rep.bounds:
        v = vac.get(b.name)
        entry: dict[str, Any] = {
            "bound": b.name,
            "status": b.status,
            "reason": b.reason,
            "applicable": b.applicable,
            "value": b.value,
            "conditions_hold": b.conditions_hold,
            "conditions": [asdict(c) for c in b.conditions],
            "measured": measured,
            "ratio": None,
            "vacuity": None if v is None else {**asdict(v), "vacuous": v.vacuous, "label": v.label},
            "verdict": "",
        }
        if b.status == "evaluated" and b.value is not None and measured is not None:
            entry["ratio"] = measured / b.value if b.value else math.inf
        entry["verdict"] = _verdict(b, measured, bool(outside), v)
        comp.append(entry)
    return {
        "algorithm": algorithm,
        "values": dict(values),
        "check": rep.to_dict(),
        "text": rep.to_text(),
        "verdict": rep.verdict,
        "verdict_code": rep.verdict_code,
        "start_grad_sq": start_grad_sq,
        "comparison": comp,
        "warnings": [w.message for w in rep.warnings],
    }
