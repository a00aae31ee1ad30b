"""Tests of empirical.cost: formulas, calibration, attribution, paper-scale predictions,
bad input, and the acceptance check (issue 5): on 2 gloo processes with an emulated slow
link, the calibrated model predicts the measured wall-clock of DDP, Local SGD and PALSGD.

The acceptance check runs everything in ONE spawn (link calibration, compute calibration
and the three runs, on the same machine at the same time) and compares in the parent.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from core.errors import UserInputError
from core.validation import ParameterError
from empirical import cost as cm
from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.algorithms.base import Communicator, new_stats
from empirical.algorithms.slowlink import SerialLinkClock, link_delay_fn
from empirical.models import count_parameters, gptneo_parameter_count, model_spec
from palsgd.cli import main as cli_main

LINK = cm.LinkProfile("test", latency_s=1e-5, bandwidth_Bps=1e9, algorithm="ring")


# ----------------------------------------------------------------------------- formulas


@pytest.mark.parametrize("K", [2, 3, 4, 8, 64])
def test_ring_formula(K):
    n = 3.0e6
    expected = 2 * (K - 1) * 1e-5 + 2 * (K - 1) / K * n / 1e9
    assert cm.allreduce_time(n, K, LINK) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("K,steps", [(2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (64, 6)])
def test_tree_and_rabenseifner_formulas(K, steps):
    n = 5.0e5
    tree = cm.LinkProfile("t", 2e-6, 4e9, "tree")
    rab = cm.LinkProfile("r", 2e-6, 4e9, "rabenseifner")
    assert cm.allreduce_time(n, K, tree) == pytest.approx(2 * steps * 2e-6 + 2 * n / 4e9)
    assert cm.allreduce_time(n, K, rab) == pytest.approx(
        2 * steps * 2e-6 + 2 * (K - 1) / K * n / 4e9
    )


def test_allreduce_time_vectorised_monotone_and_free_for_one_worker():
    n = np.array([0.0, 1e3, 1e6, 1e9])
    t = cm.allreduce_time(n, 8, LINK)
    assert t.shape == (4,) and np.all(np.diff(t) > 0)
    assert t[0] == pytest.approx(14 * 1e-5)  # latency only
    assert np.all(cm.allreduce_time(n, 1, LINK) == 0)
    # ring bandwidth term tends to 2 n / B
    big = cm.allreduce_time(1e9, 10_000, cm.LinkProfile("x", 0.0, 1e9))
    assert big == pytest.approx(2.0, rel=1e-3)


def test_allreduce_time_bad_input():
    with pytest.raises(ParameterError, match="'K'"):
        cm.allreduce_time(1e3, 0, LINK)
    with pytest.raises(ParameterError, match="'nbytes'"):
        cm.allreduce_time(-1.0, 2, LINK)
    with pytest.raises(UserInputError, match="'link'"):
        cm.allreduce_time(1.0, 2, {"latency_s": 1})


# ----------------------------------------------------------------------------- calibration


def _synthetic(link, sizes, Ks, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for K in Ks:
        for n in sizes:
            t = float(cm.allreduce_time(n, K, link))
            out.append((n, K, t * (1 + noise * rng.standard_normal())))
    return out


@pytest.mark.parametrize("algorithm", cm.ALLREDUCE_ALGORITHMS)
def test_calibration_recovers_known_link_exactly(algorithm):
    true = cm.LinkProfile("true", 3.7e-5, 2.3e9, algorithm)
    meas = _synthetic(true, [1e3, 1e4, 1e5, 1e6, 1e7], [2, 4, 8])
    fit = cm.calibrate_link(meas, algorithm)
    assert fit.latency_s == pytest.approx(3.7e-5, rel=1e-8)
    assert fit.bandwidth_Bps == pytest.approx(2.3e9, rel=1e-8)
    assert fit.algorithm == algorithm and "least-squares" in fit.source


def test_calibration_with_noise_is_close():
    true = cm.LinkProfile("true", 5e-3, 2e7)
    meas = _synthetic(true, np.geomspace(4e3, 4e6, 8), [2], noise=0.03, seed=1)
    fit = cm.calibrate_link(meas)
    assert fit.latency_s == pytest.approx(5e-3, rel=0.1)
    assert fit.bandwidth_Bps == pytest.approx(2e7, rel=0.1)


def test_calibration_bad_input():
    with pytest.raises(UserInputError, match="at least two"):
        cm.calibrate_link([(1e3, 2, 1e-3)])
    with pytest.raises(UserInputError, match="two\\s+different message sizes"):
        cm.calibrate_link([(1e3, 2, 1e-3), (1e3, 2, 1.1e-3)])
    with pytest.raises(UserInputError, match="no bandwidth term"):
        cm.calibrate_link([(1e3, 2, 2e-3), (1e6, 2, 1e-3)])
    with pytest.raises(ParameterError, match="'seconds'"):
        cm.calibrate_link([(1e3, 2, -1.0), (1e6, 2, 1e-3)])
    with pytest.raises(UserInputError, match="triple"):
        cm.calibrate_link([(1e3, 2)])
    with pytest.raises(UserInputError, match="unknown algorithm"):
        cm.calibrate_link([(1e3, 2, 1e-3), (1e6, 2, 1e-2)], "butterfly")


# ----------------------------------------------------------------------------- profiles


def test_link_and_compute_profile_validation_names_the_field():
    with pytest.raises(ParameterError, match="'latency_s'"):
        cm.LinkProfile("x", -1.0, 1e9)
    with pytest.raises(ParameterError, match="'bandwidth_Bps'"):
        cm.LinkProfile("x", 0.0, 0.0)
    with pytest.raises(ParameterError, match="'bandwidth_Bps'"):
        cm.LinkProfile("x", 0.0, float("nan"))
    with pytest.raises(UserInputError, match="unknown algorithm"):
        cm.LinkProfile("x", 0.0, 1e9, "star")
    with pytest.raises(ParameterError, match="'grad_step_s'"):
        cm.ComputeProfile(grad_step_s=-1.0, pull_step_s=0.0)
    with pytest.raises(ParameterError, match="'inner_step_s'"):
        cm.ComputeProfile(grad_step_s=1.0, pull_step_s=0.0, inner_step_s=2.0)
    with pytest.raises(ParameterError, match="'A'"):
        cm.ComputeProfile(grad_step_s=1.0, pull_step_s=0.0, accumulation=0)


def test_from_dict_missing_and_unknown_fields():
    good = {
        "K": 4,
        "gpu": "A100-SXM4-80GB",
        "source": "s",
        "link": {"latency_s": 1e-6, "bandwidth_Bps": 1e10},
    }
    prof = cm.cluster_from_dict(good, "mine")
    assert prof.K == 4 and prof.link.bandwidth_Bps == 1e10 and prof.link.algorithm == "ring"
    for field in ("K", "gpu", "source", "link"):
        bad = {k: v for k, v in good.items() if k != field}
        with pytest.raises(UserInputError, match=f"missing the field '{field}'"):
            cm.cluster_from_dict(bad, "mine")
    for field in ("latency_s", "bandwidth_Bps"):
        bad = dict(good, link={k: v for k, v in good["link"].items() if k != field})
        with pytest.raises(UserInputError, match=f"missing the field '{field}'"):
            cm.cluster_from_dict(bad, "mine")
    with pytest.raises(UserInputError, match="unknown field"):
        cm.cluster_from_dict(dict(good, nodes=2), "mine")
    with pytest.raises(ParameterError, match="'K'"):
        cm.cluster_from_dict(dict(good, K=0), "mine")


def test_named_profiles_are_sourced_and_unknown_names_rejected():
    static = cm.CLUSTER_PROFILES.static()
    for name in ("8xGPU-NVLink", "64xGPU-100Gbps", "32nodes-10Gbps"):
        prof = static[name]
        assert prof.gpu in cm.GPUS
        text = (prof.link.source + prof.source).lower()
        assert "datasheet" in text or "ieee" in text
        assert "assumption" in prof.link.source  # the latencies are assumptions
    assert static["64xGPU-100Gbps"].K == 64 and static["8xGPU-NVLink"].K == 8
    assert static["32nodes-10Gbps"].link.bandwidth_Bps == 10e9 / 8
    assert "cpu-gloo-local" in cm.CLUSTER_PROFILES and "cpu-gloo-local" in list(cm.CLUSTER_PROFILES)
    assert "cpu-gloo-local" not in static
    with pytest.raises(UserInputError, match="'profile' = 'nope'"):
        cm.cluster_profile("nope")


def test_load_profiles_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "lab:\n  K: 16\n  gpu: H100-SXM5-80GB\n  source: our lab\n"
        "  link: {latency_s: 1.0e-5, bandwidth_Bps: 2.5e10, algorithm: tree}\n"
    )
    profs = cm.load_profiles(path)
    assert profs["lab"].link.algorithm == "tree" and profs["lab"].K == 16
    path.write_text("lab:\n  K: 16\n  gpu: x\n  source: s\n  link: {latency_s: 1.0e-5}\n")
    with pytest.raises(UserInputError, match="'bandwidth_Bps'"):
        cm.load_profiles(path)
    with pytest.raises(UserInputError, match="cannot read"):
        cm.load_profiles(tmp_path / "absent.yaml")


# ----------------------------------------------------------------------------- DDP overlap


def test_ddp_exposed_comm():
    link = cm.LinkProfile("x", 1e-3, 1e8)
    buckets = [1e6, 2e6, 2e6]
    each = cm.allreduce_time(np.array(buckets), 2, link)
    assert cm.ddp_exposed_comm(buckets, 2, link, 1.0, overlap=False) == pytest.approx(each.sum())
    assert cm.ddp_exposed_comm(buckets, 2, link, 0.0) == pytest.approx(each.sum())
    # a long backward hides everything but the last bucket
    assert cm.ddp_exposed_comm(buckets, 2, link, 100.0) == pytest.approx(each[-1])
    # one bucket is never hidden
    assert cm.ddp_exposed_comm([5e6], 2, link, 100.0) == pytest.approx(
        float(cm.allreduce_time(5e6, 2, link))
    )
    # hand-simulated pipeline: window 0.05 s, buckets ready at 0.01, 0.03, 0.05
    f = 0.01 + each[0]
    f = max(f, 0.03) + each[1]
    f = max(f, 0.05) + each[2]
    assert cm.ddp_exposed_comm(buckets, 2, link, 0.05) == pytest.approx(f - 0.05)


def test_ddp_bucket_sizes():
    mib = 1024 * 1024
    assert cm.ddp_bucket_sizes(0) == []
    assert cm.ddp_bucket_sizes(0.5 * mib) == [0.5 * mib]
    b = cm.ddp_bucket_sizes(60 * mib)
    assert b[0] == mib and b[1] == 25 * mib and sum(b) == pytest.approx(60 * mib)
    assert len(b) == 4


# ----------------------------------------------------------------------------- traces


def test_expected_max_binomial_against_monte_carlo():
    rng = np.random.default_rng(3)
    for n, q, K in [(32, 0.8, 8), (10, 0.5, 2), (4, 0.9, 64)]:
        draws = rng.binomial(n, q, size=(200_000, K)).max(axis=1)
        se = draws.std() / math.sqrt(draws.size)
        assert abs(cm.expected_max_binomial(n, q, K) - draws.mean()) < 5 * se + 1e-9
    assert cm.expected_max_binomial(20, 0.3, 1) == pytest.approx(6.0)


def _run_single_process(cfg, T):
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    algo = build_algorithm(cfg, model, opt)
    x = torch.ones(4, 3)
    for _ in range(T):
        if algo.next_action() == "grad":
            algo.model(x).sum().backward()
        algo.step()
    return algo.stats


@pytest.mark.parametrize(
    "cfg",
    [
        AlgorithmConfig(name="palsgd", H=4, p=0.3, eta=1.0, T0=3, seed=5),
        AlgorithmConfig(name="palsgd", H=5, p=0.5, eta=0.5, seed=2, coins="shared", sync_offset=1),
        AlgorithmConfig(name="local_sgd", H=3),
        AlgorithmConfig(name="diloco", H=4, T0=2),
        AlgorithmConfig(name="ddp"),
    ],
)
def test_step_trace_matches_the_algorithm_counts(cfg):
    T = 23
    tr = cm.step_trace(cfg, 3, T)
    stats = _run_single_process(cfg, T)
    assert tr["grad_steps"][-1] == stats["grad_steps"]
    assert tr["pull_steps"][-1] == stats["pull_steps"]
    assert tr["syncs"][-1] == stats["syncs"]
    assert tr["warmup_steps"][-1] == stats["warmup_steps"]
    assert np.all(tr["step"] == np.arange(1, T + 1))
    assert np.all(tr["critical_grad_steps"] >= tr["grad_steps"])
    if cfg.coins == "shared" or not cfg.has_pulls:
        assert np.all(tr["critical_grad_steps"] == tr["grad_steps"])


def test_step_trace_critical_path_by_brute_force():
    from theory.coins import pull_coins

    cfg = AlgorithmConfig(name="palsgd", H=4, p=0.4, eta=1.0, seed=11)
    K, T = 3, 20
    tr = cm.step_trace(cfg, K, T)
    crit = 0
    for r in range(T // 4):
        counts = [
            sum(not pull_coins(11, 0.4, t, k) for t in range(4 * r, 4 * r + 4)) for k in range(K)
        ]
        crit += max(counts)
    assert tr["critical_grad_steps"][-1] == crit


def test_load_trace_sources_and_errors(tmp_path):
    recs = [
        {
            "kind": "train",
            "step": s,
            "grad_steps": s,
            "pull_steps": 0,
            "syncs": 0,
            "wall_s": 0.1 * s,
        }
        for s in (1, 2, 3)
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in recs) + json.dumps({"kind": "eval", "step": 3}) + "\n"
    )
    csv_path = tmp_path / "train.csv"
    csv_path.write_text(
        "step,loss,grad_steps,pull_steps,syncs,consensus,wall_s\n"
        + "".join(f"{s},1.0,{s},0,0,,{0.1 * s}\n" for s in (1, 2, 3))
    )
    for src in (recs, path, tmp_path, csv_path):
        tr = cm.load_trace(src)
        assert np.all(tr["grad_steps"] == [1, 2, 3]) and "wall_s" in tr
    one = cm.load_trace({"step": 5, "grad_steps": 4, "pull_steps": 1, "syncs": 1})
    assert one["step"].shape == (1,)
    with pytest.raises(UserInputError, match="missing the field 'syncs'"):
        cm.load_trace({"step": [1], "grad_steps": [1], "pull_steps": [0]})
    with pytest.raises(UserInputError, match="cumulative"):
        cm.load_trace({"step": [1, 2], "grad_steps": [2, 1], "pull_steps": [0, 0], "syncs": [0, 0]})
    with pytest.raises(UserInputError, match="does not exist"):
        cm.load_trace(tmp_path / "nothing.jsonl")


# ----------------------------------------------------------------------------- the model


COMP = cm.ComputeProfile(
    grad_step_s=0.1, pull_step_s=0.01, inner_step_s=0.02, sync_local_s=0.005, backward_s=0.05
)


def test_modelled_time_by_hand():
    link = cm.LinkProfile("x", 1e-3, 1e7)
    nbytes = 1e5
    t_ar = float(cm.allreduce_time(nbytes, 2, link))
    ddp = {"step": [1, 2, 3], "grad_steps": [1, 2, 3], "pull_steps": [0, 0, 0], "syncs": [0, 0, 0]}
    got = cm.modelled_time(
        ddp, compute=COMP, link=link, K=2, param_bytes=nbytes, algorithm="ddp", overlap_ddp=False
    )
    assert got == pytest.approx(np.arange(1, 4) * (0.1 + t_ar))
    loc = {
        "step": [4, 8],
        "grad_steps": [3, 6],
        "pull_steps": [1, 2],
        "syncs": [1, 2],
        "critical_grad_steps": [4, 7],
    }
    got = cm.modelled_time(
        loc, compute=COMP, link=link, K=2, param_bytes=nbytes, algorithm="palsgd", p=0.25, H=4
    )
    want = [
        3 * 0.1 + 1 * 0.01 + 1 * (t_ar + 0.005) + 1 * 0.09,
        6 * 0.1 + 2 * 0.01 + 2 * (t_ar + 0.005) + 1 * 0.09,
    ]
    assert got == pytest.approx(want)
    # without the critical path, the expected round excess is used
    del loc["critical_grad_steps"]
    got = cm.time_breakdown(
        loc, compute=COMP, link=link, K=2, param_bytes=nbytes, algorithm="palsgd", p=0.25, H=4
    )
    excess = cm.expected_max_binomial(4, 0.75, 2) - 3
    assert got["straggler_wait"] == pytest.approx(np.array([1, 2]) * excess * 0.09)
    with pytest.raises(UserInputError, match="'H'"):
        cm.modelled_time(
            loc, compute=COMP, link=link, K=2, param_bytes=nbytes, algorithm="palsgd", p=0.25
        )
    with pytest.raises(UserInputError, match="unknown algorithm"):
        cm.modelled_time(loc, compute=COMP, link=link, K=2, param_bytes=nbytes, algorithm="adam")


traces = st.integers(1, 400).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(0, n), st.integers(0, n))
)


@settings(max_examples=60, deadline=None)
@given(
    tb=traces,
    tm=traces,
    cg=st.floats(1e-4, 1.0),
    cp=st.floats(0.0, 1e-2),
    cs=st.floats(0.0, 1e-2),
    lat=st.floats(0.0, 1e-2),
    bw=st.floats(1e6, 1e11),
    K=st.integers(1, 128),
    nbytes=st.floats(0, 1e9),
    overlap=st.booleans(),
    p=st.floats(0, 0.9),
    H=st.integers(1, 64),
)
def test_attribution_parts_add_up(tb, tm, cg, cp, cs, lat, bw, K, nbytes, overlap, p, H):
    n_b = tb[0]
    n_m, pulls, syncs, _ = tm
    comp = cm.ComputeProfile(grad_step_s=cg, pull_step_s=cp, sync_local_s=cs)
    link = cm.LinkProfile("h", lat, bw)
    ddp = {"step": n_b, "grad_steps": n_b, "pull_steps": 0, "syncs": 0}
    pal = {"step": n_m, "grad_steps": n_m - pulls, "pull_steps": pulls, "syncs": syncs // H}
    out = cm.attribute_gain(
        ddp, pal, compute=comp, link=link, K=K, param_bytes=nbytes, overlap_ddp=overlap, p=p, H=H
    )
    total = sum(out["parts_s"].values())
    assert total == pytest.approx(out["total_saving_s"], rel=1e-9, abs=1e-9)
    assert out["total_saving_s"] == pytest.approx(
        out["time_baseline_s"] - out["time_method_s"], rel=1e-9, abs=1e-9
    )
    assert out["parts_s"]["pull_cost_s"] <= 0 and out["parts_s"]["straggler_wait_s"] <= 0


def test_attribution_on_measured_traces_reports_model_error():
    link = cm.LinkProfile("x", 1e-3, 1e7)
    ddp = {"step": [10], "grad_steps": [10], "pull_steps": [0], "syncs": [0], "wall_s": [2.0]}
    pal = {"step": [10], "grad_steps": [8], "pull_steps": [2], "syncs": [2], "wall_s": [1.5]}
    out = cm.attribute_gain(
        ddp, pal, compute=COMP, link=link, K=2, param_bytes=1e5, p=0.2, H=5, coins="shared"
    )
    m = out["measured"]
    assert m["time_reduction"] == pytest.approx(0.25)
    assert m["model_error_baseline"] == pytest.approx(out["time_baseline_s"] / 2.0 - 1)
    assert out["parts_s"]["compute_skipped_on_pulls_s"] == pytest.approx(2 * 0.1)
    assert out["parts_s"]["fewer_steps_s"] == 0


# ----------------------------------------------------------------------------- paper scale


def test_settings_parameter_counts_match_the_models():
    assert cm.SETTINGS["gptneo-8m-tinystories"]["params"] == gptneo_parameter_count(
        **model_spec("gptneo-8m")
    )
    assert cm.SETTINGS["gptneo-125m-tinystories"]["params"] == gptneo_parameter_count(
        **model_spec("gptneo-125m")
    )
    assert cm.SETTINGS["resnet50-imagenet"]["params"] == count_parameters("resnet50-imagenet")


@pytest.mark.parametrize("setting", list(cm.SETTINGS))
@pytest.mark.parametrize("profile", ["8xGPU-NVLink", "64xGPU-100Gbps", "32nodes-10Gbps"])
def test_paper_scale_prediction(setting, profile):
    out = cm.paper_scale_prediction(setting, profile)
    att = out["attribution"]
    assert sum(att["parts_s"].values()) == pytest.approx(att["total_saving_s"], rel=1e-9)
    assert out["predicted_time_reduction"] == att["time_reduction"]
    assert out["paper_reported_time_reduction"] == cm.PAPER_REPORTED[setting]
    assert any("same number of steps" in a for a in out["assumptions"])
    assert out["K"] == cm.CLUSTER_PROFILES.static()[profile].K
    json.dumps(out, allow_nan=False)
    # shared coins remove the sync waits; needing more steps costs time
    shared = cm.paper_scale_prediction(setting, profile, coins="shared")
    assert shared["predicted_time_reduction"] >= out["predicted_time_reduction"]
    slower = cm.paper_scale_prediction(setting, profile, step_ratio=1.2)
    assert slower["predicted_time_reduction"] < out["predicted_time_reduction"]
    assert slower["attribution"]["parts_s"]["fewer_steps_s"] < 0


def test_paper_scale_compute_from_flops():
    out = cm.paper_scale_prediction(
        "gptneo-8m-tinystories", "8xGPU-NVLink", utilisation=0.5, gpu="H100-SXM5-80GB"
    )
    n = 8_054_656
    per_token = 6 * n + 6 * 8 * 300 * 128
    flops = per_token * 300 * 32 * 16
    inner = n * 28 / 3.35e12
    assert out["per_step"]["grad_step_s"] == pytest.approx(flops / (989.4e12 * 0.5) + inner)
    # a slower link makes the communication saving larger
    fast = cm.paper_scale_prediction("gptneo-125m-tinystories", "8xGPU-NVLink", coins="shared")
    slow = cm.paper_scale_prediction("gptneo-125m-tinystories", "32nodes-10Gbps", coins="shared")
    assert (
        slow["attribution"]["parts_fraction_of_baseline"]["communication_saved_s"]
        > fast["attribution"]["parts_fraction_of_baseline"]["communication_saved_s"]
    )


def test_paper_scale_bad_input():
    with pytest.raises(UserInputError, match="'setting' = 'mnist'"):
        cm.paper_scale_prediction("mnist", "8xGPU-NVLink")
    with pytest.raises(UserInputError, match="'profile' = 'tpu-pod'"):
        cm.paper_scale_prediction("gptneo-8m-tinystories", "tpu-pod")
    with pytest.raises(ParameterError, match="'utilisation'"):
        cm.paper_scale_prediction("gptneo-8m-tinystories", "8xGPU-NVLink", utilisation=1.5)
    with pytest.raises(ParameterError, match="'p'"):
        cm.paper_scale_prediction("gptneo-8m-tinystories", "8xGPU-NVLink", p=1.0)
    with pytest.raises(UserInputError, match="'gpu'"):
        cm.paper_scale_prediction("gptneo-8m-tinystories", "8xGPU-NVLink", gpu="TPUv4")


# ----------------------------------------------------------------------------- package


def test_torch_loads_only_with_the_measuring_names():
    """``import empirical.cost`` and a prediction need no torch; a measuring name loads it
    (its module), and the former path ``empirical.cost`` gives the same objects."""
    code = (
        "import sys\n"
        "import empirical.cost as c, empirical.cost as old\n"
        "c.paper_scale_prediction('gptneo-8m-tinystories', '8xGPU-NVLink')\n"
        "before = 'torch' in sys.modules\n"
        "f = c.measure_compute\n"
        "assert old.measure_compute is f and old.LinkProfile is c.LinkProfile\n"
        "print(before, 'torch' in sys.modules, f.__module__)\n"
    )
    root = Path(cm.__file__).resolve().parents[2]  # empirical/cost/__init__.py
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "True", "empirical.cost.compute_timing"]
    with pytest.raises(AttributeError, match="no_such_name"):
        cm.no_such_name  # noqa: B018


# ----------------------------------------------------------------------------- CLI


def _predict_8m(*flags: str) -> int:
    """``palsgd cost predict --setting gptneo-8m-tinystories FLAGS``: its exit code."""
    return cli_main(["cost", "predict", "--setting", "gptneo-8m-tinystories", *flags])


def test_cli_predict_and_errors(capsys, tmp_path):
    out_file = tmp_path / "pred.json"
    assert _predict_8m("--profile", "32nodes-10Gbps", "--output", str(out_file)) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["profile"] == "32nodes-10Gbps" and json.loads(out_file.read_text())
    assert cli_main(["cost", "predict", "--setting", "nope", "--profile", "8xGPU-NVLink"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --setting: invalid choice: 'nope'" in err[0]
    prof = tmp_path / "p.json"
    lab = {"K": 4, "gpu": "A100-SXM4-80GB", "source": "s", "link": {"bandwidth_Bps": 1e9}}
    prof.write_text(json.dumps({"lab": lab}))
    assert _predict_8m("--profile", "lab", "--profiles-file", str(prof)) == 2
    assert "'latency_s'" in capsys.readouterr().err
    assert cli_main(["cost", "profiles"]) == 0
    assert "64xGPU-100Gbps" in json.loads(capsys.readouterr().out)


# ----------------------------------------------------------------------------- slow-link hook


def test_slow_link_config_and_helpers():
    with pytest.raises(ParameterError, match="'comm_delay_s'"):
        AlgorithmConfig(name="ddp", comm_delay_s=-0.1)
    with pytest.raises(ParameterError, match="'comm_delay_per_byte_s'"):
        AlgorithmConfig(name="palsgd", p=0.1, comm_delay_per_byte_s=float("inf"))
    assert AlgorithmConfig(name="ddp").comm_delay_s == 0.0
    assert link_delay_fn(0.0, 0.0) is None
    assert link_delay_fn(0.01, 1e-6)(1000) == pytest.approx(0.011)
    clock = SerialLinkClock()
    t0 = time.perf_counter()
    e1 = clock.reserve(0.5)
    e2 = clock.reserve(0.25)
    assert e1 >= t0 + 0.5 and e2 == pytest.approx(e1 + 0.25)
    # single process: nothing to communicate, so no delay either
    asked: list[int] = []
    comm = Communicator(None, new_stats(), delay=lambda n: asked.append(n) or 10.0)
    comm.all_reduce_sum(torch.ones(3))
    assert asked == [] and comm.stats["allreduce_calls"] == 0


def test_measure_compute_on_a_registry_model():
    torch.set_num_threads(1)
    prof = cm.measure_compute(
        "resnet-tiny", batch_size=4, image_size=16, accumulation=2, repeats=2, warmup=1
    )
    assert prof.grad_step_s > prof.inner_step_s > 0 and prof.pull_step_s > 0
    assert 0 < prof.backward_s < prof.grad_step_s and prof.accumulation == 2
    assert "resnet-tiny" in prof.source
    with pytest.raises(UserInputError, match="'seq_len'"):
        cm.measure_compute("gptneo-tiny", batch_size=2)
    with pytest.raises(UserInputError, match="unknown model"):
        cm.measure_compute("vgg", batch_size=2)


# ----------------------------------------------------------------------------- acceptance


@pytest.mark.distributed
def test_emulated_link_check_counts_and_model():
    """Issue 5's check on 2 gloo processes with an emulated slow link (60 ms + 80 ns/byte per
    all-reduce), asserted on counts and on the model, never on seconds (issue 21: a loaded
    machine moves wall-clock by tens of percent; the 15% accuracy target is
    ``benchmarks/bench_costmodel.py``). Each run made exactly the steps, pulls and syncs of
    the exact step trace (checked inside the check), and, since a sleep is never shorter
    than asked, the measured time and the modelled communication are at least the
    injected delays."""
    configs = {
        "ddp": {"name": "ddp", "T": 8},
        "local_sgd": {"name": "local_sgd", "H": 4, "T": 16},
        "palsgd": {"name": "palsgd", "H": 4, "p": 0.3, "eta": 1.0, "seed": 3, "T": 16},
    }
    out = cm.emulated_link_check(configs)
    runs = out["runs"]
    assert set(runs) == set(configs)
    nbytes = {k: r["param_bytes"] for k, r in runs.items()}
    for name, r in runs.items():
        T = configs[name]["T"]
        calls = T if name == "ddp" else T // configs[name]["H"]
        injected = calls * (0.06 + nbytes[name] * 8e-8)
        assert r["steps"] == T
        assert r["measured_s"] >= injected
        assert r["breakdown"]["communication"] >= 0.8 * injected
        assert r["predicted_s"] >= r["breakdown"]["communication"]
    # the calibration found the injected link: never faster than it (a sleep is a floor)
    link = cm.link_from_dict(out["link"])
    assert float(cm.allreduce_time(1e6, 2, link)) >= 0.8 * (0.06 + 1e6 * 8e-8)
    # PALSGD skipped gradient steps and waited at syncs for the worker with more of them
    pal = runs["palsgd"]["breakdown"]
    assert pal["pull_compute"] > 0 and pal["straggler_wait"] > 0
    assert out["injected"] == {"delay_s": 0.06, "delay_per_byte_s": 8e-8}


@pytest.mark.slow
@pytest.mark.distributed
def test_measure_allreduce_sees_the_injected_link(capsys):
    sizes = [4096, 1 << 20]
    meas = cm.measure_allreduce(sizes, repeats=3, trials=2, delay_s=0.02, delay_per_byte_s=4e-8)
    assert [m[0] for m in meas] == sizes and all(m[1] == 2 for m in meas)
    for n, _, t in meas:
        assert t >= 0.02 + n * 4e-8
    link = cm.calibrate_link(meas)
    assert link.bandwidth_Bps == pytest.approx(1 / 4e-8, rel=0.3)
    local = cm.CLUSTER_PROFILES["cpu-gloo-local"]
    assert local.K == 2 and local.link.bandwidth_Bps > 1e6 and "calibrated" in local.source
    assert cm.CLUSTER_PROFILES["cpu-gloo-local"] is local  # measured once per process
    assert cli_main(["cost", "calibrate", "--sizes", "4096", "1048576", "--repeats", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["link"]["bandwidth_Bps"] > 0
