"""Stacked workers in several processes: ``P = 2`` gloo ranks of ``W = 2`` stacked workers
each (:class:`empirical.algorithms.stacked.StackedWorkers` with a process group) are the
``K = 4`` workers of ONE process holding all four, in float64 to 1e-12.

Rank ``r`` holds the workers ``2r, 2r + 1``: their coins (the counter-based coins of those
ranks of a 4-rank run), their micro-batches (columns ``2r, 2r + 1`` of the same data) and
rows; the warm-up's mean gradient, the sync's mean, the averaged BatchNorm buffers and the
consensus statistic sum the rows here and then over the ranks (one all-reduce each). One
spawn runs every scenario and returns plain arrays; the parent compares them with the
one-process run (``tests/test_stacked_workers.py`` shows that one equals ``K`` separate
workers).

Negative control: a rank that reads its coins as if its workers were ``0, 1`` (the offset
forgotten) trains another run, by more than 1e-4.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_stacked_workers import OPTIMIZERS, _cfg, _data, _loss, _mlp, run_stacked

from core.errors import UserInputError
from empirical.algorithms.stacked import StackedWorkers
from empirical.algorithms.stacked_run import StackedAlgorithm
from empirical.distributed import spawn_workers

pytestmark = pytest.mark.distributed
P, W = 2, 2
K, T, TOL = P * W, 12, 1e-12

#: (name, config keywords for _cfg, optimizer, BatchNorm)
SCENARIOS = {
    "palsgd_nesterov_warmup": (dict(p=0.3, outer="nesterov", T0=3), "adamw", False),
    "palsgd_average_bn": (dict(p=0.3, outer="average", consensus_interval=1), "sgd", True),
    "local_sgd": (dict(p=0.0, outer="average"), "sgd_momentum", False),
}


def _config(kw: dict):
    kw = dict(kw)
    return _cfg(kw.pop("p"), kw.pop("outer"), **kw)


def _result(sw: StackedWorkers) -> dict:
    return {
        "x": sw.x.clone().numpy(),
        "z": sw.z.clone().numpy(),
        "buffers": {n: b.clone().numpy() for n, b in sw.model.buffers.items()},
        "consensus": None if sw.last_consensus is None else float(sw.last_consensus),
        "pulls": sw.stats["pull_steps"].copy(),
        "syncs": sw.stats["syncs"],
        "allreduce_calls": sw.stats["allreduce_calls"],
        "time_sync_s": sw.stats["time_sync_s"],
    }


def rank_runs(rank: int, world: int) -> dict:
    """Every scenario on this rank's two workers (runs in the spawned processes)."""
    assert world == P
    out = {}
    data = _data(T, K)
    mine = tuple(d[:, rank * W : (rank + 1) * W] for d in data)
    for name, (kw, opt, bn) in SCENARIOS.items():
        sw = run_stacked(_config(kw), opt, _mlp(bn), mine)
        assert (sw.first, sw.K, sw.W) == (rank * W, K, W)
        out[name] = _result(sw)
    # the global model of Local SGD with averaging: the mean over all K workers
    cfg, model = _config(SCENARIOS["local_sgd"][0]), _mlp()
    algo = StackedAlgorithm(cfg, copy.deepcopy(model), OPTIMIZERS["sgd"](model.parameters()),
                            W, _loss)  # fmt: skip
    for s in range(T - 1):  # between syncs: the workers differ
        algo.sw.step(tuple(d[s] for d in mine))
    out["anchorless"] = {k: v.numpy() for k, v in algo.anchor_state_dict().items()}
    out["anchorless_x"] = algo.sw.x.clone().numpy()
    # the negative control: this rank's coins read as if its workers were 0 and 1
    kw, opt, _ = SCENARIOS["palsgd_average_bn"]
    sw = StackedWorkers(_config(kw), _mlp(), W, OPTIMIZERS["sgd"](_mlp().parameters()), _loss)
    sw.first = 0
    for s in range(T):
        sw.step(tuple(d[s] for d in mine))
    out["offset_forgotten"] = sw.z.clone().numpy()
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return spawn_workers(rank_runs, P, timeout_s=240)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_ranks_of_stacked_workers_are_one_process_holding_all(ranks, name):
    kw, opt, bn = SCENARIOS[name]
    one = _result(run_stacked(_config(kw), opt, _mlp(bn), _data(T, K)))
    x = np.concatenate([r[name]["x"] for r in ranks])
    assert np.abs(x - one["x"]).max() < TOL
    for r in ranks:
        assert np.abs(r[name]["z"] - one["z"]).max() < TOL
        assert r[name]["syncs"] == one["syncs"] >= 2
        assert r[name]["allreduce_calls"] > 0 and one["allreduce_calls"] == 0
        assert r[name]["time_sync_s"] > 0 and one["time_sync_s"] > 0  # the syncs are timed
        if one["consensus"] is not None:
            assert r[name]["consensus"] == pytest.approx(one["consensus"], rel=1e-10, abs=TOL)
    assert np.array_equal(np.concatenate([r[name]["pulls"] for r in ranks]), one["pulls"])
    if kw["p"]:  # pulls on both ranks
        assert all(r[name]["pulls"].sum() > 0 for r in ranks)
    for key, stacked in one["buffers"].items():
        got = np.concatenate([r[name]["buffers"][key] for r in ranks])
        assert np.abs(got - stacked).max() < TOL, key


def test_the_global_model_between_syncs_is_the_mean_of_every_workers(ranks):
    x = np.concatenate([r["anchorless_x"] for r in ranks])
    mean = x.mean(0)
    for r in ranks:
        flat = np.concatenate([v.reshape(-1) for v in r["anchorless"].values()])
        assert np.abs(flat - mean).max() < TOL
    assert np.abs(x[0] - x[-1]).max() > 1e-3  # the workers differ: a mean of one rank's fails


def test_a_rank_that_forgets_its_workers_offset_trains_another_run(ranks):
    kw, _, _ = SCENARIOS["palsgd_average_bn"]
    one = run_stacked(_config(kw), "sgd", _mlp(), _data(T, K))
    assert all(np.abs(r["offset_forgotten"] - one.z.numpy()).max() > 1e-4 for r in ranks)


def test_a_state_of_another_split_of_the_workers_is_refused():
    """A checkpoint's stacked state names its ``K`` and ``W``: the same ``K`` split over
    other processes (``W`` differs) is refused; a state written before ``W`` was recorded
    (one process: ``W = K``) still loads."""
    cfg, model = _config(SCENARIOS["local_sgd"][0]), _mlp()
    algo = StackedAlgorithm(cfg, model, OPTIMIZERS["sgd"](model.parameters()), K, _loss)
    state = algo.state_dict()
    assert (state["K"], state["W"]) == (K, K)
    with pytest.raises(UserInputError, match=r"holds 4 \(2 per process\) workers, this run 4"):
        algo.load_state_dict({**state, "W": 2})
    algo.load_state_dict({k: v for k, v in state.items() if k != "W"})
