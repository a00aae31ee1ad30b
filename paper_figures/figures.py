"""The figures: one function per figure, each writing PNG + PDF and the data behind it.

Every function takes already-loaded inputs (:class:`paper_figures.runs.RunData`,
:class:`paper_figures.analysis.CostSetup`, a verification report directory) and an output
directory, and returns a :class:`FigureOutput` (files written, a summary for the manifest).
The data files hold exactly what is drawn (CSV, one row per point or bar; JSON for
metadata such as targets, assumptions and sources), so a reader can re-plot or check
every number.

Figures (names as in ``palsgd figures --only``):

1. ``loss_vs_time``: evaluation loss of the anchor against optimizer steps, measured
   wall-clock and modelled wall-clock, for DDP, Local SGD, DiLoCo and PALSGD, one row per task.
2. ``time_to_target``: time to the target loss (measured and modelled) per method, the
   reduction against DDP, and the paper's three reported reductions alongside.
3. ``gain_attribution``: the modelled time saving of each local method over DDP, split into
   compute skipped on pull steps, communication saved, fewer/more steps and the extra costs
   (:func:`empirical.costmodel.attribute_gain`), for these runs and, at paper scale, for the
   paper's three settings (:func:`empirical.costmodel.paper_scale_prediction`).
4. ``paper_scale``: predicted PALSGD-vs-DDP reduction of the three headline settings on
   each named cluster profile next to the paper's 18.4% / 24.4% / 21.1%.
5. ``sensitivity``: final loss and time to target against ``H`` and against ``p``.
6. ``ablation``: each reference-faithful switch of the authors' code on its own, and all
   together, against PALSGD as described.
7. ``theory``: from a ``palsgd verify`` report: bound vs measured, rates in ``T``,
   consensus error vs ``H``, exact quadratic curves vs Monte Carlo.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from paper_figures import style
from paper_figures.analysis import (
    PAPER_LABELS,
    PAPER_REDUCTIONS,
    PAPER_SOURCE,
    PARAM_BYTES,
    CostSetup,
    Curve,
    choose_target,
    cost_kwargs,
    curve_of,
    reduction,
    time_to_target,
    truncate_records,
)
from theory.validation import UserInputError

__all__ = [
    "FigureOutput",
    "LOSS_COLUMNS",
    "TTT_COLUMNS",
    "ATTRIBUTION_COLUMNS",
    "PAPER_SCALE_COLUMNS",
    "SENSITIVITY_COLUMNS",
    "ABLATION_COLUMNS",
    "loss_vs_time",
    "time_to_target_figure",
    "gain_attribution",
    "paper_scale",
    "paper_predictions",
    "sensitivity",
    "ablation",
    "theory",
]

ORDER = ("ddp", "local_sgd", "diloco", "palsgd")
CLOCKS = ("step", "measured", "modelled")

LOSS_COLUMNS = ("task", "algorithm", "step", "eval_loss", "measured_s", "modelled_s")
TTT_COLUMNS = (
    "source",
    "task",
    "algorithm",
    "clock",
    "target_loss",
    "time_to_target",
    "step_at_target",
    "reduction_vs_ddp",
)
ATTRIBUTION_COLUMNS = (
    "scenario",
    "kind",
    "task",
    "method",
    "profile",
    "part",
    "seconds",
    "fraction_of_baseline",
    "total_saving_s",
    "time_baseline_s",
    "time_reduction",
    "measured_time_reduction",
    "paper_reduction",
)
PAPER_SCALE_COLUMNS = (
    "setting",
    "profile",
    "K",
    "gpu",
    "method",
    "coins",
    "predicted_reduction",
    "paper_reduction",
    "grad_step_s",
    "ddp_exposed_comm_s",
    "sync_allreduce_s",
)
SENSITIVITY_COLUMNS = (
    "parameter",
    "value",
    "is_default",
    "final_loss",
    "min_loss",
    "target_loss",
    "ttt_measured_s",
    "ttt_modelled_s",
    "step_at_target",
    "reached",
    "grad_steps",
    "pull_steps",
    "syncs",
    "status",
)
ABLATION_COLUMNS = (
    "variant",
    "switch",
    "label",
    "final_loss",
    "min_loss",
    "delta_final_loss_vs_base",
    "target_loss",
    "ttt_measured_s",
    "ttt_modelled_s",
    "step_at_target",
    "tokens",
    "grad_steps",
    "pull_steps",
    "allreduce_calls",
    "bytes_communicated",
    "status",
)


@dataclass
class FigureOutput:
    """What a figure function wrote (file names relative to the output directory)."""

    name: str
    files: list[str] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- helpers


def _clean(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        v = float(v)
        return v if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, Mapping):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if _clean(r.get(k)) is None else _clean(r.get(k))) for k in columns})
    return path.name


def _write_json(path: Path, obj: Any) -> str:
    path.write_text(json.dumps(_clean(obj), indent=1, allow_nan=False, default=str))
    return path.name


def _task_kind(runs: Mapping[str, Any]) -> str:
    for r in runs.values():
        model = str(r.config.get("model", ""))
        return "lm" if model.startswith("gptneo") else "image"
    return "lm"


def _usable(run: Any) -> bool:
    return run is not None and run.status in ("finished", "diverged") and bool(run.eval)


def _curves(runs: Mapping[str, Any], cost: CostSetup | None) -> dict[str, Curve]:
    return {alg: curve_of(run, cost) for alg, run in runs.items() if _usable(run)}


def _ylim_top(curves: Mapping[str, Curve]) -> float | None:
    """Upper y limit that keeps the initial loss (step 0) from flattening the curves."""
    seconds = [c.loss[1] for c in curves.values() if len(c.loss) > 1 and np.isfinite(c.loss[1])]
    firsts = [c.loss[0] for c in curves.values() if len(c.loss) and np.isfinite(c.loss[0])]
    if not seconds or not firsts:
        return None
    top = max(seconds)
    return (
        top + 0.15 * (top - min(c.min_loss for c in curves.values())) if max(firsts) > top else None
    )


def _model_error(curve: Curve) -> float:
    m, w = curve.modelled_s[-1], curve.measured_s[-1]
    return (m - w) / w if np.isfinite(m) and np.isfinite(w) and w > 0 else math.nan


# ----------------------------------------------------------------------------- figure 1


def loss_vs_time(
    main: Mapping[str, Mapping[str, Any]],
    cost: CostSetup | None,
    out: str | Path,
    task_labels: Mapping[str, str] | None = None,
) -> FigureOutput:
    """Figure 1: loss against steps, measured and modelled wall-clock (rows: tasks)."""
    out = Path(out)
    labels = dict(task_labels or {})
    res = FigureOutput("loss_vs_time")
    tasks = [t for t in main if any(_usable(r) for r in main[t].values())]
    if not tasks:
        raise UserInputError("loss_vs_time: no finished runs of the compared methods")
    fig, axes = style.figure(len(tasks), 3, width=4.0, height=3.0)
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "clocks": {k: style.CLOCK_LABELS[k] for k in CLOCKS},
        "target_rule": "max over methods of each method's lowest eval loss",
        "cost_model": _cost_meta(cost),
        "tasks": {},
    }
    handles = {}
    for i, task in enumerate(tasks):
        curves = _curves(main[task], cost)
        target = choose_target(curves)
        kind = _task_kind(main[task])
        top = _ylim_top(curves)
        for j, clock in enumerate(CLOCKS):
            ax = axes[i][j]
            drawn = False
            for alg in ORDER:
                if alg not in curves:
                    continue
                c = curves[alg]
                x = c.clock(clock)
                if not np.any(np.isfinite(x)):
                    continue
                (h,) = ax.plot(
                    x,
                    c.loss,
                    color=style.color(alg),
                    lw=1.6,
                    marker="o",
                    ms=2.5,
                    label=style.label(alg),
                )
                handles[alg] = h
                drawn = True
            if not drawn:
                style.empty_panel(
                    ax, "no cost model calibrated" if clock == "modelled" else "no data"
                )
                continue
            if np.isfinite(target):
                ax.axhline(target, color="#777777", ls=":", lw=1)
                ax.text(
                    0.02,
                    target,
                    f"target {target:.3f}",
                    transform=ax.get_yaxis_transform(),
                    ha="left",
                    va="top",
                    fontsize=7,
                    color="#555555",
                )
            if top is not None:
                ax.set_ylim(top=top)
            ax.set_xlabel(style.CLOCK_LABELS[clock])
            if j == 0:
                ax.set_ylabel(style.loss_label(kind))
            ax.set_title(
                f"{labels.get(task, task)}: "
                + {"step": "per step", "measured": "measured", "modelled": "modelled"}[clock],
                fontsize=9,
            )
        tmeta: dict[str, Any] = {"label": labels.get(task, task), "target_loss": target, "runs": {}}
        for alg, c in curves.items():
            run = main[task][alg]
            tmeta["runs"][alg] = {
                "directory": run.directory,
                "status": run.status,
                "final_loss": c.final_loss,
                "min_loss": c.min_loss,
                "measured_total_s": float(c.measured_s[-1]),
                "modelled_total_s": float(c.modelled_s[-1]),
                "model_error": _model_error(c),
                "world_size": run.world_size,
            }
            for k in range(len(c.step)):
                rows.append(
                    {
                        "task": task,
                        "algorithm": alg,
                        "step": int(c.step[k]),
                        "eval_loss": c.loss[k],
                        "measured_s": c.measured_s[k],
                        "modelled_s": c.modelled_s[k],
                    }
                )
        missing = [a for a in ORDER if a not in curves]
        if missing:
            tmeta["missing"] = missing
            res.notes.append(f"{task}: no finished run of {', '.join(missing)}")
        meta["tasks"][task] = tmeta
    order = [a for a in ORDER if a in handles]
    style.legend_below(fig, [handles[a] for a in order], [style.label(a) for a in order])
    fig.suptitle(
        "Evaluation loss against optimizer steps, measured wall-clock and modelled "
        "wall-clock (cost model)",
        fontsize=10,
        y=1.01,
    )
    if cost is not None:
        style.footnote(fig, f"Cost model: {cost.source}.", y=-0.045)
    fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    res.data_files.append(_write_csv(out / "loss_vs_time.csv", rows, LOSS_COLUMNS))
    res.data_files.append(_write_json(out / "loss_vs_time.json", meta))
    res.summary = {
        t: {
            "target_loss": m["target_loss"],
            "model_error": {a: r["model_error"] for a, r in m["runs"].items()},
        }
        for t, m in meta["tasks"].items()
    }
    return res


def _cost_meta(cost: CostSetup | None) -> dict[str, Any] | None:
    if cost is None:
        return None
    return {
        "source": cost.source,
        "link": cost.link.to_dict() if cost.link is not None else None,
        "compute": {k: v.to_dict() for k, v in cost.compute.items()},
        "details": dict(cost.details),
    }


# ----------------------------------------------------------------------------- figure 2


def _ttt_rows(task: str, curves: Mapping[str, Curve], target: float) -> list[dict[str, Any]]:
    rows = []
    for clock in ("measured", "modelled", "step"):
        base = time_to_target(curves["ddp"], target, clock)[0] if "ddp" in curves else math.nan
        for alg in ORDER:
            if alg not in curves:
                continue
            t, s = time_to_target(curves[alg], target, clock)
            rows.append(
                {
                    "source": "this run",
                    "task": task,
                    "algorithm": alg,
                    "clock": clock,
                    "target_loss": target,
                    "time_to_target": t,
                    "step_at_target": s,
                    "reduction_vs_ddp": reduction(base, t),
                }
            )
    return rows


def _paper_rows() -> list[dict[str, Any]]:
    return [
        {
            "source": "paper",
            "task": k,
            "algorithm": "palsgd",
            "clock": "paper",
            "target_loss": None,
            "time_to_target": None,
            "step_at_target": None,
            "reduction_vs_ddp": v,
        }
        for k, v in PAPER_REDUCTIONS.items()
    ]


def _faster(red: float) -> str:
    """``0.21 -> '21% faster'``, ``-0.07 -> '7% slower'``."""
    if not np.isfinite(red):
        return ""
    return f"{100 * red:.0f}% faster" if red >= 0 else f"{-100 * red:.0f}% slower"


def time_to_target_figure(
    main: Mapping[str, Mapping[str, Any]],
    cost: CostSetup | None,
    out: str | Path,
    task_labels: Mapping[str, str] | None = None,
    short_labels: Mapping[str, str] | None = None,
) -> FigureOutput:
    """Figure 2: time to the target loss per method (measured, modelled), reductions vs DDP,
    and the paper's three reported PALSGD reductions."""
    from matplotlib.patches import Patch

    out = Path(out)
    labels = dict(task_labels or {})
    short = dict(short_labels or {})
    res = FigureOutput("time_to_target")
    tasks = [t for t in main if any(_usable(r) for r in main[t].values())]
    if not tasks:
        raise UserInputError("time_to_target: no finished runs of the compared methods")
    fig = style.plt.figure(figsize=(max(4.2 * len(tasks), 8.4), 7.0))
    gs = fig.add_gridspec(2, len(tasks), height_ratios=[1.25, 1.0], hspace=0.42, wspace=0.3)
    rows: list[dict[str, Any]] = []
    targets = {}
    for i, task in enumerate(tasks):
        ax = fig.add_subplot(gs[0, i])
        style.apply(ax)
        curves = _curves(main[task], cost)
        target = choose_target(curves)
        targets[task] = target
        trows = _ttt_rows(task, curves, target)
        rows += trows
        algs = [a for a in ORDER if a in curves]
        width = 0.4
        top = max(
            [
                r["time_to_target"]
                for r in trows
                if r["clock"] != "step" and np.isfinite(r["time_to_target"])
            ]
            + [1e-9]
        )
        for k, alg in enumerate(algs):
            for off, clock, hatch in (
                (-width / 2, "measured", None),
                (width / 2, "modelled", "//"),
            ):
                r = next(x for x in trows if x["algorithm"] == alg and x["clock"] == clock)
                t = r["time_to_target"]
                if not np.isfinite(t):
                    ax.text(
                        k + off,
                        0.02 * top,
                        "not reached",
                        ha="center",
                        va="bottom",
                        fontsize=6.5,
                        rotation=90,
                    )
                    continue
                ax.bar(
                    k + off,
                    t,
                    width,
                    color=style.color(alg),
                    alpha=0.95 if hatch is None else 0.5,
                    hatch=hatch,
                    edgecolor=style.color(alg),
                )
                red = r["reduction_vs_ddp"]
                if alg != "ddp" and np.isfinite(red):
                    ax.text(
                        k + off,
                        t * 0.97,
                        _faster(red),
                        ha="center",
                        va="top",
                        rotation=90,
                        fontsize=6.5,
                        color="white" if hatch is None else "black",
                    )
        ax.set_xticks(range(len(algs)), [style.label(a) for a in algs], fontsize=8)
        ax.set_ylabel("time to target loss (s)")
        ax.set_title(f"{labels.get(task, task)}\ntarget eval loss {target:.3f}", fontsize=9)
    # the paper's numbers alongside: reductions of PALSGD against DDP
    ax = fig.add_subplot(gs[1, :])
    style.apply(ax)
    bars: list[tuple[str, float, str, str | None]] = []
    for k, v in PAPER_REDUCTIONS.items():
        bars.append((f"paper: {PAPER_LABELS[k]}", v, style.PAPER_COLOR, None))
    for task in tasks:
        for clock, hatch in (("measured", None), ("modelled", "//")):
            r = next(
                (
                    x
                    for x in rows
                    if x["task"] == task and x["algorithm"] == "palsgd" and x["clock"] == clock
                ),
                None,
            )
            if r is not None:
                bars.append(
                    (
                        f"these runs: {short.get(task, task)}, {clock}",
                        r["reduction_vs_ddp"],
                        style.color("palsgd"),
                        hatch,
                    )
                )
    ys = np.arange(len(bars))[::-1]
    for y, (_name, v, col, hatch) in zip(ys, bars, strict=True):
        if np.isfinite(v):
            ax.barh(
                y,
                100 * v,
                color=col,
                alpha=0.95 if hatch is None else 0.5,
                hatch=hatch,
                edgecolor=col,
                height=0.7,
            )
            ax.text(
                100 * v,
                y,
                f" {100 * v:.1f}% " if v >= 0 else f" \u2212{-100 * v:.1f}% ",
                va="center",
                ha="left" if v >= 0 else "right",
                fontsize=7.5,
            )
        else:
            ax.text(0, y, " n/a (target not reached)", va="center", fontsize=7.5)
    ax.axvline(0, color="#333333", lw=0.8)
    ax.set_yticks(ys, [b[0] for b in bars], fontsize=8)
    ax.set_xlabel("PALSGD time-to-target reduction against DDP (%; > 0: PALSGD is faster)")
    ax.set_title("PALSGD vs DDP: the paper's reported reductions and these runs", fontsize=9)
    vals = [100 * b[1] for b in bars if np.isfinite(b[1])]
    lo, hi = min([0.0] + vals), max([0.0] + vals)
    ax.set_xlim(lo - 0.15 * (hi - lo) - 1, hi + 0.45 * (hi - lo) + 3)
    rows += _paper_rows()
    ax.legend(
        [
            Patch(facecolor="#999999"),
            Patch(facecolor="#999999", alpha=0.5, hatch="//"),
            Patch(facecolor=style.PAPER_COLOR),
        ],
        ["measured wall-clock", "modelled wall-clock (cost model)", "reported in the paper"],
        loc="upper right",
        frameon=True,
        framealpha=0.9,
        fontsize=7.5,
    )
    style.footnote(
        fig, f"Target: the lowest eval loss every method reaches. Paper: {PAPER_SOURCE}."
    )
    fig.suptitle(
        "Time to the target loss (bars: measured, hatched: modelled; labels: against DDP)",
        fontsize=10,
        y=0.96,
    )
    res.files += style.save(fig, out, res.name)
    res.data_files.append(_write_csv(out / "time_to_target.csv", rows, TTT_COLUMNS))
    res.data_files.append(
        _write_json(
            out / "time_to_target.json",
            {
                "targets": targets,
                "target_rule": "max over methods of each method's lowest eval loss",
                "time_to_target_rule": "clock value at the first evaluation with loss <= target",
                "reduction": "(T_ddp - T_method) / T_ddp",
                "paper": PAPER_REDUCTIONS,
                "paper_source": PAPER_SOURCE,
                "cost_model": _cost_meta(cost),
            },
        )
    )
    res.summary = {
        "targets": targets,
        "palsgd_reduction_vs_ddp": {
            f"{r['task']}/{r['clock']}": r["reduction_vs_ddp"]
            for r in rows
            if r["algorithm"] == "palsgd" and r["source"] == "this run" and r["clock"] != "step"
        },
        "paper": PAPER_REDUCTIONS,
    }
    return res


# ----------------------------------------------------------------------------- figure 3


def paper_predictions(
    profiles: Sequence[str] | None = None,
    *,
    method: str = "palsgd",
    coins: Sequence[str] = ("shared", "independent"),
) -> list[dict[str, Any]]:
    """:func:`empirical.costmodel.paper_scale_prediction` for the three headline settings on
    each named static cluster profile (default: all of them) and each coin mode
    (``"shared"``: all workers pull on the same steps, as the authors' code does;
    ``"independent"``: one coin per worker, as the algorithm is described, so a sync waits
    for the worker with the most gradient steps in the round)."""
    from empirical import costmodel

    names = list(profiles) if profiles else list(costmodel.CLUSTER_PROFILES.static())
    out = []
    for setting in PAPER_REDUCTIONS:
        for prof in names:
            for c in coins:
                out.append(costmodel.paper_scale_prediction(setting, prof, method=method, coins=c))
    return out


def paper_scale(
    out: str | Path, predictions: Sequence[Mapping[str, Any]] | None = None
) -> FigureOutput:
    """Figure: predicted PALSGD-vs-DDP time-to-target reduction of the paper's three
    settings on each cluster profile (bars: shared coins as in the authors' code; hatched:
    independent coins), next to the reduction the paper reports."""
    from matplotlib.patches import Patch

    out = Path(out)
    res = FigureOutput("paper_scale")
    preds = list(predictions) if predictions is not None else paper_predictions()
    if not preds:
        raise UserInputError("paper_scale: no predictions")
    settings = list(dict.fromkeys(p["setting"] for p in preds))
    profiles = list(dict.fromkeys(p["profile"] for p in preds))
    coin_modes = list(dict.fromkeys(p["inputs"]["coins"] for p in preds))
    fig, axes = style.figure(1, 1, width=9.0, height=4.0)
    ax = axes[0][0]
    slots = [(prof, c) for prof in profiles for c in coin_modes]
    n = len(slots) + 1
    width = 0.84 / n
    greens = ["#74c476", "#31a354", "#006d2c", "#00441b", "#c7e9c0"]
    rows = []
    for i, setting in enumerate(settings):
        for j, (prof, coins) in enumerate(slots):
            p = next(
                (
                    x
                    for x in preds
                    if x["setting"] == setting
                    and x["profile"] == prof
                    and x["inputs"]["coins"] == coins
                ),
                None,
            )
            if p is None:
                continue
            v = p["predicted_time_reduction"]
            x = i + (j - (n - 1) / 2) * width
            col = greens[profiles.index(prof) % len(greens)]
            shared = coins == "shared"
            ax.bar(
                x,
                100 * v,
                width,
                color=col,
                alpha=1.0 if shared else 0.45,
                hatch=None if shared else "//",
                edgecolor=col,
            )
            ax.text(
                x,
                100 * v if v >= 0 else 0,
                f"{100 * v:.0f}",
                ha="center",
                va="bottom",
                fontsize=6.5,
            )
            rows.append(
                {
                    "setting": setting,
                    "profile": prof,
                    "K": p["K"],
                    "gpu": p["gpu"],
                    "method": p["method"],
                    "coins": coins,
                    "predicted_reduction": v,
                    "paper_reduction": p["paper_reported_time_reduction"],
                    **{
                        k: p["per_step"][k]
                        for k in ("grad_step_s", "ddp_exposed_comm_s", "sync_allreduce_s")
                    },
                }
            )
        x = i + (n - 1 - (n - 1) / 2) * width
        v = PAPER_REDUCTIONS[setting]
        ax.bar(x, 100 * v, width, color=style.PAPER_COLOR)
        ax.text(
            x,
            100 * v,
            f"{100 * v:.1f}",
            ha="center",
            va="bottom",
            fontsize=7,
            color=style.PAPER_COLOR,
            fontweight="bold",
        )
    ax.set_xticks(
        range(len(settings)), [PAPER_LABELS.get(s, s).replace(" / ", "\n") for s in settings]
    )
    ax.set_ylabel("PALSGD time-to-target reduction\nagainst DDP (%)")
    ax.axhline(0, color="#333333", lw=0.8)
    ax.set_title(
        "Cost-model prediction at the paper's scale vs the paper's reported reductions", fontsize=10
    )
    handles, names = [], []
    for prof in profiles:
        p = next(x for x in preds if x["profile"] == prof)
        col = greens[profiles.index(prof) % len(greens)]
        handles.append(Patch(color=col))
        names.append(f"predicted, {prof} (K = {p['K']}, {p['gpu']})")
    if "independent" in coin_modes:
        handles.append(Patch(facecolor="#bbbbbb", hatch="//", alpha=0.6))
        names.append("hatched: independent coins (wait for the slowest worker at syncs)")
    if "shared" in coin_modes:
        handles.append(Patch(facecolor="#888888"))
        names.append("solid: shared coins (the authors' code)")
    handles.append(Patch(color=style.PAPER_COLOR))
    names.append("reported in the paper")
    ax.legend(
        handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=7.5
    )
    p0 = preds[0]
    ratio = p0["inputs"].get("step_ratio", 1.0)
    style.footnote(
        fig,
        "Assumptions (all listed in paper_scale.json): PALSGD needs "
        + ("as many steps as DDP" if ratio == 1.0 else f"{ratio:g} x DDP's steps")
        + " to reach the target; per-step compute from FLOP estimates at an assumed "
        "GPU utilisation; communication from the cluster profile's link. "
        f"Paper: {PAPER_SOURCE}.",
    )
    fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    res.data_files.append(_write_csv(out / "paper_scale.csv", rows, PAPER_SCALE_COLUMNS))
    res.data_files.append(
        _write_json(
            out / "paper_scale.json",
            {"paper": PAPER_REDUCTIONS, "paper_source": PAPER_SOURCE, "predictions": preds},
        )
    )
    res.summary = {
        f"{r['setting']}@{r['profile']}/{r['coins']}": r["predicted_reduction"] for r in rows
    }
    return res


# ----------------------------------------------------------------------------- figure 4


def _attribution(
    task: str, ddp: Any, method: Any, curves: Mapping[str, Curve], target: float, cost: CostSetup
) -> dict[str, Any] | None:
    from empirical import costmodel

    _, s_b = time_to_target(curves["ddp"], target, "step")
    _, s_m = time_to_target(curves[method.algorithm], target, "step")
    if not (np.isfinite(s_b) and np.isfinite(s_m)) or s_b <= 0 or s_m <= 0:
        return None
    tb, tm = truncate_records(ddp.train, s_b), truncate_records(method.train, s_m)
    if not tb or not tm or method.parameters is None:
        return None
    kw = cost_kwargs(method)
    name = kw.pop("algorithm")
    K = method.world_size
    link = (
        cost.link
        if (cost.link is not None and K > 1)
        else costmodel.LinkProfile("none", 0.0, 1.0, source="K = 1")
    )
    return costmodel.attribute_gain(
        tb,
        tm,
        compute=cost.compute[task],
        link=link,
        K=K,
        param_bytes=method.parameters * PARAM_BYTES,
        algorithm=name,
        **kw,
    )


def gain_attribution(
    main: Mapping[str, Mapping[str, Any]],
    cost: CostSetup | None,
    out: str | Path,
    task_labels: Mapping[str, str] | None = None,
    predictions: Sequence[Mapping[str, Any]] | None = None,
) -> FigureOutput:
    """Figure: where the modelled time saving over DDP comes from.

    Left: for these runs, each local method against DDP at the target loss (each run's
    trace up to its first evaluation at or below the target). Right: the paper's three
    settings on one cluster profile (paper-scale prediction, equal step counts assumed).
    Bars are the parts of :func:`empirical.costmodel.attribute_gain` as a percentage of
    DDP's modelled time; positive parts save time, negative parts cost time; the diamond is
    the total (the parts add up to it).
    """
    out = Path(out)
    labels = dict(task_labels or {})
    res = FigureOutput("gain_attribution")
    scenarios: list[tuple[str, str, str, str, str, dict[str, Any]]] = []
    if cost is not None:
        for task, runs in main.items():
            curves = _curves(runs, cost)
            if "ddp" not in curves or task not in cost.compute:
                continue
            target = choose_target(curves)
            for alg in ORDER[1:]:
                if alg not in curves:
                    continue
                g = _attribution(task, runs["ddp"], runs[alg], curves, target, cost)
                if g is None:
                    res.notes.append(f"{task}/{alg}: target not reached, no attribution")
                    continue
                scenarios.append(
                    (
                        f"{labels.get(task, task)}: {style.label(alg)} vs DDP",
                        "this run (modelled)",
                        task,
                        alg,
                        "calibrated",
                        g,
                    )
                )
    preds = list(predictions) if predictions is not None else []
    for p in preds:
        scenarios.append(
            (
                f"{PAPER_LABELS.get(p['setting'], p['setting'])}, {p['inputs']['coins']} coins",
                "paper-scale prediction",
                p["setting"],
                p["method"],
                p["profile"],
                dict(p["attribution"], paper_reduction=p["paper_reported_time_reduction"]),
            )
        )
    if not scenarios:
        raise UserInputError(
            "gain_attribution: nothing to attribute (no calibrated cost model "
            "and no paper-scale predictions)"
        )
    kinds = list(dict.fromkeys(s[1] for s in scenarios))
    fig, axes = style.figure(
        1,
        len(kinds),
        width=5.2,
        height=0.45 * max(sum(1 for s in scenarios if s[1] == k) for k in kinds) + 1.6,
    )
    rows = []
    parts_order = list(style.PART_COLORS)
    for ai, kind in enumerate(kinds):
        ax = axes[0][ai]
        sc = [s for s in scenarios if s[1] == kind]
        ys = np.arange(len(sc))[::-1]
        for y, (title, _, task, alg, prof, g) in zip(ys, sc, strict=True):
            base = g["time_baseline_s"]
            pos, neg = 0.0, 0.0
            for part in parts_order:
                v = g["parts_s"].get(part, 0.0)
                frac = v / base if base > 0 else 0.0
                left = pos if frac >= 0 else neg
                ax.barh(
                    y,
                    100 * frac,
                    left=100 * left,
                    color=style.PART_COLORS[part],
                    height=0.6,
                    edgecolor="white",
                    lw=0.5,
                )
                if frac >= 0:
                    pos += frac
                else:
                    neg += frac
                rows.append(
                    {
                        "scenario": title,
                        "kind": kind,
                        "task": task,
                        "method": alg,
                        "profile": prof,
                        "part": part,
                        "seconds": v,
                        "fraction_of_baseline": frac,
                        "total_saving_s": g["total_saving_s"],
                        "time_baseline_s": base,
                        "time_reduction": g["time_reduction"],
                        "measured_time_reduction": g.get("measured", {}).get("time_reduction"),
                        "paper_reduction": g.get("paper_reduction"),
                    }
                )
            ax.plot(100 * g["time_reduction"], y, marker="D", color="black", ms=5, zorder=5)
            if g.get("paper_reduction") is not None:
                ax.plot(
                    100 * g["paper_reduction"],
                    y,
                    marker="*",
                    color=style.PAPER_COLOR,
                    ms=9,
                    zorder=6,
                )
            mt = g.get("measured", {}).get("time_reduction")
            if mt is not None and np.isfinite(mt):
                ax.plot(
                    100 * mt,
                    y,
                    marker="s",
                    color=style.MEASURED_COLOR,
                    ms=4.5,
                    zorder=6,
                    mfc="none",
                )
        ax.axvline(0, color="#333333", lw=0.8)
        ax.set_yticks(ys, [s[0] for s in sc], fontsize=7)
        ax.set_xlabel(
            "share of DDP's modelled time to target (%)\n(> 0 saves time, < 0 costs time)"
        )
        profs = sorted({s[4] for s in sc if s[4] != "calibrated"})
        ax.set_title(kind + (f" on {', '.join(profs)}" if profs else ""), fontsize=9)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(color=style.PART_COLORS[p]) for p in parts_order]
    names = [style.PART_LABELS[p] for p in parts_order]
    handles += [
        Line2D([], [], marker="D", color="black", ls=""),
        Line2D([], [], marker="s", color=style.MEASURED_COLOR, mfc="none", ls=""),
        Line2D([], [], marker="*", color=style.PAPER_COLOR, ms=9, ls=""),
    ]
    names += ["total modelled saving", "measured saving", "paper's reported reduction"]
    style.legend_below(fig, handles, names, ncol=3)
    fig.suptitle("Attribution of the time saving over DDP (cost model)", fontsize=10, y=1.02)
    fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    res.data_files.append(_write_csv(out / "gain_attribution.csv", rows, ATTRIBUTION_COLUMNS))
    res.data_files.append(
        _write_json(
            out / "gain_attribution.json",
            {
                "scenarios": [
                    {
                        "scenario": s[0],
                        "kind": s[1],
                        "task": s[2],
                        "method": s[3],
                        "profile": s[4],
                        "attribution": s[5],
                    }
                    for s in scenarios
                ],
                "cost_model": _cost_meta(cost),
                "paper_source": PAPER_SOURCE,
            },
        )
    )
    res.summary = {
        s[0]: {
            "time_reduction": s[5]["time_reduction"],
            "parts_fraction": s[5].get("parts_fraction_of_baseline"),
        }
        for s in scenarios
    }
    return res


# ----------------------------------------------------------------------------- figure 5


def _point_row(run: Any, curve: Curve | None, target: float) -> dict[str, Any]:
    tot = run.summary.get("totals", {}) if run is not None else {}
    if curve is None:
        return {"status": run.status if run is not None else "missing"}
    tm, st = time_to_target(curve, target, "measured")
    tmod, _ = time_to_target(curve, target, "modelled")
    return {
        "final_loss": curve.final_loss,
        "min_loss": curve.min_loss,
        "target_loss": target,
        "ttt_measured_s": tm,
        "ttt_modelled_s": tmod,
        "step_at_target": st,
        "reached": bool(np.isfinite(st)),
        "grad_steps": tot.get("grad_steps"),
        "pull_steps": tot.get("pull_steps"),
        "syncs": tot.get("syncs"),
        "tokens": tot.get("tokens"),
        "allreduce_calls": tot.get("allreduce_calls"),
        "bytes_communicated": tot.get("bytes_communicated"),
        "status": run.status,
    }


def sensitivity(
    main_runs: Mapping[str, Any],
    sweeps: Mapping[str, Sequence[Any]],
    cost: CostSetup | None,
    out: str | Path,
    *,
    defaults: Mapping[str, Any],
    task_label: str = "",
) -> FigureOutput:
    """Figure: PALSGD's final loss and time to target against ``H`` and against ``p``.

    ``sweeps``: ``{"H": runs, "p": runs}`` with ``run.x`` the value; the target of a row
    is the lowest loss every run of that sweep reaches (the rule of ``time_to_target``
    applied to the sweep); ``main_runs``: the four methods on the same task (DDP's final
    loss and time to that target are drawn for reference); ``defaults``: the task's own
    ``H`` and ``p`` (marked).
    """
    out = Path(out)
    res = FigureOutput("sensitivity")
    main_curves = _curves(main_runs, cost)
    targets: dict[str, float] = {}
    params = [k for k in ("H", "p") if sweeps.get(k)]
    if not params:
        raise UserInputError("sensitivity: no sweep runs")
    fig, axes = style.figure(len(params), 2, width=4.0, height=3.0)
    rows = []
    kind = _task_kind(main_runs) if main_runs else "lm"
    for i, key in enumerate(params):
        pts = sorted(sweeps[key], key=lambda r: float(r.x))
        pcurves = {str(r.x): curve_of(r, cost) for r in pts if _usable(r)}
        target = choose_target(pcurves)
        targets[key] = target
        xs, finals, tms, tmods = [], [], [], []
        for run in pts:
            c = pcurves.get(str(run.x))
            row = {
                "parameter": key,
                "value": float(run.x),
                "is_default": float(run.x) == float(defaults.get(key, math.nan)),
                **_point_row(run, c, target),
            }
            rows.append(row)
            xs.append(float(run.x))
            finals.append(row.get("final_loss", math.nan))
            tms.append(row.get("ttt_measured_s", math.nan))
            tmods.append(row.get("ttt_modelled_s", math.nan))
        xs_a = np.asarray(xs)
        ax = axes[i][0]
        ax.plot(xs_a, finals, color=style.color("palsgd"), marker="o", lw=1.6, label="PALSGD")
        if "ddp" in main_curves:
            ax.axhline(
                main_curves["ddp"].final_loss, color=style.color("ddp"), ls="--", lw=1, label="DDP"
            )
        ax.set_xlabel(_param_label(key))
        ax.set_ylabel(f"final {style.loss_label(kind)}")
        ax.legend(frameon=False)
        ax = axes[i][1]
        for vals, col, mk, lab in (
            (tms, style.MEASURED_COLOR, "s", "measured"),
            (tmods, style.MODEL_COLOR, "o", "modelled"),
        ):
            v = np.asarray(vals, dtype=float)
            ax.plot(xs_a, v, color=col, marker=mk, lw=1.4, label=f"PALSGD, {lab}")
        finite = [v for v in tms + tmods if np.isfinite(v)]
        ymax = max(finite) if finite else 1.0
        for x, a, b in zip(xs, tms, tmods, strict=True):
            if not (np.isfinite(a) or np.isfinite(b)):
                ax.plot([x], [ymax * 1.08], marker="x", color="#aa0000", ms=7)
                ax.annotate(
                    "not reached",
                    (x, ymax * 1.08),
                    fontsize=6.5,
                    ha="center",
                    va="bottom",
                    xytext=(0, 3),
                    textcoords="offset points",
                )
        if "ddp" in main_curves:
            for clock, col in (("measured", style.MEASURED_COLOR), ("modelled", style.MODEL_COLOR)):
                t, _ = time_to_target(main_curves["ddp"], target, clock)
                if np.isfinite(t):
                    ax.axhline(t, color=col, ls="--", lw=1, label=f"DDP, {clock}")
        ax.set_ylim(bottom=0, top=ymax * 1.25)
        ax.set_xlabel(_param_label(key))
        ax.set_ylabel(f"time to eval loss {target:.3f} (s)")
        axes[i][0].set_title(f"final loss against {key}", fontsize=9)
        ax.set_title(f"time to the lowest loss every {key} reaches", fontsize=9)
        ax.legend(frameon=False, fontsize=7)
        for a in axes[i]:
            d = defaults.get(key)
            if d is not None:
                a.axvline(float(d), color="#bbbbbb", lw=4, alpha=0.4, zorder=0)
            if key == "H":
                a.set_xscale("log", base=2)
                a.set_xticks(xs, [f"{int(x)}" for x in xs])
    fig.suptitle(
        f"Sensitivity of PALSGD to H and p ({task_label}; grey band: the default)",
        fontsize=10,
        y=1.02,
    )
    fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    res.data_files.append(_write_csv(out / "sensitivity.csv", rows, SENSITIVITY_COLUMNS))
    res.data_files.append(
        _write_json(
            out / "sensitivity.json",
            {
                "task": task_label,
                "target_loss": targets,
                "defaults": dict(defaults),
                "target_rule": "per swept parameter: max over its runs of each run's lowest eval loss",
                "cost_model": _cost_meta(cost),
            },
        )
    )
    res.summary = {
        "target_loss": targets,
        "points": {f"{r['parameter']}={r['value']:g}": r.get("final_loss") for r in rows},
    }
    return res


def _param_label(key: str) -> str:
    return {
        "H": "H (local steps between syncs, log scale)",
        "p": "p (probability of a pull step)",
    }.get(key, key)


# ----------------------------------------------------------------------------- figure 6


def ablation(
    base: Any,
    variants: Sequence[Any],
    cost: CostSetup | None,
    out: str | Path,
    *,
    task_label: str = "",
) -> FigureOutput:
    """Figure: each reference-faithful switch of the authors' code on its own, and all on.

    ``base``: PALSGD as described; ``variants``: runs with ``run.x`` the switch name
    (``"all"`` for all switches). Left: loss curves per step; middle: final loss; right:
    time to the target (modelled and measured), the lowest loss every variant reaches.
    """
    out = Path(out)
    res = FigureOutput("ablation")
    if not _usable(base):
        raise UserInputError("ablation: the PALSGD run without switches did not finish")
    base_curve = curve_of(base, cost)
    entries = [("as described", "none", base, base_curve)]
    for run in variants:
        entries.append(
            (
                run.label or str(run.x),
                str(run.x),
                run,
                curve_of(run, cost) if _usable(run) else None,
            )
        )
    target = choose_target({e[1]: e[3] for e in entries if e[3] is not None})
    fig, axes = style.figure(1, 3, width=4.2, height=3.4)
    cmap = ["#222222", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]
    kind = _task_kind({"x": base})
    ax = axes[0][0]
    for k, (lab, _, _, c) in enumerate(entries):
        if c is not None:
            ax.plot(c.step, c.loss, color=cmap[k % len(cmap)], lw=2.2 if k == 0 else 1.2, label=lab)
    top = _ylim_top({e[1]: e[3] for e in entries if e[3] is not None})
    if top is not None:
        ax.set_ylim(top=top)
    if np.isfinite(target):
        ax.axhline(target, color="#777777", ls=":", lw=1)
    ax.set_xlabel(style.CLOCK_LABELS["step"])
    ax.set_ylabel(style.loss_label(kind))
    ax.legend(frameon=False, fontsize=6.5)
    rows = []
    for lab, sw, run, c in entries:
        row = {"variant": run.name, "switch": sw, "label": lab, **_point_row(run, c, target)}
        if c is not None:
            row["delta_final_loss_vs_base"] = c.final_loss - base_curve.final_loss
        rows.append(row)
    ys = np.arange(len(entries))[::-1]
    ax = axes[0][1]
    for y, row, k in zip(ys, rows, range(len(rows)), strict=True):
        v = row.get("final_loss", math.nan)
        if np.isfinite(v):
            ax.barh(y, v, color=cmap[k % len(cmap)], height=0.6)
            ax.text(v, y, f" {v:.3f}", va="center", fontsize=7)
    ax.axvline(base_curve.final_loss, color="#222222", ls="--", lw=1)
    finals = [r.get("final_loss") for r in rows if np.isfinite(r.get("final_loss", math.nan))]
    if finals:
        lo, hi = min(finals), max(finals)
        ax.set_xlim(lo - 0.6 * (hi - lo) - 0.02, hi + 0.35 * (hi - lo) + 0.02)
    ax.set_yticks(ys, [r["label"] for r in rows], fontsize=7)
    ax.set_xlabel("final eval loss of the anchor (nats)")
    ax.set_title("final loss (dashed: as described)", fontsize=9)
    ax = axes[0][2]
    h = 0.38
    for y, row in zip(ys, rows, strict=True):
        for off, key, col, lab in (
            (h / 2, "ttt_measured_s", style.MEASURED_COLOR, "measured"),
            (-h / 2, "ttt_modelled_s", style.MODEL_COLOR, "modelled"),
        ):
            v = row.get(key, math.nan)
            if v is not None and np.isfinite(v):
                ax.barh(y + off, v, height=h, color=col, label=lab if y == ys[0] else None)
            else:
                ax.text(0, y + off, " not reached", va="center", fontsize=6.5)
    ax.set_yticks(ys, [r["label"] for r in rows], fontsize=7)
    ax.set_xlabel("time to target loss (s)")
    ax.set_title(f"time to target (eval loss {target:.3f})", fontsize=9)
    ax.legend(frameon=False, fontsize=7)
    fig.suptitle(
        f"Ablation of the reference-faithful switches of the authors' code ({task_label})",
        fontsize=10,
        y=1.02,
    )
    style.footnote(
        fig,
        "Q-numbers: the quirks of the authors' code as listed in "
        "docs/reference-implementation.md section 6 (AlgorithmConfig switches).",
    )
    fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    res.data_files.append(_write_csv(out / "ablation.csv", rows, ABLATION_COLUMNS))
    res.data_files.append(
        _write_json(
            out / "ablation.json",
            {
                "task": task_label,
                "target_loss": target,
                "base": base.name,
                "target_rule": "max over the variants of each variant's lowest eval loss",
                "switches": {r["switch"]: r["label"] for r in rows},
                "config": {
                    r.name: {
                        k: r.summary.get("algorithm", {}).get(k)
                        for k in (
                            "coins",
                            "pull_first_tensor_only",
                            "discard_batch_on_pull",
                            "outer_steps_per_sync",
                            "sync_offset",
                        )
                    }
                    for _, _, r, _ in entries
                },
                "cost_model": _cost_meta(cost),
            },
        )
    )
    res.summary = {r["switch"]: r.get("delta_final_loss_vs_base") for r in rows}
    return res


# ----------------------------------------------------------------------------- figure 7


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


_GRAD_AVG = r"$\frac{1}{T}\sum_t \mathbb{E}\Vert\nabla f(\bar{x}_t)\Vert^2$"
_PALETTE = [
    "#1b9e77",
    "#d95f02",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
    "#a6761d",
    "#666666",
    "#1f78b4",
    "#b2df8a",
]
_VERDICT_COLORS = {
    "holds": "#1a9850",
    "inconclusive": "#fdae61",
    "violated": "#d73027",
    "outside conditions": "#999999",
}


def theory(report_dir: str | Path, out: str | Path) -> FigureOutput:
    """Figure: the theory checks of a ``palsgd verify`` report directory.

    (a) measured ``(1/T) sum_t E||grad f||^2`` (mean with confidence bounds) against the
    bound (log-log, ``y = x``: points above violate); (b) measured value and bound against
    ``T`` per bound; (c) consensus error against ``H``; (d) exact expected loss gap on a
    quadratic (moment recursions, :mod:`theory.moments`) against the Monte-Carlo mean.
    """
    rd = Path(report_dir)
    if not (rd / "results.json").is_file():
        raise UserInputError(f"'{rd}' is not a palsgd verify report (no results.json)")
    out = Path(out)
    res = FigureOutput("theory")
    results = _read_csv(rd / "results.csv")
    rates = _read_csv(rd / "rates.csv")
    consensus = _read_csv(rd / "consensus.csv")
    exact = _read_csv(rd / "exact_vs_mc.csv")
    fig, axes = style.figure(2, 2, width=4.6, height=3.5)
    # (a)
    ax = axes[0][0]
    tested = [r for r in results if r.get("verdict") in _VERDICT_COLORS]
    if tested:
        for verdict, col in _VERDICT_COLORS.items():
            sel = [r for r in tested if r["verdict"] == verdict]
            if not sel:
                continue
            b = np.asarray([_num(r["bound_value"]) for r in sel])
            m = np.asarray([_num(r["measured_mean"]) for r in sel])
            lo = np.asarray([_num(r["lcb"]) for r in sel])
            hi = np.asarray([_num(r["ucb"]) for r in sel])
            err = np.vstack([np.clip(m - lo, 0, None), np.clip(hi - m, 0, None)])
            err = np.where(np.isfinite(err), err, 0.0)
            ax.errorbar(
                b, m, yerr=err, fmt="o", ms=3.5, color=col, lw=0.8, label=f"{verdict} ({len(sel)})"
            )
        vals = [_num(r[k]) for r in tested for k in ("bound_value", "measured_mean")]
        vals = [v for v in vals if np.isfinite(v) and v > 0]
        if vals:
            lo_, hi_ = min(vals) / 2, max(vals) * 2
            ax.plot([lo_, hi_], [lo_, hi_], color="#333333", lw=0.8, ls="--", label="y = x")
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel("bound value")
        ax.set_ylabel("measured " + _GRAD_AVG)
        ax.legend(frameon=False, fontsize=6.5)
    else:
        style.empty_panel(ax, "no tested configurations in the report")
    ax.set_title("(a) bound vs measured (below y = x: holds)", fontsize=9)
    # (b)
    ax = axes[0][1]
    bounds = list(dict.fromkeys(r["bound"] for r in rates))
    palette = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]
    for k, b in enumerate(bounds):
        sel = [r for r in rates if r["bound"] == b]
        T = np.asarray([_num(r["T"]) for r in sel])
        m = np.asarray([_num(r["measured_mean"]) for r in sel])
        bv = np.asarray([_num(r["bound_value"]) for r in sel])
        col = palette[k % len(palette)]
        slope = _num(sel[0].get("fitted_slope"))
        ax.plot(T, m, marker="o", color=col, lw=1.4, label=f"{b}: measured (slope {slope:.2f})")
        ax.plot(T, bv, color=col, ls="--", lw=1, label=f"{b}: bound")
    if bounds:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        Ts = sorted({_num(r["T"]) for r in rates if np.isfinite(_num(r["T"]))})
        ax.set_xticks(Ts, [f"{int(t)}" for t in Ts])
        ax.legend(frameon=False, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    else:
        style.empty_panel(ax, "no rate rows in the report")
    ax.set_xlabel("T (steps)")
    ax.set_ylabel(_GRAD_AVG)
    ax.set_title("(b) rates in T", fontsize=9)
    # (c)
    ax = axes[1][0]
    algs = list(dict.fromkeys(r["algorithm"] for r in consensus))
    for a in algs:
        sel = sorted((r for r in consensus if r["algorithm"] == a), key=lambda r: _num(r["H"]))
        H = np.asarray([_num(r["H"]) for r in sel])
        m = np.asarray([_num(r["consensus_mean"]) for r in sel])
        se = np.asarray([_num(r["consensus_se"]) for r in sel])
        ax.errorbar(
            H,
            m,
            yerr=2 * np.nan_to_num(se),
            marker="o",
            color=style.color(a),
            lw=1.4,
            ms=3.5,
            capsize=2,
            label=style.label(a),
        )
    if algs:
        ax.set_xscale("log", base=2)
        Hs = sorted({_num(r["H"]) for r in consensus if np.isfinite(_num(r["H"]))})
        ax.set_xticks(Hs, [f"{int(h)}" for h in Hs])
        ax.legend(frameon=False, fontsize=7)
    else:
        style.empty_panel(ax, "no consensus rows in the report")
    ax.set_xlabel("H (local steps between syncs)")
    ax.set_ylabel(
        "time-averaged consensus error\n"
        r"$\frac{1}{K}\sum_k \Vert x_k - \bar{x}\Vert^2$"
    )
    ax.set_title("(c) consensus error vs H (\u00b12 s.e.)", fontsize=9)
    # (d)
    ax = axes[1][1]
    metric = "loss_gap"
    labels_d = list(dict.fromkeys(r["label"] for r in exact if r["metric"] == metric))
    for k, lab in enumerate(labels_d):
        sel = sorted(
            (r for r in exact if r["label"] == lab and r["metric"] == metric),
            key=lambda r: _num(r["step"]),
        )
        s = np.asarray([_num(r["step"]) for r in sel])
        e = np.asarray([_num(r["exact"]) for r in sel])
        mc = np.asarray([_num(r["mc_mean"]) for r in sel])
        se = np.asarray([_num(r["mc_se"]) for r in sel])
        col = _PALETTE[k % len(_PALETTE)]
        ax.plot(s, e, color=col, lw=1.4, label=f"{lab}: exact")
        ax.fill_between(s, mc - 2 * se, mc + 2 * se, color=col, alpha=0.2, lw=0)
        ax.plot(s, mc, color=col, lw=0, marker=".", ms=3)
    if labels_d:
        ax.set_yscale("log")
        ax.legend(frameon=False, fontsize=6)
    else:
        style.empty_panel(ax, "no exact-vs-MC rows in the report")
    ax.set_xlabel("step t")
    ax.set_ylabel(r"$\mathbb{E} f(\bar{x}_t) - f^\star$")
    ax.set_title(
        "(d) exact quadratic curves (lines) vs Monte Carlo (dots, \u00b12 s.e.)", fontsize=9
    )
    fig.suptitle(f"Theory checks (palsgd verify report: {rd.name})", fontsize=10, y=1.01)
    fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("verdict", "")] = counts.get(r.get("verdict", ""), 0) + 1
    res.data_files.append(
        _write_json(
            out / "theory.json",
            {
                "report": str(rd.resolve()),
                "verdict_counts": counts,
                "measured_vs_bound": [
                    {
                        k: r.get(k)
                        for k in (
                            "bound",
                            "problem",
                            "algorithm",
                            "K",
                            "H",
                            "p",
                            "T",
                            "measured_mean",
                            "lcb",
                            "ucb",
                            "bound_value",
                            "verdict",
                        )
                    }
                    for r in tested
                ],
                "rates": rates,
                "consensus": consensus,
                "exact_vs_mc": [r for r in exact if r["metric"] == metric],
            },
        )
    )
    res.summary = {"verdict_counts": counts}
    if counts.get("violated"):
        res.notes.append(f"{counts['violated']} configuration(s) violate their bound")
    return res
