"""The paper recipe's plan of stacked workers (``place(..., stack_workers=True)``): a run
whose K workers share one GPU is planned as one process of K workers
(``--nproc 1 --workers-per-process K``) when its settings allow it, K ranks otherwise; the
plan is data, checked without a GPU. Runs of one worker per process keep their cache keys."""

from __future__ import annotations

import json

import pytest

from paper_figures import runs as R
from paper_figures.runs import launch
from paper_figures.runs.placement import place


def _config(**kw) -> dict:
    spec = R.plan_runs("paper", ["loss_vs_time"]).runs[0]
    return {**R.resolve_spec(spec, "gloo"), **kw}


@pytest.mark.parametrize(
    ("gpus", "stack", "w"),
    [(1, True, 4), (1, False, 1), (2, True, 1), (3, True, 1), (4, True, 1), (8, True, 1)],
)
def test_only_a_run_on_one_gpu_is_stacked(gpus, stack, w):
    """K = 4: stacked on one GPU; 2 or 3 GPUs would need several processes of several
    workers (not supported), 4 or more give every worker its own GPU."""
    pl = place(4, gpus, stack_workers=stack, names=tuple(str(i) for i in range(gpus)))
    assert pl.workers_per_process == w and pl.to_dict()["workers_per_process"] == w
    assert pl.layout(_config(algorithm="palsgd")) == ((1, 4) if w > 1 else (4, 1))
    assert ("--workers-per-process 4" in pl.describe()) == (w > 1)


def test_runs_the_stacked_workers_refuse_keep_their_ranks():
    pl = place(4, 1, stack_workers=True, names=("0",))
    assert pl.layout(_config(algorithm="palsgd")) == (1, 4)
    assert pl.layout(_config(algorithm="ddp", p=None, eta=None, T0=None)) == (4, 1)
    assert pl.layout(_config(algorithm="palsgd", compile=True)) == (4, 1)
    assert pl.layout(_config(precision="fp16")) == (4, 1)
    assert pl.layout(_config(reference_faithful=True, outer_steps_per_sync=2)) == (4, 1)


def test_the_plan_items_and_keys_of_a_stacked_placement(tmp_path):
    """The missing runs' items carry nproc 1 and workers_per_process K (the launch starts
    one process); their keys are their own, while a run of one worker per process keeps
    the key it had before the option existed."""
    plan = R.plan_runs("paper", ["loss_vs_time"])
    stacked = place(plan.nproc, 1, stack_workers=True, names=("0",))
    ranks = place(plan.nproc, 1, names=("0",))
    _, items = launch._locate(plan, tmp_path, False, stacked)
    _, rank_items = launch._locate(plan, tmp_path, False, ranks)
    by_name = {i["name"]: i for i in items}
    assert any(i["config"]["workers_per_process"] == plan.nproc for i in items)
    for item in rank_items:
        own = by_name[item["name"]]
        assert item["config"]["nproc"] == plan.nproc and item["config"]["workers_per_process"] == 1
        if own["config"]["workers_per_process"] > 1:
            assert own["config"]["nproc"] == 1 and own["key"] != item["key"]
        else:
            assert own["key"] == item["key"]
    old = {k: v for k, v in rank_items[0]["config"].items() if k != "workers_per_process"}
    dev = R.run_key(rank_items[0]["config"], plan.nproc)
    assert R.run_key(old, plan.nproc) == dev  # the key of a run cached before the option
    json.dumps(items, default=str)  # plan files are JSON
