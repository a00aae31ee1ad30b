"""``palsgd probe --sweep H=1,2,4,8``: the bound's dependences set against measured ones.

Short seeded runs (:func:`empirical.probe.sweep_run.run_palsgd`) at every swept value of
``H`` (or ``p``), the other hyperparameters the probed run's; each run's rate
``(1/T) sum_t ||grad f(xbar_t)||^2`` and its running average along the run. For the swept
parameter the measured *change* over the swept values (its exponent with a seed interval,
:mod:`empirical.probe.sweep_fit`) is set beside the bound's own change at the probed
constants, term by term (the drift terms are what grow with ``H``), with a verdict. For
``T`` the running average along the runs at the smallest swept value gives the measured
exponent in ``t``, set beside the bound's exponent in ``T``.

Writes ``sweep.csv`` (one row per swept value: the rate, its change and their intervals,
the bound and each of its terms), ``sweep.json`` (:class:`SweepReport`) and ``sweep.png``
(the rate and the bound's prediction against the swept value; the running averages).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from core.errors import UserInputError
from core.io import atomic_write_json, write_csv
from empirical.probe.estimate import _t_quantile
from empirical.probe.sweep_fit import ChangeFit, Verdict, compare_change, fit_change, fit_exponent
from empirical.probe.sweep_run import RunCurve, SweepObjective, run_palsgd
from theory.check import check
from theory.check.render import term_label

__all__ = [
    "AXES",
    "Dependence",
    "SweepReport",
    "SweepSpec",
    "bound_curve",
    "parse_sweep",
    "run_sweep",
    "write_sweep",
]

#: the parameters a sweep can vary
AXES = ("H", "p")


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep: ``axis`` (``H`` or ``p``) over ``values`` (ascending, at least 3),
    ``seeds`` runs of ``T`` steps each, ``||grad f||^2`` recorded every ``record_every``
    steps; the other hyperparameters: ``H``, ``p``, ``eta``, ``alpha`` (the axis's own is
    replaced by each swept value)."""

    axis: str
    values: tuple[float, ...]
    seeds: int
    T: int
    record_every: int
    H: int
    p: float
    eta: float
    alpha: float

    def at(self, value: float) -> dict[str, float]:
        """The hyperparameters of a run at a swept value."""
        hp = {"H": self.H, "p": self.p, "eta": self.eta, "alpha": self.alpha}
        hp[self.axis] = int(value) if self.axis == "H" else float(value)
        return hp


def parse_sweep(text: str, flag: str = "--sweep") -> tuple[str, tuple[float, ...]]:
    """``"H=1,2,4,8"`` -> ``("H", (1, 2, 4, 8))``; bad input names ``flag``."""
    name, sep, rest = str(text).partition("=")
    name = name.strip()
    if not sep or name not in AXES:
        raise UserInputError(
            f"{flag}: expected NAME=V1,V2,V3 with NAME one of {AXES}, got {text!r}"
        )
    try:
        vals = tuple(float(v) for v in rest.split(","))
    except ValueError:
        raise UserInputError(
            f"{flag}: the values of {name} must be numbers, got {rest!r}"
        ) from None
    if len(vals) < 3 or len(set(vals)) != len(vals) or list(vals) != sorted(vals):
        raise UserInputError(f"{flag}: give at least 3 distinct ascending values of {name}")
    if name == "H" and any(v < 1 or v != int(v) for v in vals):
        raise UserInputError(f"{flag}: H values must be integers >= 1, got {rest}")
    if name == "p" and any(not 0 < v < 1 for v in vals):
        raise UserInputError(f"{flag}: p values must be in (0, 1), got {rest}")
    return name, vals


@dataclass
class Dependence:
    """One dependence (the swept parameter, or ``T``): the measured exponent with its
    interval, the prediction's, the measured and predicted change (``None`` for ``T``,
    whose exponent is of the rate itself) and the verdict."""

    parameter: str
    prediction: str
    measured_exponent: float | None
    measured_exponent_ci: tuple[float, float] | None
    predicted_exponent: float | None
    measured_change: float | None
    measured_change_ci: tuple[float, float] | None
    predicted_change: float | None
    verdict: str
    verdict_text: str
    factor: float | None = None


@dataclass
class SweepReport:
    """Everything a sweep found (``asdict`` is JSON-ready): the spec, the constants the
    bound was evaluated at, one row per swept value, the running averages of every run
    (``curves[value][seed]``) and the dependences."""

    spec: SweepSpec
    constants: dict[str, float]
    bound: str
    rows: list[dict[str, float | None]]
    curves: dict[str, list[RunCurve]]
    dependences: list[Dependence] = field(default_factory=list)


#: a prediction: the rate it predicts at each swept value and its terms (label -> value)
Prediction = Callable[[Mapping[str, float]], tuple[float, dict[str, float]]]


def bound_curve(constants: Mapping[str, float], bound: str) -> Prediction:
    """The registered bound ``bound`` (:func:`theory.check.check`) at ``constants`` (``L``,
    ``sigma``, ``zeta``, ``F0``, ``K``, ``T``) and a run's hyperparameters, with its terms
    summed by kind (:func:`theory.check.render.term_label`: ``F0``, ``sigma^2``,
    ``sigma^2 drift``, ``zeta^2 drift``...)."""

    def predict(hp: Mapping[str, float]) -> tuple[float, dict[str, float]]:
        values = {**constants, **hp, "gamma": 1.0, "mu": 0.0}
        b = check(values, [bound]).bound(bound)
        if b.status != "evaluated" or b.value is None:
            raise UserInputError(f"the bound {bound} is not evaluated at {dict(hp)}: {b.reason}")
        terms: dict[str, float] = {}
        for t in b.terms:
            terms[term_label(t.term)] = terms.get(term_label(t.term), 0.0) + float(t.value)
        return float(b.value), terms

    return predict


def run_sweep(
    objective: SweepObjective,
    spec: SweepSpec,
    constants: Mapping[str, float],
    *,
    bound: str = "palsgd",
    prediction: Prediction | None = None,
    prediction_name: str = "the bound",
    confidence: float = 0.95,
    progress: Callable[[str], None] | None = None,
) -> SweepReport:
    """Run the sweep (module docstring) and set it against ``prediction`` (default: the
    bound ``bound`` at ``constants`` with the runs' ``K`` and ``T``)."""
    consts = {**constants, "K": objective.K, "T": spec.T}
    predict = prediction or bound_curve(consts, bound)
    curves: dict[str, list[RunCurve]] = {}
    for v in spec.values:
        hp = spec.at(v)
        if progress is not None:
            progress(f"sweep {spec.axis} = {v:g}: {spec.seeds} runs of {spec.T} steps")
        curves[f"{v:g}"] = [
            run_palsgd(objective, **hp, T=spec.T, seed=s, record_every=spec.record_every)
            for s in range(spec.seeds)
        ]
    rates = np.array([[c.rate for c in curves[f"{v:g}"]] for v in spec.values]).T
    fit = fit_change(spec.values, rates, confidence)
    preds = [predict(spec.at(v)) for v in spec.values]
    rows = _rows(spec, rates, preds, confidence)
    pc = [p[0] - preds[0][0] for p in preds[1:]]
    pex = fit_exponent(np.asarray(spec.values[1:]) - spec.values[0], pc)
    verdict = compare_change(fit, pc[-1], pex, prediction_name)
    deps = [_dependence(spec.axis, prediction_name, fit, pex, pc[-1], verdict)]
    deps.append(_t_dependence(spec, curves, predict, prediction is None, confidence))
    return SweepReport(spec, dict(consts), bound, rows, curves, deps)


def _rows(
    spec: SweepSpec, rates: np.ndarray, preds: list, confidence: float
) -> list[dict[str, float | None]]:
    """One table row per swept value (see the module docstring)."""
    n = rates.shape[0]
    tq = _t_quantile(confidence, n - 1)
    rows = []
    for i, v in enumerate(spec.values):
        d = rates[:, i] - rates[:, 0]
        se_r = rates[:, i].std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
        se_d = d.std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
        row: dict[str, float | None] = {
            spec.axis: v,
            "seeds": n,
            "rate": float(rates[:, i].mean()),
            "rate_lo": float(rates[:, i].mean() - tq * se_r),
            "rate_hi": float(rates[:, i].mean() + tq * se_r),
            "change": float(d.mean()),
            "change_lo": float(d.mean() - tq * se_d) if i else 0.0,
            "change_hi": float(d.mean() + tq * se_d) if i else 0.0,
            "predicted": preds[i][0],
            "predicted_change": preds[i][0] - preds[0][0],
        }
        row.update({f"term {k}": val for k, val in preds[i][1].items()})
        rows.append(row)
    return rows


def _dependence(
    axis: str, name: str, fit: ChangeFit, pex: float | None, pc: float, verdict: Verdict
) -> Dependence:
    return Dependence(
        axis, name, fit.exponent, fit.exponent_ci, pex, fit.change, fit.change_ci, pc,
        verdict.code, verdict.text, verdict.factor,
    )  # fmt: skip


def _t_dependence(
    spec: SweepSpec,
    curves: Mapping[str, list[RunCurve]],
    predict: Prediction,
    is_bound: bool,
    confidence: float,
) -> Dependence:
    """``T``: the exponent in ``t`` of the running average at the smallest swept value
    (jackknife over the seeds) against the bound's exponent in ``T`` over the same ``t``."""
    runs = curves[f"{spec.values[0]:g}"]
    ts = np.asarray(runs[0].running_steps, dtype=float)
    R = np.array([c.running for c in runs])
    keep = ts >= max(ts[-1] / 4, 1)
    ts, R = ts[keep], R[:, keep]
    ex = fit_exponent(ts, R.mean(0))
    n = R.shape[0]
    ci = None
    if ex is not None and n > 2:
        jack = [fit_exponent(ts, np.delete(R, s, axis=0).mean(0)) for s in range(n)]
        if all(j is not None for j in jack):
            ja = np.asarray(jack, dtype=float)
            se = math.sqrt((n - 1) / n * float(np.sum((ja - ja.mean()) ** 2)))
            tq = _t_quantile(confidence, n - 1)
            ci = (ex - tq * se, ex + tq * se)
    name = "the bound" if is_bound else "the prediction"
    pex = None
    if is_bound and len(ts) >= 2:
        hp = spec.at(spec.values[0])
        pex = fit_exponent(ts, [predict({**hp, "T": int(t)})[0] for t in ts])
    if ci is None or pex is None:
        code, text = "undecided", "undecided: no interval for the measured exponent in t"
        if pex is None:
            text = f"undecided: {name} has no T curve here"
    elif ci[0] <= pex <= ci[1]:
        code, text = (
            "agrees",
            f"agrees: {name}'s exponent {pex:.3g} is inside [{ci[0]:.3g}, {ci[1]:.3g}]",
        )
    elif pex < ci[0]:
        code = "contradicts"
        text = (
            f"contradicts: the rate falls as t^{ex:.3g} [{ci[0]:.3g}, {ci[1]:.3g}], slower "
            f"than {name}'s T^{pex:.3g} over t in [{ts[0]:g}, {ts[-1]:g}]"
        )
    else:
        code = "too_pessimistic"
        text = (
            f"{name} too pessimistic: the rate falls as t^{ex:.3g} [{ci[0]:.3g}, "
            f"{ci[1]:.3g}], faster than {name}'s T^{pex:.3g}"
        )
    return Dependence("T", name, ex, ci, pex, None, None, None, code, text)


def write_sweep(report: SweepReport, out: Path) -> dict[str, Path]:
    """``sweep.csv``, ``sweep.json`` and ``sweep.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in report.rows for k in r))
    paths = {
        "csv": write_csv(out / "sweep.csv", report.rows, tuple(fields)),
        "json": atomic_write_json(out / "sweep.json", asdict(report)),
        "png": _plot(report, out / "sweep.png"),
    }
    return paths


def _plot(report: SweepReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec, rows = report.spec, report.rows
    v = [r[spec.axis] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    rate = np.array([r["rate"] for r in rows])
    err = np.array([[r["rate"] - r["rate_lo"], r["rate_hi"] - r["rate"]] for r in rows]).T
    a.errorbar(v, rate, yerr=err, marker="o", capsize=3, label="measured (mean, CI over seeds)")
    base = rate[0] + np.array([r["predicted_change"] for r in rows])
    a.plot(v, base, "s--", label="measured at the first value + the bound's change")
    a.set_xscale("log", base=2)
    a.set_xlabel(spec.axis)
    a.set_ylabel("(1/T) sum_t ||grad f(xbar_t)||^2")
    dep = report.dependences[0]
    a.set_title(f"{spec.axis}: {dep.verdict}", fontsize=9)
    a.legend(fontsize=7)
    for key, runs in report.curves.items():
        b.plot(
            runs[0].running_steps, np.mean([c.running for c in runs], 0), label=f"{spec.axis}={key}"
        )
    b.set_xlabel("t (steps)")
    b.set_ylabel("running average (1/t) sum ||grad f||^2, mean over seeds")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
