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
* ``the_pull_itself``: the change in steps to the target, priced at ``step_ratio`` (PALSGD's
  steps to the target over DDP's): 1 (equal steps) unless given. The exact comparison
  measures it: :func:`theory.compare.steps.step_ratio` of a map
  (``benchmarks/map_study_tables.py MAP.json`` prints this table at the map's own ratio), or
  a user's runs.

Each row also gives ``link_needed_Gbps``: the bandwidth of the profile's link (its latency,
workers and GPU kept) at which the model's gain equals the paper's reported one at that step
ratio (``None``: not reached by any link of ``[LINK_MIN, LINK_MAX]`` Gb/s; ``inf``: reached
on every one).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from empirical.cost.paper import PAPER_REPORTED, SETTINGS, paper_scale_prediction
from empirical.cost.profiles import ClusterProfile, cluster_profile
from theory.compare.steps import StepRatio

__all__ = [
    "mechanism_table",
    "format_mechanisms",
    "link_needed_Gbps",
    "PROFILES",
    "LINK_MIN",
    "LINK_MAX",
]

#: the links searched for the one each gain needs, in Gb/s
LINK_MIN, LINK_MAX = 0.01, 1e5

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


def _with_bandwidth(prof: ClusterProfile, gbps: float) -> ClusterProfile:
    link = replace(prof.link, bandwidth_Bps=gbps * 1e9 / 8)
    return replace(prof, name=f"{prof.name}@{gbps:.3g}Gbps", link=link)


def link_needed_Gbps(
    setting: str, profile: str, *, coins: str, step_ratio: float = 1.0
) -> float | None:
    """The link bandwidth (Gb/s) at which the modelled gain of ``setting`` on ``profile``
    equals the paper's reported gain (bisection in log bandwidth; the gain falls as the link
    gets faster): ``None`` where even ``LINK_MIN`` does not reach it, ``inf`` where even
    ``LINK_MAX`` exceeds it."""
    prof = cluster_profile(profile)
    target = PAPER_REPORTED[setting]

    def gap(gbps: float) -> float:
        pred = paper_scale_prediction(
            setting, _with_bandwidth(prof, gbps), coins=coins, step_ratio=step_ratio
        )
        return pred["predicted_time_reduction"] - target

    lo, hi = math.log(LINK_MIN), math.log(LINK_MAX)
    if gap(LINK_MIN) < 0:
        return None
    if gap(LINK_MAX) >= 0:
        return math.inf
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(math.exp(mid)) >= 0 else (lo, mid)
    return math.exp((lo + hi) / 2)


def mechanism_table(
    profiles: Sequence[str] = PROFILES, step_ratio: float | Mapping[str, float] = 1.0
) -> list[dict[str, Any]]:
    """One row per setting, profile and coin model: the paper's gain, the model's at
    ``step_ratio`` (one number, or a mapping keyed by coin model ``"independent"`` /
    ``"shared"`` or by setting), the parts, and the link each needs."""
    rows = []
    for setting, profile in itertools.product(SETTINGS, profiles):
        for coins, label in (("independent", "as described"), ("shared", "authors' code")):
            ratio = step_ratio
            if isinstance(step_ratio, Mapping):
                ratio = step_ratio[coins] if coins in step_ratio else step_ratio[setting]
            pred = paper_scale_prediction(setting, profile, coins=coins, step_ratio=ratio)
            rows.append(
                {
                    "setting": setting,
                    "profile": pred["profile"],
                    "coins": coins,
                    "variant": label,
                    "step_ratio": ratio,
                    "paper_reported": PAPER_REPORTED[setting],
                    "model_predicted": pred["predicted_time_reduction"],
                    "p": pred["inputs"]["p"],
                    "H": pred["inputs"]["H"],
                    **_parts(pred),
                    "link_needed_Gbps": link_needed_Gbps(
                        setting, profile, coins=coins, step_ratio=ratio
                    ),
                }
            )
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _link(x: float | None) -> str:
    if x is None:
        return "none"
    return "any" if math.isinf(x) else f"<= {x:.3g} Gb/s"


def format_mechanisms(ratios: Mapping[str, StepRatio]) -> str:
    """The mechanism table (:func:`mechanism_table`) at the map's median step ratio per coin
    model (:func:`theory.compare.steps.step_ratio`), every profile row with the link each
    gain needs, as Markdown."""
    use = {k: (v.median if v.median is not None else 1.0) for k, v in ratios.items()}
    lines = [
        "The paper's gains at the map's step ratio (PALSGD's steps to eps / DDP's, median "
        + ", ".join(
            f"{k} {v.median:.3g} over {v.cells} cells"
            if v.median is not None
            else f"{k}: no cell, 1 used"
            for k, v in ratios.items()
        )  # fmt: skip
        + "); link needed: the bandwidth at which the model's gain equals the paper's",
        "| setting | profile | coins | step ratio | paper | model | compute skipped | fewer "
        "syncs | straggler wait | the pull itself | link needed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in mechanism_table(step_ratio=use):
        lines.append(
            f"| {r['setting']} | {r['profile']} | {r['coins']} | {r['step_ratio']:.3g} | "
            f"{_pct(r['paper_reported'])} | {_pct(r['model_predicted'])} | "
            f"{_pct(r['compute_skipped'])} | {_pct(r['fewer_syncs'])} | "
            f"{_pct(r['straggler_wait'])} | {_pct(r['the_pull_itself'])} | "
            f"{_link(r['link_needed_Gbps'])} |"
        )
    return "\n".join(lines)
