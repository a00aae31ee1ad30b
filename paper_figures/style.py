"""One look for every figure: a colour per method, labelled axes with units, PNG + PDF.

Colours are fixed per method across all figures (PALSGD red, DDP black, Local SGD blue,
DiLoCo orange), the paper's reported numbers are purple, the cost-model numbers green.
:func:`save` writes ``NAME.png`` (150 dpi) and ``NAME.pdf`` with tight bounding boxes and
closes the figure. The Agg backend is used, so no display is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from theory.algorithm import LABELS as ALGORITHM_TABLE_LABELS  # noqa: E402
from theory.algorithm import NAMES  # noqa: E402

__all__ = [
    "COLORS",
    "LABELS",
    "CLOCK_LABELS",
    "PAPER_COLOR",
    "MODEL_COLOR",
    "MEASURED_COLOR",
    "PART_COLORS",
    "color",
    "label",
    "figure",
    "apply",
    "plt",
    "PART_LABELS",
    "legend_below",
    "save",
    "loss_label",
    "empty_panel",
    "percent",
    "footnote",
]

#: one colour and one label per name of :data:`theory.algorithm.NAMES` (the labels are the
#: table's, :data:`theory.algorithm.LABELS`); ``sgd`` (the simulator's name of minibatch SGD)
#: is drawn as DDP
COLORS: dict[str, str] = {
    "ddp": "#222222",
    "sgd": "#222222",
    "local_sgd": "#1f77b4",
    "post_local_sgd": "#9467bd",
    "diloco": "#ff7f0e",
    "easgd": "#2ca02c",
    "palsgd": "#d62728",
}
LABELS: dict[str, str] = {n: ALGORITHM_TABLE_LABELS[n] for n in NAMES}
PAPER_COLOR = "#7b3294"
MODEL_COLOR = "#1b9e77"
MEASURED_COLOR = "#555555"

#: x-axis labels of the three clocks (analysis.Curve.clock)
CLOCK_LABELS: dict[str, str] = {
    "step": "optimizer steps (pull steps count)",
    "measured": "measured wall-clock (s)",
    "modelled": "modelled wall-clock (s, cost model)",
}

#: colours of the time-saving parts of empirical.cost.attribute_gain
PART_COLORS: dict[str, str] = {
    "fewer_steps_s": "#66a61e",
    "compute_skipped_on_pulls_s": "#d62728",
    "communication_saved_s": "#1f77b4",
    "pull_cost_s": "#e7298a",
    "outer_step_cost_s": "#a6761d",
    "straggler_wait_s": "#7570b3",
}
PART_LABELS: dict[str, str] = {
    "fewer_steps_s": "fewer (+) or more (\u2212) steps to target",
    "compute_skipped_on_pulls_s": "compute skipped on pull steps",
    "communication_saved_s": "communication saved",
    "pull_cost_s": "cost of pull updates",
    "outer_step_cost_s": "cost of outer steps (local)",
    "straggler_wait_s": "wait for slowest worker at syncs",
}

_RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "pdf.fonttype": 42,
}


def color(algorithm: str) -> str:
    """The colour of a method (grey for anything unknown)."""
    return COLORS.get(algorithm, "#888888")


def label(algorithm: str) -> str:
    """The display name of a method."""
    return LABELS.get(algorithm, algorithm)


def loss_label(task_kind: str) -> str:
    """Y label of an evaluation loss: cross-entropy per token (LM) or per image."""
    if task_kind == "lm":
        return "eval loss of the anchor\n(cross-entropy, nats/token)"
    return "eval loss of the anchor\n(cross-entropy, nats/image)"


def figure(
    nrows: int = 1, ncols: int = 1, *, width: float = 4.2, height: float = 3.2, **kw: Any
) -> tuple[Any, Any]:
    """``plt.subplots`` with the house style and a panel size of ``width x height`` inches."""
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kw
        )
    for ax in axes.flat:
        apply(ax)
    return fig, axes


def apply(ax: Any) -> None:
    """The house style on an existing axes."""
    for k, v in (("top", False), ("right", False)):
        ax.spines[k].set_visible(v)
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=8)
    ax.title.set_fontsize(10)
    ax.xaxis.label.set_fontsize(9)
    ax.yaxis.label.set_fontsize(9)


def footnote(fig: Any, text: str, y: float = -0.01) -> None:
    """A small note under the panels (assumptions, sources); ``y`` in figure coordinates
    (lower it when a legend sits below the panels)."""
    fig.text(0.01, y, text, ha="left", va="top", fontsize=7, color="#444444", wrap=True)


def save(fig: Any, directory: str | Path, name: str) -> list[str]:
    """Write ``NAME.png`` and ``NAME.pdf`` into ``directory``; close the figure."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(_RC):
        fig.savefig(directory / f"{name}.png", dpi=150, bbox_inches="tight")
        fig.savefig(directory / f"{name}.pdf", bbox_inches="tight")
    plt.close(fig)
    return [f"{name}.png", f"{name}.pdf"]


def empty_panel(ax: Any, text: str) -> None:
    """A panel that says why it has no data."""
    ax.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=8,
        color="#666666",
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def percent(x: float, digits: int = 1) -> str:
    """``0.184 -> '18.4%'``; NaN -> 'n/a'."""
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{100 * x:.{digits}f}%"


def legend_below(fig: Any, handles: Sequence[Any], labels: Sequence[str], ncol: int = 4) -> None:
    """One legend for the whole figure, centred below the panels."""
    fig.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=ncol,
        frameon=False,
        fontsize=8,
    )
