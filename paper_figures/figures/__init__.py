"""The figures: one function per figure, each writing PNG + PDF and the data behind it.

Every function takes already-loaded inputs (:class:`paper_figures.runs.RunData`,
:class:`paper_figures.analysis.CostSetup`, a verification report directory) and an output
directory, and returns a :class:`FigureOutput` (files written, a summary for the manifest).
The data files hold exactly what is drawn (CSV, one row per point or bar; JSON for
metadata such as targets, assumptions and sources; written by :mod:`core.io`: NaN as
null in JSON and an empty CSV cell, an infinity as ``"inf"``), so a reader can re-plot or
check every number.

Files (figure names as in ``palsgd figures --only``):

* ``common.py``: :class:`FigureOutput`, the run and curve helpers, the data writer.
* ``loss_curves.py``: ``loss_vs_time``, evaluation loss of the anchor against optimizer
  steps, measured wall-clock and modelled wall-clock, for DDP, Local SGD, DiLoCo and
  PALSGD, one row per task.
* ``targets.py``: ``time_to_target``, time to the target loss (measured and modelled) per
  method, the reduction against DDP, and the paper's three reported reductions alongside.
* ``attribution.py``: ``gain_attribution``, the modelled time saving of each local method
  over DDP split into compute skipped on pull steps, communication saved, fewer/more
  steps and the extra costs (:func:`empirical.cost.attribute_gain`), for these runs
  and, at paper scale, for the paper's three settings.
* ``predictions.py``: ``paper_scale``, predicted PALSGD-vs-DDP reduction of the three
  headline settings on each named cluster profile next to the paper's 18.4% / 24.4% / 21.1%
  (:func:`empirical.cost.paper_scale_prediction`).
* ``sweeps.py``: ``sensitivity``, final loss and time to target against ``H`` and ``p``.
* ``ablations.py``: ``ablation``, each reference-faithful switch of the authors' code on its
  own, and all together, against PALSGD as described.
* ``theory_checks.py``: ``theory``, the verifier's plots of a ``palsgd verify`` report:
  tightness, bound vs measured, rates in ``T``, consensus error vs ``H``, exact quadratic
  curves vs Monte Carlo.
"""

from paper_figures.figures.ablations import ABLATION_COLUMNS, ablation
from paper_figures.figures.attribution import ATTRIBUTION_COLUMNS, gain_attribution
from paper_figures.figures.common import FigureOutput
from paper_figures.figures.loss_curves import LOSS_COLUMNS, loss_vs_time
from paper_figures.figures.predictions import (
    PAPER_SCALE_COLUMNS,
    paper_predictions,
    paper_scale,
)
from paper_figures.figures.sweeps import SENSITIVITY_COLUMNS, sensitivity
from paper_figures.figures.targets import TTT_COLUMNS, time_to_target_figure
from paper_figures.figures.theory_checks import theory

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
