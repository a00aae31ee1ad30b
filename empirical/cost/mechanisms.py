"""The paper's three reported gains beside the cost model's, split by mechanism.

For each of the paper's settings (:data:`empirical.cost.paper.SETTINGS`) on a cluster
profile, :func:`mechanism_table` gives the paper's reported time reduction over DDP and the
cost model's prediction (:func:`empirical.cost.paper_scale_prediction`, equal steps to the
target) for PALSGD as described (independent coins) and as the authors' code runs it (shared
coins), with the modelled saving split into its parts, each as a fraction of DDP's time:

* ``compute_skipped``: a pull step computes no gradient (with the authors' code a pull step
  also consumes its micro-batches, so the same saving comes with a ``p`` share of the data
  discarded: data, not time, and not modelled here);
* ``fewer_syncs``: the all-reduce of the parameters every ``H`` steps instead of DDP's
  gradient all-reduce every step;
* ``straggler_wait``: a sync waits for the worker with the most gradient steps in the round
  (independent coins only; the authors' shared coins have none);
* ``pull_and_outer_cost``: the pull's and the outer step's own O(d) work (the authors' pull
  touches only the first parameter tensor, which makes it cheaper still: it is already near 0);
* ``the_pull_itself``: the change in steps to the target. The model assumes equal steps
  (0 here); the exact comparison (``palsgd map``, ``docs/when_pulling_pays.md``) measures it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from empirical.cost.paper import PAPER_REPORTED, SETTINGS, paper_scale_prediction

__all__ = ["mechanism_table", "PROFILES"]

#: the cluster profiles priced by default: the paper's clusters are not stated, so a fast
#: and a slow interconnect (``palsgd cost profiles`` cites each)
PROFILES = ("64xGPU-100Gbps", "32nodes-10Gbps")


def _parts(pred: dict[str, Any]) -> dict[str, float]:
    f = pred["attribution"]["parts_fraction_of_baseline"]
    return {
        "compute_skipped": f["compute_skipped_on_pulls_s"],
        "fewer_syncs": f["communication_saved_s"],
        "straggler_wait": f["straggler_wait_s"],
        "pull_and_outer_cost": f["pull_cost_s"] + f["outer_step_cost_s"],
        "the_pull_itself": f["fewer_steps_s"],
    }


def mechanism_table(profiles: Sequence[str] = PROFILES) -> list[dict[str, Any]]:
    """One row per setting, profile and coin model: the paper's gain, the model's, the parts."""
    rows = []
    for setting, profile in itertools.product(SETTINGS, profiles):
        for coins, label in (("independent", "as described"), ("shared", "authors' code")):
            pred = paper_scale_prediction(setting, profile, coins=coins)
            rows.append(
                {
                    "setting": setting,
                    "profile": pred["profile"],
                    "coins": coins,
                    "variant": label,
                    "paper_reported": PAPER_REPORTED[setting],
                    "model_predicted": pred["predicted_time_reduction"],
                    "p": pred["inputs"]["p"],
                    "H": pred["inputs"]["H"],
                    **_parts(pred),
                }
            )
    return rows
