"""Tests of empirical.probe: estimators against exact constants, the checker integration,
the CLI.

Exact constants come from a linear least-squares model (float64 ``nn.Linear``) with
per-sample loss ``l_i(theta) = (z_i^T theta - y_i)^2 / 2``, ``z_i = (x_i, 1)``: per-sample
gradient ``r_i z_i`` with residual ``r_i``, Hessian ``Z^T Z / N`` (the same for every
theta), shard gradients, per-shard variances and heterogeneity in closed form (numpy).
The Hessian-vector power iteration is also checked against ``torch.linalg.eigvalsh`` of
the explicit Hessian of a small tanh MLP (not quadratic: the Hessian depends on the point).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from empirical import probe as P
from palsgd.cli import main as cli_main

K, NK, D = 3, 40, 4  # shards, samples per shard, features


# ----------------------------------------------------------------------------- fixtures
def _ls_loss(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return 0.5 * (model(x).squeeze(-1) - y) ** 2


@pytest.fixture(scope="module")
def ls():
    """Least-squares data with heterogeneous shards, a point theta and every exact constant."""
    rng = np.random.default_rng(7)
    N = K * NK
    X = rng.normal(size=(N, D)) * np.array([2.0, 1.0, 0.5, 0.25])
    shift = np.repeat(np.array([-1.5, 0.0, 2.0]), NK)  # shard-dependent targets: zeta > 0
    X[:, 0] += 0.3 * shift
    y = X @ np.array([1.0, -2.0, 0.5, 3.0]) + shift + rng.normal(scale=0.7, size=N)
    model = nn.Linear(D, 1).double()
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.3, 0.1, -0.4, 0.2]]))
        model.bias.fill_(0.5)
    theta = np.concatenate([model.weight.detach().numpy().ravel(), model.bias.detach().numpy()])
    Z = np.hstack([X, np.ones((N, 1))])
    r = Z @ theta - y
    G = r[:, None] * Z  # per-sample gradients
    shards = [np.arange(k * NK, (k + 1) * NK) for k in range(K)]
    gk = np.stack([G[s].mean(0) for s in shards])
    g = gk.mean(0)
    exact = {
        "L": float(np.max(np.abs(np.linalg.eigvalsh(Z.T @ Z / N)))),
        "top_vector": np.linalg.eigh(Z.T @ Z / N)[1][:, -1],
        "sigma2_shards": [float(((G[s] - gk[k]) ** 2).sum(1).mean()) for k, s in enumerate(shards)],
        "sigma2_pooled": float(((G - g) ** 2).sum(1).mean()),
        "zeta2": float(((gk - g) ** 2).sum(1).mean()),
        "grad_norm_sq": float(g @ g),
        "loss": float(np.mean(0.5 * r**2)),
        "G": G,
    }
    ds = TensorDataset(torch.tensor(X), torch.tensor(y))
    return {"model": model, "dataset": ds, "shards": shards, "theta": theta, "exact": exact}


def _problem(ls) -> P.ProbeProblem:
    return P.ProbeProblem(ls["model"], ls["dataset"], _ls_loss, ls["shards"])


def _point(ls, iid: bool, **kw) -> P.PointEstimate:
    prob = _problem(ls)
    settings = P.ProbeSettings(**kw)
    plan = P.make_plan(prob.shards, settings, iid=iid)
    est, _, _ = P.estimate_point(
        prob, plan, settings, step=0, generator=torch.Generator().manual_seed(settings.seed)
    )
    return est


# ----------------------------------------------------------------------------- exact mode
@pytest.mark.parametrize("iid", [False, True])
def test_every_sample_used_gives_the_exact_constants(ls, iid):
    """Probe set = shards and one gradient per sample: no sampling error is left."""
    ex = ls["exact"]
    est = _point(
        ls,
        iid,
        samples=K * NK,
        max_samples=K * NK,
        hvp_samples=K * NK,
        hvp_iters=3000,
        hvp_tol=1e-13,
    )
    assert est.loss == pytest.approx(ex["loss"], rel=1e-12)
    assert est.loss_se == 0.0
    assert est.sigma2_shards == pytest.approx(ex["sigma2_shards"], rel=1e-10)
    for ci, v in zip(est.sigma2_shards_ci, ex["sigma2_shards"], strict=True):
        assert ci == pytest.approx([v, v], rel=1e-10)  # nothing left to estimate
    expected_s1 = ex["sigma2_pooled"] if iid else max(ex["sigma2_shards"])
    assert est.sigma2_sample == pytest.approx(expected_s1, rel=1e-10)
    assert est.zeta2 == pytest.approx(ex["zeta2"], rel=1e-10)
    assert est.zeta2_noise == 0.0
    assert est.grad_norm_sq == pytest.approx(ex["grad_norm_sq"], rel=1e-10)
    assert est.L_power == pytest.approx(ex["L"], rel=1e-8)
    assert est.L_rayleigh == pytest.approx(ex["L"], rel=1e-8)  # PSD: dominant one positive
    assert est.L_converged and est.L_residual < 1e-5


def test_pooled_variance_decomposes_into_shard_noise_and_heterogeneity(ls):
    """Law of total variance for equal shards: pooled = mean_k sigma_k^2 + zeta^2."""
    ex = ls["exact"]
    a = _point(ls, True, samples=K * NK, max_samples=K * NK, hvp_iters=1)
    assert a.sigma2_sample == pytest.approx(np.mean(ex["sigma2_shards"]) + ex["zeta2"], rel=1e-10)


def test_step_noise_matches_monte_carlo_minibatches(ls):
    """sigma_step^2 = sigma_1^2 (N - b)/(b (N - 1)): the variance of the mean gradient of b
    samples drawn without replacement from a shard, as the trainer draws them."""
    ex, b = ls["exact"], 8
    est = _point(ls, False, samples=K * NK, max_samples=K * NK, hvp_iters=1, step_batch=b)
    kmax = int(np.argmax(ex["sigma2_shards"]))
    s = ls["shards"][kmax]
    G = ex["G"][s]
    rng = np.random.default_rng(3)
    draws = np.stack([G[rng.choice(NK, size=b, replace=False)].mean(0) for _ in range(40000)])
    mc = float(((draws - G.mean(0)) ** 2).sum(1).mean())
    assert est.sigma2_step == pytest.approx(mc, rel=0.03)
    assert est.sigma2_step == pytest.approx(est.sigma2_sample * (NK - b) / (b * (NK - 1)))


# ----------------------------------------------------------------------------- sampled mode
def test_sigma2_standard_errors_and_confidence_intervals(ls):
    """Over seeds (30 of 40 samples per shard, so the finite-population factor halves the
    standard error): the reported standard error matches the spread of the estimates, and
    the t-intervals cover the exact per-shard and pooled variances about as often as their
    level says."""
    ex = ls["exact"]
    reps, level = 100, 0.9
    q = P._t_quantile(level, 29)
    hits_shard = hits_pool = 0
    values, ses = [], []
    for seed in range(reps):
        est = _point(
            ls, True, samples=K * 30, max_samples=K * NK, hvp_iters=1, confidence=level, seed=seed
        )
        for ci, v in zip(est.sigma2_shards_ci, ex["sigma2_shards"], strict=True):
            hits_shard += ci[0] <= v <= ci[1]
        lo, hi = est.sigma2_sample_ci
        hits_pool += lo <= ex["sigma2_pooled"] <= hi
        values.append(est.sigma2_shards[0])
        ses.append((est.sigma2_shards_ci[0][1] - est.sigma2_shards[0]) / q)
    assert np.mean(values) == pytest.approx(
        ex["sigma2_shards"][0], abs=4 * np.std(values) / math.sqrt(reps)
    )
    assert 0.8 < math.sqrt(np.mean(np.square(ses))) / np.std(values, ddof=1) < 1.25
    # nominal 90%; t-intervals on heavy-tailed squared norms undercover a little
    assert 0.75 < hits_shard / (reps * K) < 0.99
    assert 0.75 < hits_pool / reps <= 1.0


def test_zeta_noise_correction_removes_the_bias_of_subsampled_shards(ls):
    """With m_k = 20 of |S_k| = 40 the raw heterogeneity is biased up by
    (1 - 1/K) mean_k v_k; the corrected one is unbiased (averaged over seeds), and so is
    ||grad f||^2."""
    ex = ls["exact"]
    raw, corr, gn = [], [], []
    for seed in range(120):
        est = _point(ls, False, samples=K * 10, max_samples=K * 20, hvp_iters=1, seed=seed)
        raw.append(est.zeta2_raw)
        corr.append(est.zeta2_raw - est.zeta2_noise)  # unclipped
        gn.append(est.grad_norm_sq_raw - est.grad_norm_sq_noise)

    def se(a):
        return np.std(a, ddof=1) / math.sqrt(len(a))

    assert abs(np.mean(corr) - ex["zeta2"]) < 3 * se(corr)
    assert np.mean(raw) - ex["zeta2"] > 3 * se(raw)  # the bias is real
    assert abs(np.mean(gn) - ex["grad_norm_sq"]) < 3 * se(gn)


# ----------------------------------------------------------------------------- curvature
def _mlp_problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(24, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (24,), generator=g)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()

    def loss(m, batch):
        return nn.functional.cross_entropy(m(batch[0]), batch[1], reduction="none")

    return P.ProbeProblem(model, TensorDataset(X, y), loss, [np.arange(24)])


def _explicit_hessian(prob: P.ProbeProblem) -> torch.Tensor:
    names = [n for n, p in prob.model.named_parameters() if p.requires_grad]
    shapes = [p.shape for p in prob.params]
    batch = prob.batch(np.arange(len(prob.dataset)))

    def f(flat):
        parts, pos = {}, 0
        for n, s in zip(names, shapes, strict=True):
            k = int(np.prod(s))
            parts[n] = flat[pos : pos + k].view(s)
            pos += k
        out = torch.func.functional_call(prob.model, parts, (batch[0],))
        return nn.functional.cross_entropy(out, batch[1])

    return torch.autograd.functional.hessian(f, P.get_flat(prob.model).clone())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_power_iteration_matches_eigvalsh_of_the_explicit_hessian(seed):
    prob = _mlp_problem(seed)
    H = _explicit_hessian(prob)
    eig = torch.linalg.eigvalsh(H)
    top = eig[eig.abs().argmax()]
    hvp = P.make_hvp(prob, np.arange(24))
    v = torch.randn(prob.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    assert torch.allclose(hvp(v), H @ v, atol=1e-10)
    res = P.power_iteration(
        hvp, prob.dim, iters=5000, tol=1e-14, generator=torch.Generator().manual_seed(seed)
    )
    assert res.norm == pytest.approx(float(top.abs()), rel=1e-6)
    assert math.copysign(1, res.rayleigh) == math.copysign(1, float(top))
    # every iterate is a lower estimate: ||Hv|| <= ||H||_2 for unit v, non-decreasing
    hist = np.array(res.history)
    assert np.all(hist <= float(top.abs()) * (1 + 1e-9))
    assert np.all(np.diff(hist) >= -1e-9 * hist[1:])


class _Branchy(nn.Module):
    """Data-dependent control flow: torch.func.vmap cannot trace it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2).double()

    def forward(self, x):
        out = self.lin(x)
        return out if float(x.sum()) > 0 else -out


def test_per_sample_gradients_vmap_and_loop_agree():
    prob = _mlp_problem(0)
    idx = np.array([3, 0, 7, 11, 20])
    loop = torch.stack([P.sample_gradient(prob, int(i)) for i in idx])
    vec = P.per_sample_gradients(prob, idx, chunk_size=2)
    assert prob.vmap_ok is True
    assert torch.allclose(vec, loop, atol=1e-12)
    branchy = P.ProbeProblem(_Branchy(), prob.dataset, prob.sample_loss, [np.arange(24)])
    got = P.per_sample_gradients(branchy, idx)
    assert branchy.vmap_ok is False  # fell back to the loop
    assert torch.allclose(got, torch.stack([P.sample_gradient(branchy, int(i)) for i in idx]))


def test_chunked_hvp_equals_one_graph():
    prob = _mlp_problem(0)
    v = torch.randn(prob.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    one = P.make_hvp(prob, np.arange(24), chunk_size=64)(v)
    many = P.make_hvp(prob, np.arange(24), chunk_size=5)(v)
    assert torch.allclose(one, many, atol=1e-12)


def test_secants_along_a_path(ls):
    """For a quadratic the secant is ||H dx||/||dx|| <= L, with equality along the top
    eigenvector; probe_points reports it between consecutive points."""
    ex = ls["exact"]
    prob = _problem(ls)
    x0 = torch.tensor(ls["theta"])
    u = torch.tensor(ex["top_vector"])
    w = torch.tensor(np.random.default_rng(0).normal(size=D + 1))
    pts = [(0, "a", x0), (1, "b", x0 + 0.3 * u), (2, "c", x0 + 0.3 * u + 0.5 * w)]
    settings = P.ProbeSettings(
        samples=K * NK, max_samples=K * NK, hvp_samples=K * NK, hvp_iters=500, hvp_tol=1e-12
    )
    res = P.probe_points(prob, pts, settings, iid=False)
    assert res.points[0].L_secant is None
    assert res.points[1].L_secant == pytest.approx(ex["L"], rel=1e-9)
    assert res.points[2].L_secant <= ex["L"] * (1 + 1e-9)
    assert res.points[1].distance_to_previous == pytest.approx(0.3)
    assert res.estimates["L"]["value"] == pytest.approx(ex["L"], rel=1e-6)
    assert res.estimates["zeta2"]["value"] > 0  # non-i.i.d.: the measured value is fed


def test_f0_and_measured_rate(ls):
    prob = _problem(ls)
    x0 = torch.tensor(ls["theta"])
    pts = [(0, "a", x0), (10, "b", x0 * 0.5), (30, "c", x0 * 0.1)]
    settings = P.ProbeSettings(samples=K * NK, max_samples=K * NK, hvp_iters=2, f_lower=0.0)
    res = P.probe_points(prob, pts, settings, iid=True)
    f0 = res.estimates["F0"]
    assert f0["f_x0"] == pytest.approx(ls["exact"]["loss"], rel=1e-12)
    assert f0["lower_bound"] == pytest.approx(f0["f_x0"])
    assert f0["reference"] == pytest.approx(f0["f_x0"] - min(p.loss for p in res.points))
    assert res.estimates["zeta2"]["value"] == 0.0  # i.i.d.: zeta = 0 by construction
    a, b, c = (p.grad_norm_sq for p in res.points)
    rate = P.measured_rate(res.points, T=40)
    assert rate["value"] == pytest.approx((10 * a + 20 * b + 10 * c) / 40)
    late = P.measured_rate(res.points, T=40, T0=5)  # the warm-up point is not used
    assert late["covered"] == [10, 40]
    assert late["value"] == pytest.approx((20 * b + 10 * c) / 30)
    assert P.measured_rate(res.points, T=5, T0=1) is None


def test_lm_sample_losses_match_compute_loss_and_vmap_works_on_gptneo():
    from torch.utils.data import default_collate

    from empirical.data import build_dataset
    from empirical.models import build_model, compute_loss

    ds = build_dataset("embedded-text", split="train", seq_len=16)
    model = build_model("gptneo-tiny", vocab_size=ds.vocab_size, seed=0).eval()
    batch = default_collate([ds[i] for i in range(5)])
    per = P.lm_sample_losses(model, batch).detach()
    assert per.shape == (5,)
    want = float(compute_loss(model, batch, "lm").detach())
    assert float(per.mean()) == pytest.approx(want, rel=1e-5)
    prob = P.ProbeProblem(model, ds, P.lm_sample_losses, [np.arange(5)])
    idx = np.arange(3)
    vec = P.per_sample_gradients(prob, idx)
    assert prob.vmap_ok is True
    loop = torch.stack([P.sample_gradient(prob, int(i)) for i in idx])
    assert torch.allclose(vec, loop, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- theory
def _estimates(L=2.0, sigma2=0.5, zeta2=0.0, F0=3.0):
    return {
        "L": {"value": L},
        "sigma2": {"value": sigma2},
        "zeta2": {"value": zeta2},
        "F0": {"lower_bound": F0},
    }


def test_checker_integration_gives_condition_verdicts():
    alg = {
        "name": "local_sgd",
        "H": 4,
        "p": 0.0,
        "eta": 0.0,
        "T0": 0,
        "outer": "average",
        "gamma": 1.0,
        "mu": 0.0,
    }
    values = P.theory_values(_estimates(), K=2, T=1000, alpha=0.01, algorithm=alg)
    assert values == {
        "L": 2.0,
        "sigma": math.sqrt(0.5),
        "zeta": 0.0,
        "F0": 3.0,
        "K": 2,
        "T": 1000,
        "alpha": 0.01,
        "H": 4,
        "gamma": 1.0,
        "mu": 0.0,
    }
    out = P.compare_with_theory(values, 0.05, algorithm="local_sgd")
    comp = {c["bound"]: c for c in out["comparison"]}
    c = comp["local_sgd_iid"]
    assert c["status"] == "evaluated" and c["conditions_hold"] is True
    assert c["conditions"] and all(isinstance(x["holds"], bool) for x in c["conditions"])
    assert c["ratio"] == pytest.approx(0.05 / c["value"])
    # the initial-gap term is 99.08% of this bound: below it, but vacuous (its own tests:
    # tests/test_probe_vacuity.py)
    assert c["verdict"].startswith("vacuous (its F0 term") and c["vacuity"]["vacuous"]
    above = P.compare_with_theory(values, 10 * c["value"], algorithm="local_sgd")
    c2 = {x["bound"]: x for x in above["comparison"]}["local_sgd_iid"]
    assert "ABOVE" in c2["verdict"]
    # a step that breaks the conditions: the verdict says the bound does not apply
    bad = P.compare_with_theory({**values, "alpha": 1.0}, 0.05, algorithm="local_sgd")
    c3 = {x["bound"]: x for x in bad["comparison"]}["local_sgd_iid"]
    assert c3["conditions_hold"] is False and c3["verdict"].startswith("conditions fail")
    # outside the theory: the numbers are shown as an indication, and the checker warns
    ind = P.compare_with_theory(values, 0.05, algorithm="local_sgd", outside=["inner AdamW"])
    c4 = {x["bound"]: x for x in ind["comparison"]}["local_sgd_iid"]
    assert "indication" in c4["verdict"] and c4["value"] == pytest.approx(c["value"])
    assert any("inner AdamW" in w for w in ind["warnings"])


def test_theory_scope_names_what_is_outside():
    from empirical.config import resolve_config
    from empirical.train import algorithm_config

    inside = resolve_config(
        overrides=dict(
            optimizer="sgd",
            weight_decay=0.0,
            outer="average",
            gamma=1.0,
            mu=0.0,
            clip_grad_norm=None,
        )
    )
    assert P.theory_scope(inside, algorithm_config(inside).to_dict()) == []
    faithful = resolve_config(
        preset="gptneo-8m-readme-faithful",
        overrides={"model": "gptneo-tiny", "dataset": "embedded-text"},
    )
    text = " ".join(P.theory_scope(faithful, algorithm_config(faithful).to_dict()))
    for word in (
        "AdamW",
        "weight decay",
        "clipping",
        "nesterov",
        "shared coins",
        "first parameter tensor",
        "discard",
        "outer steps per sync",
        "sync offset",
    ):
        assert word in text, word
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Dropout(0.1))
    text = " ".join(P.theory_scope(inside, algorithm_config(inside).to_dict(), model))
    assert "BatchNorm" in text and "dropout" in text and "buffer policy" not in text
    text = " ".join(P.theory_scope(faithful, algorithm_config(faithful).to_dict(), model))
    assert "buffer policy 'anchor'" in text


def test_settings_reject_bad_values():
    from core.errors import UserInputError

    for bad in (
        {"samples": 1},
        {"confidence": 1.0},
        {"hvp_iters": 0},
        {"hvp_tol": -1},
        {"f_lower": math.inf},
        {"seed": -1},
    ):
        with pytest.raises(UserInputError, match=next(iter(bad))):
            P.ProbeSettings(**bad)


# ----------------------------------------------------------------------------- CLI
QUICK = [
    "--samples",
    "4",
    "--max-samples",
    "24",
    "--hvp-samples",
    "6",
    "--hvp-iters",
    "3",
    "--no-progress",
]


@pytest.fixture(scope="module")
def quick_probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    code = cli_main(
        ["probe", "--nproc", "1", "--steps", "8", "--points", "3", "--out", str(out), *QUICK]
    )
    return code, out


def test_cli_quick_run_writes_documented_fields(quick_probe, capsys):
    code, out = quick_probe
    assert code == 0
    rep = json.loads((out / "probe.json").read_text())
    for key in (
        "probe_version",
        "source",
        "objective",
        "settings",
        "points",
        "estimates",
        "measured_rate",
        "theory",
        "seconds",
    ):
        assert key in rep, key
    assert [p["step"] for p in rep["points"]] == [0, 4, 8]
    for key in ("L", "sigma2", "zeta2", "F0"):
        assert key in rep["estimates"]
    assert rep["estimates"]["F0"]["fed"] == "lower_bound"
    assert rep["estimates"]["sigma2"]["step_batch"] == 8  # A * B of the trained run
    assert rep["measured_rate"]["covered"] == [0, 8]
    assert rep["theory"]["inside_theory"] is True
    assert rep["theory"]["values"]["K"] == 1 and rep["theory"]["values"]["p"] == 0.2
    for p in rep["points"]:
        assert p["loss"] > 0 and p["L_power"] > 0 and p["sigma2_step"] > 0
    with open(out / "points.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == P.POINT_FIELDS and len(rows) == 3


def test_cli_probes_an_existing_run_as_json(quick_probe, tmp_path, capsys):
    _, out = quick_probe
    capsys.readouterr()
    code = cli_main(
        [
            "probe",
            "--run",
            str(out / "run"),
            "--points",
            "2",
            "--out",
            str(tmp_path),
            "--json",
            *QUICK,
        ]
    )
    assert code == 0
    rep = json.loads(capsys.readouterr().out)
    assert [p["step"] for p in rep["points"]] == [0, 8]
    assert Path(tmp_path / "probe.json").is_file()


def test_cli_local_sgd_run_is_set_against_the_local_sgd_bounds(tmp_path, capsys):
    """End to end through the checker: a Local SGD run inside the theory gets condition
    verdicts, bound values and the measured/bound ratio for every Local SGD bound."""
    cfg = tmp_path / "local.json"
    cfg.write_text(
        json.dumps(
            {
                "algorithm": "local_sgd",
                "optimizer": "sgd",
                "alpha": 0.01,
                "weight_decay": 0.0,
                "outer": "average",
                "gamma": 1.0,
                "mu": 0.0,
                "clip_grad_norm": None,
                "p": 0.0,
                "eta": 0.0,
                "T0": 0,
                "H": 4,
            }
        )
    )
    code = cli_main(
        [
            "probe",
            "--nproc",
            "1",
            "--steps",
            "8",
            "--points",
            "2",
            "--train-config",
            str(cfg),
            "--out",
            str(tmp_path / "out"),
            *QUICK,
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    rep = json.loads((tmp_path / "out" / "probe.json").read_text())
    th = rep["theory"]
    assert th["inside_theory"] is True and th["algorithm"] == "local_sgd"
    comp = {c["bound"]: c for c in th["comparison"]}
    from theory.bounds import all_bounds

    local_bounds = {b.name for b in all_bounds() if "local_sgd" in b.algorithms}
    assert {"local_sgd_iid", "local_sgd_noniid"} <= local_bounds
    assert set(comp) == local_bounds
    for c in comp.values():
        assert c["status"] == "evaluated" and isinstance(c["conditions_hold"], bool)
        assert c["conditions"] and c["verdict"]
        assert c["ratio"] == pytest.approx(rep["measured_rate"]["value"] / c["value"])
    assert "measured vs bound:" in text and "local_sgd_iid" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["--run", "/nonexistent/run"],
        ["--model", "no-such-model"],
        ["--dataset", "no-such-data"],
        ["--run", ".", "--model", "gptneo-tiny"],
        ["--points", "0"],
        ["--samples", "1"],
        ["--nproc", "0"],
    ],
)
def test_bad_input_exits_2(argv, capsys, tmp_path):
    code = cli_main(["probe", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("palsgd probe: error:") and "Traceback" not in err
