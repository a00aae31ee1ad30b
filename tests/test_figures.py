"""Tests of paper_figures: the figure functions on fabricated runs (their data files are
checked against numbers that follow from the fabricated curves), the run plan and cache,
the cost-model hooks, and ``palsgd figures`` end to end on a cheap figure and on bad input."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

costmodel = pytest.importorskip("empirical.cost")

from core.errors import UserInputError  # noqa: E402
from palsgd.cli import main  # noqa: E402
from paper_figures import analysis as A  # noqa: E402
from paper_figures import figures as F  # noqa: E402
from paper_figures import runs as R  # noqa: E402
from paper_figures import style  # noqa: E402
from theory import verify as V  # noqa: E402
from theory.algorithm import DISTRIBUTED_NAMES, NAMES, AlgorithmSpec  # noqa: E402

K = 2
PARAMS = 1000
LOG, EVAL = 10, 20
COMPUTE = costmodel.ComputeProfile(
    grad_step_s=0.01, pull_step_s=1e-4, inner_step_s=1e-3, sync_local_s=2e-3
)
LINK = costmodel.LinkProfile("test-link", latency_s=1e-3, bandwidth_Bps=1e6)


# ----------------------------------------------------------------------------- fabrication


def fake_run(
    task: str,
    alg: str,
    losses: list[float],
    *,
    step_time: float,
    H: int = 4,
    p: float = 0.0,
    x=None,
    label: str = "",
    group: str = "main",
    coins: str = "independent",
    outer_steps: int = 1,
    model: str = "gptneo-tiny",
    status: str = "finished",
) -> R.RunData:
    """A run with eval losses ``losses`` at steps 0, 20, 40, ... and ``step_time`` seconds
    of measured wall-clock per step; pulls every 1/p-th step (deterministic)."""
    T = EVAL * (len(losses) - 1)
    train, grad, pull, syncs = [], 0, 0, 0
    every = round(1 / p) if p > 0 else 0
    for t in range(1, T + 1):
        if every and t % every == 0:
            pull += 1
        else:
            grad += 1
        if alg != "ddp" and t % H == 0:
            syncs += 1
        if t % LOG == 0:
            train.append(
                {
                    "step": t,
                    "loss": 1.0,
                    "grad_steps": grad,
                    "pull_steps": pull,
                    "syncs": syncs,
                    "allreduce_calls": grad if alg == "ddp" else syncs,
                    "bytes_communicated": 0,
                    "time_compute_s": 0.0,
                    "time_comm_s": 0.0,
                    "time_pull_s": 0.0,
                    "wall_s": t * step_time,
                    "consensus": None,
                    "lr": 1e-3,
                    "tokens": t,
                }
            )
    evals = [
        {"step": EVAL * i, "eval_loss": v, "wall_s": EVAL * i * step_time, "evaluated": "anchor"}
        for i, v in enumerate(losses)
    ]
    name = {"ddp": "ddp", "local_sgd": "local_sgd", "diloco": "diloco", "palsgd": "palsgd"}[alg]
    algcfg = {"name": name, "H": H, "p": p, "coins": coins, "outer_steps_per_sync": outer_steps}
    summary = {
        "status": status,
        "world_size": K,
        "algorithm": algcfg,
        "totals": {
            "parameters": PARAMS,
            "grad_steps": grad,
            "pull_steps": pull,
            "syncs": syncs,
            "tokens": T,
            "allreduce_calls": syncs,
            "bytes_communicated": 0,
            "time_compute_s": grad * 0.01 + syncs * 0.004,
            "time_sync_s": syncs * 0.005,
            "time_comm_s": syncs * 0.001,
            "time_pull_s": pull * 1e-4,
            "time_inner_step_s": grad * 1e-3,
        },
    }
    return R.RunData(
        name=f"{task}/{alg}" if x is None else f"{task}/{alg}-{x}",
        task=task,
        algorithm=alg,
        label=label or alg,
        config={"model": model, "algorithm": name},
        train=train,
        eval=evals,
        summary=summary,
        status=status,
        directory=None,
        group=group,
        x=x,
    )


#: eval curves (steps 0..200 every 20) and measured seconds per step of the main runs.
#: Target = max over methods of min loss = 2.0 (DDP's and DiLoCo's minimum).
MAIN_LOSSES = {
    "ddp": ([5.0, 4.0, 3.3, 2.9, 2.6, 2.4, 2.2, 2.1, 2.05, 2.0, 2.0], 0.020),
    "local_sgd": ([5.0, 4.1, 3.4, 3.0, 2.7, 2.4, 2.2, 2.0, 1.95, 1.9, 1.9], 0.012),
    "diloco": ([5.0, 4.2, 3.5, 3.1, 2.8, 2.5, 2.3, 2.1, 2.05, 2.0, 2.01], 0.012),
    "palsgd": ([5.0, 4.2, 3.5, 3.1, 2.8, 2.5, 2.2, 1.98, 1.9, 1.85, 1.8], 0.010),
}
PALSGD_P = 0.2


def main_runs(task: str = "lm", model: str = "gptneo-tiny") -> dict[str, R.RunData]:
    return {
        alg: fake_run(
            task, alg, ls, step_time=st, p=PALSGD_P if alg == "palsgd" else 0.0, model=model
        )
        for alg, (ls, st) in MAIN_LOSSES.items()
    }


@pytest.fixture
def cost() -> A.CostSetup:
    return A.CostSetup({"lm": COMPUTE, "img": COMPUTE}, LINK, "fabricated")


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def num(x: str) -> float:
    return float(x) if x not in ("", None) else math.nan


def allreduce_s(nbytes: float) -> float:
    """Ring all-reduce, K = 2: 2(K-1) latency + 2(K-1)/K bytes / bandwidth."""
    return 2 * (K - 1) * LINK.latency_s + 2 * (K - 1) / K * nbytes / LINK.bandwidth_Bps


# ----------------------------------------------------------------------------- analysis


def test_target_and_time_to_target_on_a_known_curve():
    c = A.Curve(
        np.array([0, 20, 40, 60.0]),
        np.array([3.0, 2.5, 2.0, 2.1]),
        np.array([0, 1.0, 2.0, 3.0]),
        np.array([0, 1.5, 3.0, 4.5]),
    )
    other = A.Curve(np.array([0, 20.0]), np.array([3.0, 2.2]), np.zeros(2), np.zeros(2))
    assert A.choose_target({"a": c, "b": other}) == 2.2
    assert A.time_to_target(c, 2.2, "measured") == (2.0, 40.0)
    assert A.time_to_target(c, 2.2, "modelled") == (3.0, 40.0)
    assert A.time_to_target(c, 2.5, "step") == (20.0, 20.0)  # "at or below" the target
    t, s = A.time_to_target(c, 1.0, "measured")
    assert math.isnan(t) and math.isnan(s)
    assert A.reduction(10.0, 8.0) == pytest.approx(0.2)
    assert A.reduction(10.0, 12.0) == pytest.approx(-0.2)
    assert math.isnan(A.reduction(math.nan, 1.0))


def test_modelled_clock_of_a_local_run_matches_the_hand_formula():
    run = fake_run("lm", "local_sgd", [3.0, 2.5, 2.0, 1.8], step_time=0.01, H=4)
    curve = A.curve_of(run, A.CostSetup({"lm": COMPUTE}, LINK))
    # at step s: s gradient steps, s/4 syncs, each sync one all-reduce of 4 bytes/param
    expect = [
        s * COMPUTE.grad_step_s + (s // 4) * (COMPUTE.sync_local_s + allreduce_s(4 * PARAMS))
        for s in (0, 20, 40, 60)
    ]
    np.testing.assert_allclose(curve.modelled_s, expect, rtol=1e-12)
    np.testing.assert_allclose(curve.measured_s, [0, 0.2, 0.4, 0.6])


def test_modelled_clock_counts_the_runs_own_allreduces_with_repeated_outer_steps():
    # this project's trainer takes the extra outer steps of outer_steps_per_sync > 1
    # locally: a sync stays ONE all-reduce (the train records' allreduce_calls = syncs)
    run = fake_run("lm", "diloco", [3.0, 2.5, 2.0, 1.8], step_time=0.01, H=4, outer_steps=4)
    assert all(r["allreduce_calls"] == r["syncs"] for r in run.train)
    curve = A.curve_of(run, A.CostSetup({"lm": COMPUTE}, LINK))
    expect = [
        s * COMPUTE.grad_step_s + (s // 4) * (COMPUTE.sync_local_s + allreduce_s(4 * PARAMS))
        for s in (0, 20, 40, 60)
    ]
    np.testing.assert_allclose(curve.modelled_s, expect, rtol=1e-12)


def test_compute_from_runs_uses_local_runs_timers_and_skips_ddp():
    runs = list(main_runs().values())
    prof = A.compute_from_runs(runs)
    # fabricated: time_compute_s = G*0.01 + S*0.004, sync local = S*(0.005-0.001) = S*0.004
    assert prof.grad_step_s == pytest.approx(0.01)
    assert prof.sync_local_s == pytest.approx(0.004)
    assert prof.pull_step_s == pytest.approx(1e-4)
    assert "ddp" not in prof.source and "palsgd" in prof.source
    with pytest.raises(UserInputError, match="local method"):
        A.compute_from_runs([runs[0]])  # DDP only


# ----------------------------------------------------------------------------- figure 1 and 2


def test_loss_vs_time_data(tmp_path, cost):
    main = {"lm": main_runs(), "img": main_runs("img", "resnet-tiny")}
    res = F.loss_vs_time(main, cost, tmp_path, {"lm": "LM", "img": "Images"})
    assert set(res.files) == {"loss_vs_time.png", "loss_vs_time.pdf"}
    rows = read_csv(tmp_path / "loss_vs_time.csv")
    assert list(rows[0]) == list(F.LOSS_COLUMNS)
    series = {(r["task"], r["algorithm"]) for r in rows}
    assert series == {(t, a) for t in ("lm", "img") for a in MAIN_LOSSES}
    for task, alg in series:
        sel = [r for r in rows if r["task"] == task and r["algorithm"] == alg]
        assert [num(r["eval_loss"]) for r in sel] == MAIN_LOSSES[alg][0]
        for col in ("step", "measured_s", "modelled_s"):
            v = np.array([num(r[col]) for r in sel])
            assert np.all(np.isfinite(v)) and np.all(np.diff(v) > 0), (task, alg, col)
    meta = json.loads((tmp_path / "loss_vs_time.json").read_text())
    assert meta["tasks"]["lm"]["target_loss"] == 2.0
    assert meta["cost_model"]["link"]["name"] == "test-link"
    for f in res.files:
        assert (tmp_path / f).stat().st_size > 1000


def test_time_to_target_data_consistent_with_curves(tmp_path, cost):
    main = {"lm": main_runs()}
    F.loss_vs_time(main, cost, tmp_path)
    res = F.time_to_target_figure(main, cost, tmp_path, {"lm": "LM"}, {"lm": "LM"})
    rows = read_csv(tmp_path / "time_to_target.csv")
    assert list(rows[0]) == list(F.TTT_COLUMNS)
    curves = read_csv(tmp_path / "loss_vs_time.csv")
    ours = [r for r in rows if r["source"] == "this run"]
    assert {r["clock"] for r in ours} == {"measured", "modelled", "step"}
    assert {r["algorithm"] for r in ours} == set(MAIN_LOSSES)
    target = max(min(ls) for ls, _ in MAIN_LOSSES.values())
    col = {"measured": "measured_s", "modelled": "modelled_s", "step": "step"}
    for r in ours:
        assert num(r["target_loss"]) == target
        sel = [c for c in curves if c["algorithm"] == r["algorithm"]]
        first = next(c for c in sel if num(c["eval_loss"]) <= target)
        assert num(r["time_to_target"]) == pytest.approx(num(first[col[r["clock"]]]))
        assert num(r["step_at_target"]) == num(first["step"])
        before = [c for c in sel if num(c["step"]) < num(first["step"])]
        assert all(num(c["eval_loss"]) > target for c in before)
    # measured: DDP reaches 2.0 at step 180 (0.020 s/step), PALSGD at step 140 (0.010 s/step)
    pal = next(r for r in ours if r["algorithm"] == "palsgd" and r["clock"] == "measured")
    assert num(pal["reduction_vs_ddp"]) == pytest.approx(1 - 140 * 0.010 / (180 * 0.020))
    ddp = next(r for r in ours if r["algorithm"] == "ddp" and r["clock"] == "measured")
    assert num(ddp["reduction_vs_ddp"]) == 0.0
    paper = {r["task"]: num(r["reduction_vs_ddp"]) for r in rows if r["source"] == "paper"}
    assert paper == {
        "resnet50-imagenet": 0.184,
        "gptneo-125m-tinystories": 0.244,
        "gptneo-8m-tinystories": 0.211,
    }
    assert res.summary["paper"] == A.PAPER_REDUCTIONS


def test_time_to_target_without_ddp_has_no_reductions(tmp_path, cost):
    runs = main_runs()
    del runs["ddp"]
    F.time_to_target_figure({"lm": runs}, cost, tmp_path)
    rows = [r for r in read_csv(tmp_path / "time_to_target.csv") if r["source"] == "this run"]
    assert {r["algorithm"] for r in rows} == {"local_sgd", "diloco", "palsgd"}
    assert all(r["reduction_vs_ddp"] == "" for r in rows)
    # the target is now the lowest loss of the three remaining methods' minima: DiLoCo's 2.0
    pal = next(r for r in rows if r["algorithm"] == "palsgd" and r["clock"] == "measured")
    assert num(pal["time_to_target"]) == pytest.approx(140 * 0.010)


# ----------------------------------------------------------------------------- attribution


def test_gain_attribution_parts_add_up(tmp_path, cost):
    main = {"lm": main_runs()}
    preds = F.paper_predictions(["8xGPU-NVLink"])
    res = F.gain_attribution(main, cost, tmp_path, {"lm": "LM"}, predictions=preds)
    rows = read_csv(tmp_path / "gain_attribution.csv")
    assert list(rows[0]) == list(F.ATTRIBUTION_COLUMNS)
    scen = {r["scenario"] for r in rows}
    assert {"LM: Local SGD vs DDP", "LM: DiLoCo vs DDP", "LM: PALSGD vs DDP"} <= scen
    assert sum(1 for s in scen if "coins" in s) == 6  # 3 settings x 2 coin modes
    for s in scen:
        sel = [r for r in rows if r["scenario"] == s]
        assert {r["part"] for r in sel} == set(costmodel_parts())
        total = num(sel[0]["total_saving_s"])
        assert sum(num(r["seconds"]) for r in sel) == pytest.approx(total, rel=1e-9, abs=1e-12)
        assert total / num(sel[0]["time_baseline_s"]) == pytest.approx(
            num(sel[0]["time_reduction"])
        )
    # PALSGD's pulls: 1 in 5 steps of 140 (step at target) -> 28 pull steps skip compute
    pal = {r["part"]: num(r["seconds"]) for r in rows if r["scenario"] == "LM: PALSGD vs DDP"}
    assert pal["compute_skipped_on_pulls_s"] == pytest.approx(28 * COMPUTE.grad_step_s)
    assert pal["pull_cost_s"] == pytest.approx(-28 * COMPUTE.pull_step_s)
    paper = {
        r["task"]: num(r["paper_reduction"]) for r in rows if r["kind"] == "paper-scale prediction"
    }
    assert paper == A.PAPER_REDUCTIONS
    assert res.summary


def costmodel_parts() -> list[str]:
    g = costmodel.attribute_gain(
        {"step": [1], "grad_steps": [1], "pull_steps": [0], "syncs": [0]},
        {"step": [1], "grad_steps": [1], "pull_steps": [0], "syncs": [0]},
        compute=COMPUTE,
        link=LINK,
        K=K,
        param_bytes=4.0,
    )
    return list(g["parts_s"])


def test_paper_scale_data(tmp_path):
    res = F.paper_scale(tmp_path)
    rows = read_csv(tmp_path / "paper_scale.csv")
    assert list(rows[0]) == list(F.PAPER_SCALE_COLUMNS)
    profiles = list(costmodel.CLUSTER_PROFILES.static())
    assert len(rows) == 3 * len(profiles) * 2
    assert {r["setting"] for r in rows} == set(A.PAPER_REDUCTIONS)
    assert {r["coins"] for r in rows} == {"shared", "independent"}
    for r in rows:
        assert num(r["paper_reduction"]) == A.PAPER_REDUCTIONS[r["setting"]]
        assert -1 < num(r["predicted_reduction"]) < 1
    # with shared coins nobody waits at a sync, so the prediction is never below independent
    for s in A.PAPER_REDUCTIONS:
        for prof in profiles:
            v = {
                r["coins"]: num(r["predicted_reduction"])
                for r in rows
                if r["setting"] == s and r["profile"] == prof
            }
            assert v["shared"] >= v["independent"] - 1e-12
    meta = json.loads((tmp_path / "paper_scale.json").read_text())
    assert all(p["assumptions"] for p in meta["predictions"])
    assert meta["paper"] == A.PAPER_REDUCTIONS
    assert res.files == ["paper_scale.png", "paper_scale.pdf"]


# ----------------------------------------------------------------------------- sweeps


def test_sensitivity_data(tmp_path, cost):
    sweeps = {
        "H": [
            fake_run(
                "lm",
                "palsgd",
                [5.0, 3.0, 2.5, 2.4],
                step_time=0.01,
                H=h,
                p=0.2,
                x=h,
                group="sweep_H",
            )
            for h in (2, 4)
        ]
        + [
            fake_run(
                "lm",
                "palsgd",
                [5.0, 3.5, 2.9, 2.6],
                step_time=0.01,
                H=16,
                p=0.2,
                x=16,
                group="sweep_H",
            )
        ],
        "p": [
            fake_run("lm", "palsgd", [5.0, 3.0, 2.0], step_time=0.01, p=q, x=q, group="sweep_p")
            for q in (0.0, 0.25)
        ],
    }
    res = F.sensitivity(
        main_runs(), sweeps, cost, tmp_path, defaults={"H": 4, "p": 0.25}, task_label="LM"
    )
    rows = read_csv(tmp_path / "sensitivity.csv")
    assert list(rows[0]) == list(F.SENSITIVITY_COLUMNS)
    assert [(r["parameter"], num(r["value"])) for r in rows] == [
        ("H", 2),
        ("H", 4),
        ("H", 16),
        ("p", 0.0),
        ("p", 0.25),
    ]
    h = [r for r in rows if r["parameter"] == "H"]
    assert {num(r["target_loss"]) for r in h} == {2.6}  # lowest loss every H reaches
    assert [num(r["step_at_target"]) for r in h] == [40, 40, 60]
    assert [num(r["ttt_measured_s"]) for r in h] == pytest.approx([0.4, 0.4, 0.6])
    assert [r["is_default"] for r in rows] == ["False", "True", "False", "False", "True"]
    assert [num(r["final_loss"]) for r in h] == [2.4, 2.4, 2.6]
    assert res.summary["target_loss"]["p"] == 2.0


def test_ablation_data(tmp_path, cost):
    base = fake_run("lm", "palsgd", [5.0, 3.0, 2.2, 2.0], step_time=0.01, p=0.2, x="none")
    variants = [
        fake_run(
            "lm",
            "palsgd",
            [5.0, 3.1, 2.5, 2.3],
            step_time=0.01,
            p=0.2,
            x="shared_coins",
            label="shared coins (Q4)",
            coins="shared",
        ),
        fake_run(
            "lm",
            "palsgd",
            [5.0, 3.2, 2.6, 2.4],
            step_time=0.01,
            p=0.2,
            x="all",
            label="all switches on",
            outer_steps=4,
        ),
    ]
    F.ablation(base, variants, cost, tmp_path, task_label="LM")
    rows = read_csv(tmp_path / "ablation.csv")
    assert list(rows[0]) == list(F.ABLATION_COLUMNS)
    assert [r["switch"] for r in rows] == ["none", "shared_coins", "all"]
    assert [num(r["delta_final_loss_vs_base"]) for r in rows] == pytest.approx([0.0, 0.3, 0.4])
    assert {num(r["target_loss"]) for r in rows} == {2.4}
    assert [num(r["step_at_target"]) for r in rows] == [40, 60, 60]
    # modelled time: 4 outer steps per sync cost no extra all-reduce (taken locally, one
    # all-reduce per sync as in the run's records), and its independent coins make each
    # sync wait for the slower worker (shared coins do not)
    mod = {r["switch"]: num(r["ttt_modelled_s"]) for r in rows}
    syncs = 60 // 4
    excess = costmodel.expected_max_binomial(4, 1 - 0.2, K) - 4 * 0.8
    wait = syncs * excess * (COMPUTE.grad_step_s - COMPUTE.pull_step_s)
    assert excess > 0
    assert mod["all"] - mod["shared_coins"] == pytest.approx(wait, rel=1e-9)
    meta = json.loads((tmp_path / "ablation.json").read_text())
    assert meta["config"]["lm/palsgd-all"]["outer_steps_per_sync"] == 4


# ----------------------------------------------------------------------------- theory


def _fake_report(d: Path) -> Path:
    d.mkdir()
    (d / "results.json").write_text("{}")

    def write(name, cols, rows):
        with open(d / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(cols))
            w.writeheader()
            for r in rows:
                w.writerow({c: r.get(c, "") for c in cols})

    write(
        "results.csv",
        V.RESULTS_COLUMNS,
        [
            {
                "bound": "sgd",
                "measured_mean": 0.1,
                "lcb": 0.09,
                "ucb": 0.11,
                "bound_value": 0.3,
                "verdict": "holds",
            },
            {
                "bound": "sgd",
                "measured_mean": 0.5,
                "lcb": 0.4,
                "ucb": 0.6,
                "bound_value": 0.3,
                "verdict": "violated",
            },
            {
                "bound": "sgd",
                "measured_mean": 0.2,
                "lcb": 0.1,
                "ucb": 0.3,
                "bound_value": 0.1,
                "verdict": "outside conditions",
            },
        ],
    )
    write(
        "rates.csv",
        V.RATES_COLUMNS,
        [
            {"bound": b, "T": t, "measured_mean": 1 / t, "bound_value": 2 / t, "fitted_slope": -1}
            for b in ("sgd", "local_sgd_iid")
            for t in (16, 32, 64)
        ],
    )
    write(
        "consensus.csv",
        V.CONSENSUS_COLUMNS,
        [
            {
                "algorithm": a,
                "H": h,
                "consensus_mean": h * (1 if a == "local_sgd" else 0.5),
                "consensus_se": 0.01,
            }
            for a in ("local_sgd", "palsgd")
            for h in (1, 4, 16)
        ],
    )
    write(
        "exact_vs_mc.csv",
        V.EXACT_COLUMNS,
        [
            {
                "algorithm": "sgd",
                "label": "sgd",
                "metric": m,
                "step": s,
                "exact": 1 / (s + 1),
                "mc_mean": 1 / (s + 1),
                "mc_se": 0.01,
                "z": 0,
            }
            for m in ("loss_gap", "consensus")
            for s in range(5)
        ],
    )
    return d


def test_theory_from_a_report(tmp_path):
    rep = _fake_report(tmp_path / "report")
    res = F.theory(rep, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "theory.json").read_text())
    assert data["verdict_counts"] == {"holds": 1, "violated": 1, "outside conditions": 1}
    assert len(data["measured_vs_bound"]) == 3
    assert {r["bound"] for r in data["rates"]} == {"sgd", "local_sgd_iid"}
    assert {r["algorithm"] for r in data["consensus"]} == {"local_sgd", "palsgd"}
    assert all(r["metric"] == "loss_gap" for r in data["exact_vs_mc"])
    assert len(data["exact_vs_mc"]) == 5
    assert res.notes == ["1 configuration(s) violate their bound"]
    # the verifier's own plots, one PNG + PDF each, under OUT/theory/
    panels = ("tightness", "measured_vs_bound", "rates", "consensus_vs_H", "exact_vs_mc")
    assert res.files == [f"theory/{n}.{e}" for n in panels for e in ("png", "pdf")]
    for f in res.files:
        assert (tmp_path / "out" / f).stat().st_size > 1000
    # the CSV cells are read back as numbers (names stay strings)
    assert [r["T"] for r in data["rates"] if r["bound"] == "sgd"] == [16, 32, 64]
    assert {r["verdict"] for r in data["measured_vs_bound"]} == set(data["verdict_counts"])
    with pytest.raises(UserInputError, match="not a palsgd verify report"):
        F.theory(tmp_path, tmp_path / "out2")


# ----------------------------------------------------------------------------- plan and cache


def test_plan_quick_and_paper():
    q = R.plan_runs("quick", R.FIGURES, nproc=2)
    names = [r.name for r in q.runs]
    assert len(names) == len(set(names))
    for task in ("gptneo", "resnet"):
        assert {r.algorithm for r in q.runs if r.task == task and r.group == "main"} == set(
            R.ALGORITHMS
        )
    assert {r.x for r in q.by_group("gptneo", "ablation")} == {"none", "all", *R.ABLATION_SWITCHES}
    assert {r.x for r in q.by_group("gptneo", "sweep_H")} >= {2, 8, 32}
    for r in q.runs:
        cfg = R.resolve_spec(r)
        assert cfg["device"] == "cpu" and cfg["comm_delay_s"] == R.QUICK_LINK["comm_delay_s"]
    p = R.plan_runs("paper", ["loss_vs_time"], nproc=4)
    models = {R.resolve_spec(r)["model"] for r in p.runs}
    assert models == {"gptneo-8m", "gptneo-125m", "resnet50-imagenet", "resnet18-cifar"}
    pal = R.resolve_spec(next(r for r in p.runs if r.name == "gptneo-8m/palsgd"))
    assert (
        pal["H"],
        pal["T0"],
        pal["p"],
        pal["eta"],
        pal["A"],
        pal["batch_size"],
        pal["seq_len"],
        pal["gamma"],
        pal["mu"],
        pal["alpha"],
    ) == (32, 32, 0.2, 1.0, 16, 32, 300, 0.1, 0.9, 0.01)
    problems = R.check_paper_requirements(p, {})
    assert any("tinystories" in x for x in problems) and any("imagenet" in x for x in problems)
    assert not R.plan_runs("quick", ["paper_scale", "theory"]).runs
    with pytest.raises(UserInputError, match="valid figures are"):
        R.plan_runs("quick", ["nope"])
    with pytest.raises(UserInputError, match="valid scales are quick, paper"):
        R.plan_runs("huge", [])


def test_run_key_and_cache(tmp_path):
    spec = R.plan_runs("quick", ["loss_vs_time"]).runs[0]
    cfg = R.resolve_spec(spec)
    key = R.run_key(cfg, 2, "cpu")
    assert key == R.run_key(dict(cfg, output_dir="elsewhere", progress=False), 2, "cpu")
    assert key != R.run_key(dict(cfg, T=cfg["T"] + 1), 2, "cpu")
    assert key != R.run_key(cfg, 3, "cpu")
    d = R.run_directory(tmp_path, spec, key)
    assert R.cached(d, key) is None
    d.mkdir()
    (d / "metrics.jsonl").write_text("")
    (d / "figrun.json").write_text(json.dumps({"key": key, "status": "failed"}))
    assert R.cached(d, key) is None
    (d / "figrun.json").write_text(json.dumps({"key": key, "status": "finished"}))
    assert R.cached(d, key)["status"] == "finished"
    assert R.cached(d, "0" * 16) is None


def test_execute_without_training_names_missing_runs(tmp_path):
    plan = R.plan_runs("quick", ["ablation"], nproc=2)
    with pytest.raises(UserInputError, match="gptneo/palsgd-shared_coins"):
        R.execute(plan, tmp_path, train_missing=False)


def test_execute_trains_once_then_reuses_the_cache(tmp_path):
    """One tiny in-process run (world size 1), then a second call finds it cached."""
    tasks = R.tasks_for("quick")
    t = tasks["gptneo"]
    ov = dict(
        t.base,
        **R.method_overrides(t, "palsgd"),
        T=4,
        eval_interval=2,
        log_interval=2,
        eval_batches=1,
        batch_size=2,
        seq_len=16,
    )
    plan = R.Plan("quick", 1, 0, tasks, [R.RunSpec("gptneo", "palsgd", "palsgd", ov)])
    first = R.execute(plan, tmp_path, progress=False)["gptneo/palsgd"]
    assert first.status == "finished" and not first.cached
    run = R.load_run(first.directory, plan.runs[0])
    assert [r["step"] for r in run.eval] == [0, 2, 4]
    assert run.summary["totals"]["grad_steps"] + run.summary["totals"]["pull_steps"] == 4
    second = R.execute(plan, tmp_path, train_missing=False)["gptneo/palsgd"]
    assert second.cached and second.directory == first.directory


# ----------------------------------------------------------------------------- the command


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--only", "loss_vs_time", "bogus"], "argument --only: invalid choice: 'bogus'"),
        (["--scale", "huge"], "argument --scale: invalid choice: 'huge'"),
        (["--runs-dir", "/nonexistent/runs"], "runs directory '/nonexistent/runs'"),
        (["--verify-report", "/nonexistent/rep"], "verify report '/nonexistent/rep'"),
        (["--data", "mnist=/x"], "unknown data set 'mnist': valid names are tinystories"),
        (["--profile", "toaster"], "argument --profile: invalid choice: 'toaster'"),
    ],
)
def test_bad_input_exits_2(tmp_path, capsys, argv, needle):
    code = main(["figures", "--out", str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_paper_scale_without_gpus_fails_clearly_and_dry_run_prints_the_plan(tmp_path, capsys):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code = main(
        ["figures", "--scale", "paper", "--only", "loss_vs_time", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "CUDA GPU" in err and "--data tinystories=PATH" in err
    code = main(["figures", "--scale", "paper", "--dry-run", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == 0
    assert "gptneo-125m/palsgd" in out and "resnet50-imagenet/ddp" in out
    assert "missing on this machine" in out
    assert not (tmp_path / "o").exists()


def test_no_train_with_empty_runs_dir_names_the_runs(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    code = main(
        [
            "figures",
            "--only",
            "ablation",
            "--no-train",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "gptneo/palsgd-sync_offset" in err


def test_end_to_end_cheap_figure_subprocess(tmp_path):
    out = tmp_path / "figs"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "palsgd",
            "figures",
            "--scale",
            "quick",
            "--only",
            "paper_scale",
            "--out",
            str(out),
            "--seed",
            "7",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            "paper_scale.png",
            "paper_scale.pdf",
            "paper_scale.csv",
            "paper_scale.json",
            "manifest.json",
        ]
    )
    m = json.loads((out / "manifest.json").read_text())
    assert m["scale"] == "quick" and m["seed"] == 7 and m["figures_requested"] == ["paper_scale"]
    assert m["figures"]["paper_scale"]["status"] == "ok"
    assert m["figures"]["paper_scale"]["files"] == ["paper_scale.png", "paper_scale.pdf"]
    assert m["figures"]["paper_scale"]["duration_s"] > 0
    assert {"python", "torch", "numpy", "matplotlib"} <= set(m["versions"])
    assert m["hardware"]["start"]["cpu_count"] >= 1
    assert m["runs"] == {} and "--only paper_scale" in m["command"]
    # a second invocation into the same directory keeps the first one's figure record
    assert (
        main(
            [
                "figures",
                "--only",
                "theory",
                "--verify-report",
                str(_fake_report(tmp_path / "rep")),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    m = json.loads((out / "manifest.json").read_text())
    assert m["figures"]["theory"]["status"] == "ok"
    assert "--only paper_scale" in m["figures"]["paper_scale"]["drawn_by"]


@pytest.mark.slow
def test_quick_scale_draws_every_figure(tmp_path):
    """The whole quick scale on this machine: every figure drawn (its duration is recorded
    in the manifest and printed, not asserted: no wall-clock assertion in the tests)."""
    out = tmp_path / "figs"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "palsgd", "figures", "--out", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert all(f["status"] == "ok" for f in m["figures"].values())
    print(f"quick scale: {m['durations_s']['total']:.0f} s")
    assert all(r["status"] == "finished" for r in m["runs"].values())


def test_every_algorithm_name_has_its_own_colour_and_a_label():
    """Every name of theory.algorithm.NAMES is drawn in a colour of its own (sgd is DDP: the
    same method under its simulator name) and has a label; the run plan's labels are the
    style's."""
    assert set(style.COLORS) == set(NAMES) and set(style.LABELS) == set(NAMES)
    cols = {k: style.color(k) for k in NAMES}
    assert "#888888" not in cols.values()  # no method falls back to the unknown grey
    assert style.color("sgd") == style.color("ddp")
    assert len(set(cols.values())) == len(NAMES) - 1
    assert all(style.label(k) != k for k in NAMES)
    assert R.ALGORITHM_LABELS == {a: style.label(a) for a in R.ALGORITHMS}


@pytest.mark.parametrize("scale", R.SCALES)
def test_planned_methods_are_valid_algorithm_specs(scale):
    """Each planned method's algorithm name and hyperparameters make a valid
    theory.algorithm.AlgorithmSpec (Local SGD with a warm-up is post_local_sgd), and the
    figures draw it as the compared method it stands for."""
    names = set()
    for task in R.tasks_for(scale).values():
        for alg in R.ALGORITHMS:
            ov = R.method_overrides(task, alg)
            name = ov["algorithm"]
            assert name in DISTRIBUTED_NAMES
            assert R.figure_method(name) == alg
            kw = {k: ov[k] for k in ("H", "p", "eta", "outer", "gamma", "mu", "T0")}
            AlgorithmSpec(
                kind="sgd" if name == "ddp" else name,
                alpha=0.1,
                **{k: v for k, v in kw.items() if v is not None},
            )
            names.add(name)
    expected = {"ddp", "diloco", "palsgd"} | {"local_sgd" if scale == "quick" else "post_local_sgd"}
    assert names == expected


def test_cost_setup_falls_back_to_the_runs_it_has(monkeypatch, tmp_path):
    """``--only ablation`` trains no main run: the compute per step is timed from the
    ablation runs instead of failing; with main runs, only those are used."""
    from types import SimpleNamespace

    import paper_figures.cli.command as command

    seen = {}
    monkeypatch.setattr(command, "calibrate", lambda *a, runs, **k: seen.update(runs=runs))
    args = SimpleNamespace(compute_calibration=None, profile="64xGPU-100Gbps")
    abl = [SimpleNamespace(group="ablation", name=f"a{i}", task="gptneo") for i in range(2)]
    main = [SimpleNamespace(group="main", name="m", task="gptneo")]
    loaded = {"a0": "run a0", "a1": "run a1", "m": "run m"}
    figure = sorted(command.COST_FIGURES)[0]
    command._cost_setup(SimpleNamespace(runs=abl, scale="quick"), [figure], loaded, args, tmp_path)
    assert seen["runs"] == {"gptneo": ["run a0", "run a1"]}
    plan = SimpleNamespace(runs=abl + main, scale="quick")
    command._cost_setup(plan, [figure], loaded, args, tmp_path)
    assert seen["runs"] == {"gptneo": ["run m"]}
