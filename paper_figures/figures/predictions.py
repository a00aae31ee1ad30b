"""Figure ``paper_scale``: the cost model's PALSGD-vs-DDP reduction of the paper's three
headline settings on each named cluster profile, next to the paper's 18.4% / 24.4% / 21.1%."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.patches import Patch

from core.errors import UserInputError
from empirical import cost as costmodel
from paper_figures import style
from paper_figures.analysis import PAPER_LABELS, PAPER_REDUCTIONS, PAPER_SOURCE
from paper_figures.figures.common import FigureOutput, finish

__all__ = ["PAPER_SCALE_COLUMNS", "paper_predictions", "paper_scale"]

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
_GREENS = ["#74c476", "#31a354", "#006d2c", "#00441b", "#c7e9c0"]


def paper_predictions(
    profiles: Sequence[str] | None = None,
    *,
    method: str = "palsgd",
    coins: Sequence[str] = ("shared", "independent"),
) -> list[dict[str, Any]]:
    """:func:`empirical.cost.paper_scale_prediction` for the three headline settings on
    each named static cluster profile (default: all of them) and each coin mode
    (``"shared"``: all workers pull on the same steps, as the authors' code does;
    ``"independent"``: one coin per worker, as the algorithm is described, so a sync waits
    for the worker with the most gradient steps in the round)."""
    names = list(profiles) if profiles else list(costmodel.CLUSTER_PROFILES.static())
    out = []
    for setting in PAPER_REDUCTIONS:
        for prof in names:
            for c in coins:
                out.append(costmodel.paper_scale_prediction(setting, prof, method=method, coins=c))
    return out


def _prediction_row(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "setting": p["setting"],
        "profile": p["profile"],
        "K": p["K"],
        "gpu": p["gpu"],
        "method": p["method"],
        "coins": p["inputs"]["coins"],
        "predicted_reduction": p["predicted_time_reduction"],
        "paper_reduction": p["paper_reported_time_reduction"],
        **{k: p["per_step"][k] for k in ("grad_step_s", "ddp_exposed_comm_s", "sync_allreduce_s")},
    }


def _prediction_bar(ax: Any, x: float, width: float, v: float, col: str, shared: bool) -> None:
    ax.bar(
        x,
        100 * v,
        width,
        color=col,
        alpha=1.0 if shared else 0.45,
        hatch=None if shared else "//",
        edgecolor=col,
    )
    ax.text(x, 100 * v if v >= 0 else 0, f"{100 * v:.0f}", ha="center", va="bottom", fontsize=6.5)


def _paper_bar(ax: Any, x: float, width: float, v: float) -> None:
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


def _draw_bars(ax: Any, preds: Sequence[Mapping[str, Any]], settings, profiles, coin_modes):
    """One group of bars per setting; returns the data rows of the drawn predictions."""
    slots = [(prof, c) for prof in profiles for c in coin_modes]
    n = len(slots) + 1
    width = 0.84 / n
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
            col = _GREENS[profiles.index(prof) % len(_GREENS)]
            x = i + (j - (n - 1) / 2) * width
            _prediction_bar(ax, x, width, p["predicted_time_reduction"], col, coins == "shared")
            rows.append(_prediction_row(p))
        _paper_bar(ax, i + (n - 1 - (n - 1) / 2) * width, width, PAPER_REDUCTIONS[setting])
    return rows


def _legend(ax: Any, preds: Sequence[Mapping[str, Any]], profiles, coin_modes) -> None:
    handles, names = [], []
    for prof in profiles:
        p = next(x for x in preds if x["profile"] == prof)
        handles.append(Patch(color=_GREENS[profiles.index(prof) % len(_GREENS)]))
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


def paper_scale(
    out: str | Path, predictions: Sequence[Mapping[str, Any]] | None = None
) -> FigureOutput:
    """Figure: predicted PALSGD-vs-DDP time-to-target reduction of the paper's three
    settings on each cluster profile (bars: shared coins as in the authors' code; hatched:
    independent coins), next to the reduction the paper reports."""
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
    rows = _draw_bars(ax, preds, settings, profiles, coin_modes)
    ax.set_xticks(
        range(len(settings)), [PAPER_LABELS.get(s, s).replace(" / ", "\n") for s in settings]
    )
    ax.set_ylabel("PALSGD time-to-target reduction\nagainst DDP (%)")
    ax.axhline(0, color="#333333", lw=0.8)
    ax.set_title(
        "Cost-model prediction at the paper's scale vs the paper's reported reductions", fontsize=10
    )
    _legend(ax, preds, profiles, coin_modes)
    ratio = preds[0]["inputs"].get("step_ratio", 1.0)
    style.footnote(
        fig,
        "Assumptions (all listed in paper_scale.json): PALSGD needs "
        + ("as many steps as DDP" if ratio == 1.0 else f"{ratio:g} x DDP's steps")
        + " to reach the target; per-step compute from FLOP estimates at an assumed "
        "GPU utilisation; communication from the cluster profile's link. "
        f"Paper: {PAPER_SOURCE}.",
    )
    meta = {"paper": PAPER_REDUCTIONS, "paper_source": PAPER_SOURCE, "predictions": preds}
    finish(res, fig, out, rows, PAPER_SCALE_COLUMNS, meta)
    res.summary = {
        f"{r['setting']}@{r['profile']}/{r['coins']}": r["predicted_reduction"] for r in rows
    }
    return res
