"""Tests of the torch backend of theory.simulate (theory.simulate.torch_run)."""

import numpy as np
import pytest
import torch
from test_simulate import CONFIGS

from core.errors import UserInputError
from theory.problems import make_problem
from theory.simulate import AlgorithmSpec, simulate

FIELDS = ("final_x", "anchor", "grad_norm_sq", "loss_gap", "consensus", "anchor_dist")
CUDA = torch.cuda.is_available()
CONFIGS_EASGD = [*CONFIGS, dict(kind="easgd", alpha=0.1, H=3, T0=2)]


def _close(a, b, rtol, atol):
    for f in FIELDS:
        np.testing.assert_allclose(getattr(b, f), getattr(a, f), rtol=rtol, atol=atol, err_msg=f)
    np.testing.assert_array_equal(b.grad_evals, a.grad_evals)
    np.testing.assert_array_equal(b.comm_rounds, a.comm_rounds)
    np.testing.assert_array_equal(b.pull_steps, a.pull_steps)
    np.testing.assert_array_equal(b.steps, a.steps)


@pytest.mark.parametrize("cfg", CONFIGS_EASGD, ids=lambda c: c["kind"])
@pytest.mark.parametrize(
    "pname,noise",
    [("quadratic", "gaussian"), ("cosine", "rademacher"), ("logistic", "finite_sum"),
     ("quadratic", "none")],
)  # fmt: skip
def test_float64_torch_equals_numpy_to_rounding(cfg, pname, noise):
    prob = make_problem(pname, K=3, d=5, noise=noise, zeta=0.0 if noise == "finite_sum" else 0.5)
    spec = AlgorithmSpec(**cfg)
    a = simulate(prob, spec, T=23, R=2, seed=7, record_every=2)
    b = simulate(prob, spec, T=23, R=2, seed=7, record_every=2, backend="torch", noise_rng="numpy")
    _close(a, b, rtol=1e-12, atol=1e-13)


def test_rotated_quadratic_and_generic_problem_match_numpy():
    rot = make_problem("quadratic", K=2, d=4, noise="gaussian", zeta=0.5, rotate=True, seed=1)
    assert rot.A is not None
    robust = make_problem("robust_regression", K=2, d=4, noise="gaussian", zeta=0.5)
    spec = AlgorithmSpec("palsgd", 0.05, H=3, p=0.3, eta=1.0)
    for prob in (rot, robust):
        a = simulate(prob, spec, T=15, R=3, seed=2)
        b = simulate(prob, spec, T=15, R=3, seed=2, backend="torch", noise_rng="numpy")
        _close(a, b, rtol=1e-12, atol=1e-13)


def test_float32_follows_float64():
    prob = make_problem("cosine", K=4, d=50, noise="gaussian", zeta=0.5)
    spec = AlgorithmSpec("palsgd", 0.05, H=4, p=0.25, eta=1.0, outer="nesterov", gamma=0.7, mu=0.5)
    a = simulate(prob, spec, T=40, R=3, seed=5, backend="torch", noise_rng="numpy")
    b = simulate(prob, spec, T=40, R=3, seed=5, backend="torch", noise_rng="numpy", dtype="float32")
    _close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("noise", ["gaussian", "rademacher"])
def test_torch_noise_has_the_declared_variance(noise, dtype):
    prob = make_problem("quadratic", K=2, d=2000, noise=noise, zeta=0.0, sigma=2.0)
    # one SGD step from the minimiser at alpha = 1 moves x by minus the mean noise
    x0 = prob.bbar
    tr = simulate(prob, AlgorithmSpec("local_sgd", 1.0, H=10), T=1, R=50, seed=3, x0=x0,
                  backend="torch", dtype=dtype, noise_rng="torch")  # fmt: skip
    e = (x0 - tr.final_x).reshape(-1, prob.d)  # (R*K, d) single draws
    scale = np.sqrt(prob.sigma2 / prob.d)
    if noise == "rademacher":
        np.testing.assert_allclose(np.abs(e), scale, rtol=1e-12 if dtype == "float64" else 1e-5)
    per_worker = np.sum(e * e, axis=1)
    assert abs(per_worker.mean() / prob.sigma2 - 1) < 0.02
    default = simulate(prob, AlgorithmSpec("local_sgd", 1.0, H=10), T=1, R=50, seed=3, x0=x0)
    if dtype == "float64":  # the default generator on the CPU in float64 is numpy's
        same = simulate(prob, AlgorithmSpec("local_sgd", 1.0, H=10), T=1, R=50, seed=3,
                        x0=x0, backend="torch")  # fmt: skip
        # the same draws; the fused update rounds differently (1e-16 of x, whose entries are
        # O(1)), while another generator's draws would differ by O(scale) = 0.04
        np.testing.assert_allclose(same.final_x, default.final_x, rtol=1e-14, atol=1e-15)
    assert abs(e.mean()) < 5 * scale / np.sqrt(e.size)


def test_torch_noise_is_seeded_and_common_across_algorithms():
    prob = make_problem("quadratic", K=3, d=20, noise="gaussian", zeta=0.5)
    kw = dict(T=12, R=2, backend="torch", dtype="float32")
    p0 = simulate(prob, AlgorithmSpec("palsgd", 0.1, H=4, p=0.0), seed=1, **kw)
    loc = simulate(prob, AlgorithmSpec("local_sgd", 0.1, H=4), seed=1, **kw)
    np.testing.assert_array_equal(p0.final_x, loc.final_x)
    other = simulate(prob, AlgorithmSpec("local_sgd", 0.1, H=4), seed=2, **kw)
    assert not np.allclose(other.final_x, loc.final_x)


def test_backend_errors():
    prob = make_problem("quadratic", K=2, d=3, noise="gaussian")
    fs = make_problem("logistic", K=2, d=3, noise="finite_sum", zeta=0.0)
    spec = AlgorithmSpec("local_sgd", 0.1, H=2)
    with pytest.raises(UserInputError, match="backend"):
        simulate(prob, spec, T=2, R=1, seed=0, backend="jax")
    with pytest.raises(UserInputError, match="backend='torch'"):
        simulate(prob, spec, T=2, R=1, seed=0, dtype="float32")
    with pytest.raises(UserInputError, match="dtype"):
        simulate(prob, spec, T=2, R=1, seed=0, backend="torch", dtype="float16")
    with pytest.raises(UserInputError, match="noise_rng='numpy'"):
        simulate(fs, spec, T=2, R=1, seed=0, backend="torch", noise_rng="torch")
    with pytest.raises(UserInputError, match="device"):
        simulate(prob, spec, T=2, R=1, seed=0, backend="torch", device="tpu")
    if not CUDA:
        with pytest.raises(UserInputError, match="CUDA is not available"):
            simulate(prob, spec, T=2, R=1, seed=0, backend="torch", device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("cfg", CONFIGS_EASGD, ids=lambda c: c["kind"])
def test_cuda_float64_equals_numpy_to_rounding(cfg):
    prob = make_problem("cosine", K=3, d=7, noise="gaussian", zeta=0.5)
    spec = AlgorithmSpec(**cfg)
    a = simulate(prob, spec, T=23, R=2, seed=7)
    b = simulate(prob, spec, T=23, R=2, seed=7, backend="torch", device="cuda", noise_rng="numpy")
    _close(a, b, rtol=1e-11, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("noise", ["gaussian", "rademacher"])
def test_cuda_float32_torch_noise_runs_and_is_seeded(noise):
    prob = make_problem("quadratic", K=4, d=1000, noise=noise, zeta=0.5)
    spec = AlgorithmSpec("palsgd", 0.05, H=4, p=0.2, eta=1.0)
    kw = dict(T=20, R=8, seed=3, backend="torch", device="cuda", dtype="float32")
    a, b = simulate(prob, spec, **kw), simulate(prob, spec, **kw)
    np.testing.assert_array_equal(a.final_x, b.final_x)
    cpu = simulate(prob, spec, T=20, R=8, seed=3)
    np.testing.assert_array_equal(a.pull_steps, cpu.pull_steps)
    assert np.all(np.isfinite(a.grad_norm_sq))


def _rademacher_balance(device):
    from theory.simulate.torch_run import DTYPES, _Noise

    prob = make_problem("quadratic", K=2, d=4096, noise="rademacher", zeta=0.0)
    nz = _Noise(prob, 16, 0, "torch", torch.device(device), DTYPES["float32"])
    e, _ = nz.draw()
    plus = (e > 0).reshape(-1, 8).float().mean(0).cpu().numpy()  # per byte of a random word
    n = e.numel() / 8
    assert np.all(np.abs(plus - 0.5) < 5 * 0.5 / np.sqrt(n)), plus


def test_rademacher_signs_are_balanced_on_every_byte():
    _rademacher_balance("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_rademacher_signs_are_balanced_on_every_byte():
    _rademacher_balance("cuda")


def _steps_on_a_fake_gpu(rank: int, world: int) -> dict:
    """A PALSGD run of the torch backend on a faked GPU (tests/harness), each local step
    inside a sync counter: the syncs and the host-to-device copies of every step."""
    from harness import fake_cuda
    from harness.sync_counter import SyncCounter

    from theory.simulate import torch_run

    fake_cuda.install(1)
    prob = make_problem("quadratic", K=4, d=64, noise="none", zeta=0.5)
    spec = AlgorithmSpec("palsgd", 0.1, H=5, p=0.3, eta=1.0, pull_fraction=0.5)
    runner = torch_run.TorchRun(
        prob, spec, T=600, R=8, seed=1, record_every=50, start=prob.x0(),
        dev=torch_run.resolve_device("cuda"), dt=torch.float32, noise_rng="numpy",
    )  # fmt: skip
    steps: list[dict] = []
    plain = runner.local_step

    def counted(draw, i, do_grad, do_pull):
        with SyncCounter() as c:
            plain(draw, i, do_grad, do_pull)
        steps.append({"fresh": runner.coins.fresh, "pull": do_pull, "syncs": c.calls,
                      "copies": c.copies})  # fmt: skip
        return None

    runner.local_step = counted
    trace, runner.trace = runner.trace, lambda: None  # the final copy to the host: after
    with SyncCounter() as whole:  # the records, the syncs, every step
        runner.run(False, "fake gpu")
    trace()
    return {"steps": steps, "fused": runner.fused is not None, "run_syncs": whole.calls}


def test_local_steps_neither_wait_for_nor_copy_to_a_gpu():
    """On a (faked) GPU a local step reads nothing back and copies nothing from the host: the
    pulled rows' indices of a chunk of coins move once, asynchronously, at the chunk's first
    step; the fused update runs (diagonal quadratic). The whole run up to the trace (the
    records every 50 steps, the syncs) waits for the GPU nowhere."""
    from empirical.distributed import spawn_workers

    (res,) = spawn_workers(_steps_on_a_fake_gpu, 1, timeout_s=120)
    steps = res["steps"]
    assert res["fused"] and len(steps) == 600 and sum(s["pull"] for s in steps) > 500
    assert [s["syncs"] for s in steps if s["syncs"]] == [] and res["run_syncs"] == []
    fresh = [s for s in steps if s["fresh"]]
    assert len(fresh) >= 2  # several chunks of coins
    assert all(s["copies"] == [] for s in steps if not s["fresh"])
    copies = [c for s in fresh for c in s["copies"]]
    assert copies and all(c.split(" at ")[0].endswith("(async)") for c in copies), copies
