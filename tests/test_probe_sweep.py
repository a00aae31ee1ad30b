"""``palsgd probe --sweep``: the measured dependence on H against a known one.

On a heterogeneous quadratic (:class:`theory.moments.MatrixQuadratic`: shared ``A``,
worker centres ``b_k``, additive noise) PALSGD's ``(1/T) sum_t E||grad f(xbar_t)||^2``
grows with ``H`` through the drift (pulls of workers that drifted apart move ``xbar``), and
:func:`theory.moments.exact_moments` computes that growth exactly. The sweep's seeded runs
must recover it: the exact change inside the measured interval, the exact exponent inside
the exponent's interval, verdict ``agrees``; against a prediction with the wrong shape or
size the verdict must say so. The default sizes are tiny; the long run is ``slow``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from core.errors import UserInputError
from empirical.probe.sweep import SweepSpec, parse_sweep, run_sweep, write_sweep
from empirical.probe.sweep_fit import ChangeFit, compare_change, fit_change, fit_exponent
from empirical.probe.sweep_run import QuadraticObjective, run_palsgd
from theory.algorithm import AlgorithmSpec
from theory.moments import MatrixQuadratic, exact_moments

A = np.diag([1.0, 0.5, 0.25, 0.1])
B = np.random.default_rng(0).normal(size=(4, 4)) * 2
X0 = np.full(4, 3.0)
S2 = 0.25  # noise variance per coordinate: sigma^2 = 1
HP = {"p": 0.2, "eta": 1.0, "alpha": 0.2}


def _exact(T: int):
    quad = MatrixQuadratic(A, B, noise=S2, x0=X0)

    def predict(hp):
        spec = AlgorithmSpec.of(
            "palsgd", H=int(hp["H"]), p=hp["p"], eta=hp["eta"], alpha=hp["alpha"]
        )
        return exact_moments(quad, spec, T=int(hp.get("T", T))).mean_grad_norm_sq(), {}

    return predict


def _sweep(seeds: int, T: int, values=(1, 2, 4, 8), prediction=None, name="the exact curve"):
    spec = SweepSpec("H", tuple(values), seeds, T, 1, 1, **HP)
    obj = QuadraticObjective(A, B, S2, X0)
    return run_sweep(obj, spec, {}, prediction=prediction or _exact(T), prediction_name=name)


def test_runs_match_the_exact_moments():
    """The run engine is the algorithm exact_moments computes: mean over seeds within 4 SE."""
    obj = QuadraticObjective(A, B, S2, X0)
    for H in (1, 4):
        rates = [run_palsgd(obj, H=H, T=32, seed=s, **HP).rate for s in range(96)]
        exact = _exact(32)({"H": H, **HP})[0]
        assert abs(np.mean(rates) - exact) < 4 * np.std(rates) / math.sqrt(96)


def test_sweep_recovers_the_exact_h_dependence(tmp_path):
    rep = _sweep(seeds=24, T=32)
    exact = [_exact(32)({"H": h, **HP})[0] for h in (1, 2, 4, 8)]
    change = [e - exact[0] for e in exact[1:]]
    exact_exp = fit_exponent([1, 3, 7], change)
    assert 0.9 < exact_exp < 1.2  # grows about as (H - 1): the noise drift's shape
    dep = rep.dependences[0]
    assert dep.parameter == "H" and dep.predicted_exponent == pytest.approx(exact_exp)
    lo, hi = dep.measured_exponent_ci
    assert lo <= exact_exp <= hi and hi - lo < 0.6
    assert dep.measured_change_ci[0] <= change[-1] <= dep.measured_change_ci[1]
    assert dep.verdict == "agrees", dep.verdict_text
    fit = fit_change((1, 2, 4, 8), _rates(rep))
    # a prediction 5x too large in its change: too pessimistic, by about 5
    v = compare_change(fit, 5 * change[-1], exact_exp, "big")
    assert v.code == "too_pessimistic" and 3 < v.factor < 8
    # a prediction that does not change with H: contradicted
    assert compare_change(fit, 0.0, None, "flat").code == "contradicts"
    # the right change at H = 8 but a (H - 1)^0.3 shape: the measurement grows faster
    shape = compare_change(fit, change[-1], 0.3, "shallow")
    assert shape.code == "contradicts" and "faster" in shape.text
    # the right change at H = 8 and an (H - 1)^3 shape: the intervals cannot say
    assert compare_change(fit, change[-1], 3.0, "steep").code == "undecided"
    paths = write_sweep(rep, tmp_path)
    assert paths["png"].stat().st_size > 1000
    data = json.loads(paths["json"].read_text())
    assert data["dependences"][0]["verdict"] == "agrees" and len(data["rows"]) == 4
    header = paths["csv"].read_text().splitlines()[0].split(",")
    assert header[:4] == ["H", "seeds", "rate", "rate_lo"]


def _rates(rep) -> np.ndarray:
    return np.array([[c.rate for c in rep.curves[k]] for k in ("1", "2", "4", "8")]).T


def test_too_few_seeds_is_undecided():
    """Two seeds: no exponent interval (the jackknife needs three), so at best undecided."""
    fit = ChangeFit(1.0, None, 0.5, (-0.2, 1.2), 2, 0.95)
    assert compare_change(fit, 0.5, 1.0, "the bound").code == "undecided"


def test_sweep_against_the_bound_on_the_quadratic():
    """The registered PALSGD bound at the quadratic's exact constants: its change in H is
    set beside the measured one, term by term (drift terms in the table)."""
    lam = np.linalg.eigvalsh(A)
    consts = {
        "L": float(lam.max()),
        "sigma": math.sqrt(S2 * 4),
        "zeta": math.sqrt(float(np.mean(np.sum(((B - B.mean(0)) @ A) ** 2, 1)))),
        "F0": 0.5 * float(np.mean([(X0 - b) @ A @ (X0 - b) for b in B]))
        - 0.5 * float(np.mean([(B.mean(0) - b) @ A @ (B.mean(0) - b) for b in B])),
    }
    spec = SweepSpec("H", (1, 2, 4), 6, 16, 1, 1, p=0.2, eta=1.0, alpha=0.01)
    rep = run_sweep(QuadraticObjective(A, B, S2, X0), spec, consts)
    dep = rep.dependences[0]
    assert dep.prediction == "the bound" and dep.verdict in (
        "agrees",
        "too_pessimistic",
        "contradicts",
        "undecided",
    )
    assert dep.predicted_change > 0  # the drift terms grow with H
    assert any(k.startswith("term ") and "drift" in k for k in rep.rows[-1])
    assert rep.dependences[1].parameter == "T" and rep.dependences[1].predicted_exponent < 0


@pytest.mark.parametrize(
    "text",
    [
        "H",
        "K=1,2,4",
        "H=1,2",
        "H=1,2,2",
        "H=4,2,1",
        "H=0,1,2",
        "H=1.5,2,3",
        "p=0,0.5,0.9",
        "H=a,b,c",
    ],
)
def test_bad_sweep_specs_name_the_flag(text):
    with pytest.raises(UserInputError, match="--sweep"):
        parse_sweep(text)


def test_parse_sweep():
    assert parse_sweep("H=1,2,4,8") == ("H", (1.0, 2.0, 4.0, 8.0))
    assert parse_sweep("p=0.1,0.3,0.5")[0] == "p"


@pytest.mark.slow
def test_sweep_recovers_the_exact_dependence_over_a_longer_run():
    rep = _sweep(seeds=64, T=128, values=(1, 2, 4, 8, 16))
    assert rep.dependences[0].verdict == "agrees", rep.dependences[0].verdict_text
    lo, hi = rep.dependences[0].measured_exponent_ci
    assert hi - lo < 0.3


def test_model_objective_on_least_squares_is_gradient_descent():
    """The real-model objective on float64 least squares: with the whole shard as the
    batch the runs are deterministic GD on f (p = 0, H = 1), whose ||grad f||^2 numpy gives."""
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset

    from empirical.probe.problem import ProbeProblem
    from empirical.probe.sweep_run import ModelObjective

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(30, 3)), rng.normal(size=30)
    model = nn.Linear(3, 1, bias=False).double()
    with torch.no_grad():
        model.weight.fill_(0.5)
    shards = [np.arange(0, 15), np.arange(15, 30)]

    def loss(m, batch):
        return 0.5 * (m(batch[0]).squeeze(-1) - batch[1]) ** 2

    prob = ProbeProblem(model, TensorDataset(torch.tensor(X), torch.tensor(y)), loss, shards)
    obj = ModelObjective(prob, shards, batch=15)
    curve = run_palsgd(obj, H=1, p=0.0, eta=0.0, alpha=0.1, T=5, seed=0)
    theta, grads = np.full(3, 0.5), []
    for _ in range(5):
        g = np.mean([X[s].T @ (X[s] @ theta - y[s]) / 15 for s in shards], axis=0)
        grads.append(float(g @ g))
        theta = theta - 0.1 * g
    np.testing.assert_allclose(curve.grad_norm_sq, grads, rtol=1e-10)
    assert curve.rate == pytest.approx(np.mean(grads), rel=1e-10)
    assert curve.running == pytest.approx([np.mean(grads[: t + 1]) for t in range(5)], rel=1e-10)


@pytest.mark.slow
def test_cli_sweep_on_the_probed_run(tmp_path, capsys):
    """``palsgd probe --sweep`` end to end on a tiny trained run: the table, the plot and a
    verdict per dependence."""
    from palsgd.cli import main as cli_main

    code = cli_main(
        [
            "probe", "--nproc", "1", "--steps", "8", "--points", "2", "--samples", "4",
            "--max-samples", "24", "--hvp-samples", "6", "--hvp-iters", "3", "--no-progress",
            "--out", str(tmp_path), "--sweep", "H=1,2,4", "--sweep-steps", "4",
            "--sweep-record", "2",
        ]
    )  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "sweep over H" in text and "\n  H: measured exponent" in text
    data = json.loads((tmp_path / "sweep.json").read_text())
    assert [r["H"] for r in data["rows"]] == [1, 2, 4]
    assert {d["parameter"] for d in data["dependences"]} == {"H", "T"}
    assert (tmp_path / "sweep.png").stat().st_size > 1000
    probe = json.loads((tmp_path / "probe.json").read_text())
    assert probe["theory"]["verdict_code"] == "vacuous" and probe["sweep"]["bound"] == "palsgd"
