"""The overlapped sync (``sync_delay = tau``): the outer all-reduce runs while the workers
compute and its outer step lands ``tau`` local steps later (theory.algorithm writes the
update down). Here: the schedule and its validation, the simulator against a direct loop
written from the docstring, the exact recursion on a deterministic problem, the trainer
end to end with a checkpoint taken while a sync is in flight (bitwise resume). The
step-by-step agreement of the distributed code with the simulator is in
test_algorithms_agreement.py, the exact recursion against brute-force enumeration and
Monte Carlo in test_quadratic.py."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from core.errors import UserInputError
from core.validation import ParameterError
from empirical import checkpoint as ck
from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.config import resolve_config
from empirical.distributed import spawn_workers
from theory import problems
from theory.algorithm import AlgorithmSpec, is_landing_step, outer_step
from theory.moments import MatrixQuadratic, exact_moments, exact_oracle
from theory.simulate import simulate


def test_landing_schedule_and_ranges():
    t = np.arange(30)
    lands = t[is_landing_step(t, 3, 4, 1, 2)]
    np.testing.assert_array_equal(lands, [7, 11, 15, 19, 23, 27])  # syncs after 5, 9, ...
    assert not np.any(is_landing_step(t, 0, 4, 0, 0))  # the blocking sync never "lands"
    with pytest.raises(ParameterError, match=r"sync_delay.*\[0, H - 1\] = \[0, 3\]"):
        AlgorithmSpec(kind="diloco", alpha=0.1, H=4, outer="nesterov", gamma=0.7, mu=0.9,
                      sync_delay=4)  # fmt: skip
    for kind in ("sgd", "easgd"):
        with pytest.raises(ParameterError, match="sync_delay"):
            AlgorithmSpec(kind=kind, alpha=0.1, H=4, sync_delay=1)
    with pytest.raises(ParameterError, match="sync_delay"):
        AlgorithmConfig(name="ddp", sync_delay=1)
    with pytest.raises(UserInputError, match="interleave"):
        AlgorithmConfig(name="palsgd", H=4, p=0.2, eta=1.0, sync_delay=1,
                        interleave_outer_steps=True, outer_steps_per_sync=2, outer="nesterov",
                        gamma=0.5, mu=0.9)  # fmt: skip
    assert AlgorithmConfig(name="local_sgd", H=4, sync_delay=1).uses_anchor
    assert not AlgorithmConfig(name="local_sgd", H=4).uses_anchor


def _direct(prob, spec: AlgorithmSpec, T: int, x0: np.ndarray):
    """Local SGD / DiLoCo (no pulls, no noise) with the overlapped sync, as the docstring of
    theory.algorithm states it, written without the simulator's code."""
    K = prob.K
    xs, z, buf = np.tile(x0, (K, 1)), x0.copy(), np.zeros_like(x0)
    flight: tuple[int, np.ndarray] | None = None
    for t in range(T):
        g = prob.local_grads(xs[None])[0]
        xs = xs - spec.alpha * (g.mean(0) if t < spec.T0 else g)  # warm-up: minibatch SGD
        if t == spec.T0 - 1:
            z = xs[0].copy()
        if flight is not None and t == flight[0]:
            z_new, buf = outer_step(z, buf, flight[1], outer=spec.outer, gamma=spec.gamma,
                                    mu=spec.mu)  # fmt: skip
            xs = xs + (z_new - z)
            z, flight = z_new, None
        if t >= spec.T0 and (t - spec.T0 + 1) % spec.H == 0:
            flight = (t + spec.sync_delay, z - xs.mean(0))
            xs = np.tile(z, (K, 1))
    if flight is not None:
        z_new, buf = outer_step(z, buf, flight[1], outer=spec.outer, gamma=spec.gamma, mu=spec.mu)
        xs, z = xs + (z_new - z), z_new
    return xs, z


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("T", [11, 12, 13])  # ends after, inside and at a landing
def test_simulator_follows_the_written_update(backend, T):
    prob = problems.make_quadratic(K=3, d=4, noise="none", zeta=1.0, seed=2, rotate=True)
    x0 = np.linspace(-1.0, 2.0, 4)
    spec = AlgorithmSpec(kind="diloco", alpha=0.2, H=4, T0=1, outer="nesterov", gamma=0.7,
                         mu=0.9, sync_delay=2)  # fmt: skip
    xs, z = _direct(prob, spec, T, x0)
    tr = simulate(prob, spec, T=T, R=1, seed=0, x0=x0, backend=backend)
    np.testing.assert_allclose(tr.final_x[0], xs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tr.anchor[0], z, rtol=1e-12, atol=1e-12)
    blocking = simulate(prob, AlgorithmSpec(**{**spec.to_dict(), "sync_delay": 0}), T=T, R=1,
                        seed=0, x0=x0)  # fmt: skip
    assert np.abs(blocking.anchor[0] - z).max() > 1e-4  # the delay is not a no-op


def test_exact_recursion_is_the_direct_run_and_the_round_map_oracle_refuses():
    rng = np.random.default_rng(1)
    A = np.diag([1.0, 0.4, 0.1])
    b = rng.normal(size=(2, 3))
    prob = MatrixQuadratic(A=A, b=b, noise=0.0, x0=[2.0, -1.0, 1.0])
    spec = dict(kind="local_sgd", alpha=0.3, H=3, outer="avg", sync_delay=2)
    c = exact_moments(prob, spec, T=10)
    # the direct run, step by step
    xs, z = np.tile(prob.x0, (2, 1)), prob.x0.copy()
    flight = None
    xstar = b.mean(0)
    for t in range(10):
        e = xs.mean(0) - xstar
        assert c.loss_gap[t] == pytest.approx(0.5 * e @ A @ e, rel=1e-10, abs=1e-14)
        xs = xs - 0.3 * (xs - b) @ A
        if flight is not None and t == flight[0]:
            xs, z, flight = xs - flight[1], z - flight[1], None
        if (t + 1) % 3 == 0:
            flight, xs = (t + 2, z - xs.mean(0)), np.tile(z, (2, 1))
    assert c.round_steps.tolist() == [0, 5, 8, 10]  # landings after steps 4, 7, and the end
    with pytest.raises(UserInputError, match="round-map oracle"):
        exact_oracle(prob, spec, T=10)


# ----------------------------------------------------------------------------- trainer


class _Quad(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.x = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))

    def forward(self) -> torch.Tensor:
        return 0.5 * (self.x * self.x).sum()


def test_one_process_run_and_finish():
    model = _Quad()
    cfg = AlgorithmConfig(name="local_sgd", H=3, sync_delay=2)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.1))
    infos = []
    for _ in range(7):
        model().backward()
        infos.append(algo.step())
    assert [i.synced for i in infos] == [False, False, True, False, False, True, False]
    assert [i.landed for i in infos] == [False, False, False, False, True, False, False]
    assert algo.sync.in_flight is not None and algo.finish() and algo.sync.in_flight is None
    assert not algo.finish()
    assert algo.stats["syncs"] == 2 and algo.stats["outer_steps"] == 2


BASE = dict(
    T=15, batch_size=2, seq_len=16, A=1, H=4, p=0.3, eta=1.0, T0=2, alpha=3e-3, log_interval=3,
    eval_interval=0, progress=False, sync_delay=2, checkpoint_interval=6, keep_checkpoints=5,
)  # fmt: skip


def _two_rank_runs(rank: int, world_size: int, base: str) -> None:
    from empirical.train import train

    os.environ["LOCAL_RANK"] = str(rank)
    out = Path(base)
    cfg = dict(BASE)
    assert train(resolve_config(overrides={**cfg, "output_dir": str(out / "full")})) == 0
    part = {**cfg, "output_dir": str(out / "part")}
    assert train(resolve_config(overrides={**part, "max_steps_this_run": 8})) == 0
    assert train(resolve_config(overrides={**part, "resume": "auto"})) == 0


def _state(out: Path, step: int, rank: int) -> dict:
    d = ck.step_dir(out / "checkpoints", step)
    return ck.load_rank_state(d, ck.read_manifest(d), rank)


@pytest.mark.distributed
def test_trainer_resumes_bitwise_from_a_checkpoint_inside_the_window(tmp_path):
    """Syncs after steps 5, 9, 13 land after 7, 11 and (finish) 15; the checkpoint of step
    6 holds the sync in flight, the resumed run lands it after step 7 as the full run did."""
    spawn_workers(_two_rank_runs, 2, str(tmp_path), timeout_s=300)
    full, part = tmp_path / "full", tmp_path / "part"
    for rank in (0, 1):
        held = _state(part, 6, rank)["algorithm"]["in_flight"]
        assert held is not None and held["land_after"] == 7
        a, b = _state(full, 15, rank), _state(part, 15, rank)
        assert a["algorithm"]["in_flight"] is None  # the last sync landed at the end
        for key in a["model"]:
            assert torch.equal(a["model"][key], b["model"][key]), key
        assert torch.equal(a["algorithm"]["z"], b["algorithm"]["z"])
        ma = a["algorithm"]["outer"]["state"][0]["momentum_buffer"]
        assert torch.equal(ma, b["algorithm"]["outer"]["state"][0]["momentum_buffer"])
        stats = a["algorithm"]["stats"]
        assert stats["syncs"] == 3 and stats["outer_steps"] == 3
    assert _state(full, 15, 0)["algorithm"]["z"].equal(_state(full, 15, 1)["algorithm"]["z"])


# ----------------------------------------------------------------------------- cost model


def test_cost_model_hides_up_to_the_window_of_compute():
    from empirical import cost as cm

    cfg = AlgorithmConfig(name="palsgd", H=4, p=0.3, eta=1.0, seed=3, sync_delay=2)
    tr = cm.step_trace(cfg, 2, 14)  # syncs after steps 3, 7, 11; the last window: 12, 13
    coins = tr["pull_steps"] - np.concatenate([[0], tr["pull_steps"][:-1]])
    w_pull = [coins[4:6].sum(), coins[8:10].sum(), coins[12:14].sum()]
    assert tr["window_pull_steps"][-1] == sum(w_pull)
    assert tr["window_grad_steps"][-1] + tr["window_pull_steps"][-1] == 6
    comp = cm.ComputeProfile(grad_step_s=0.01, pull_step_s=0.001)
    link = cm.LinkProfile(name="slow", latency_s=0.01, bandwidth_Bps=1e8)
    kw = dict(compute=comp, link=link, K=2, param_bytes=1e6, algorithm="palsgd", H=4, p=0.3)
    t_ar = float(cm.allreduce_time(1e6, 2, link))  # 2 latencies + 1e6/1e8 s = 0.03 s
    blocking = cm.time_breakdown(tr, **kw)
    over = cm.time_breakdown(tr, **kw, sync_delay=2)
    assert blocking["communication"][-1] == pytest.approx(3 * t_ar)
    windows = [(2 - w) * 0.01 + w * 0.001 for w in w_pull]
    exposed = sum(max(t_ar - w, 0.0) for w in windows)
    assert over["communication"][-1] == pytest.approx(exposed)
    assert over["communication"][-1] + over["communication_hidden"][-1] == pytest.approx(3 * t_ar)
    saved = blocking["total"][-1] - over["total"][-1]
    assert saved == pytest.approx(3 * t_ar - exposed) and saved > 0
    # without the exact windows: the expected window tau ((1-p) C_g + p C_p)
    bare = {k: v for k, v in tr.items() if not k.startswith("window")}
    expect = cm.time_breakdown(bare, **kw, sync_delay=2)["communication"][-1]
    assert expect == pytest.approx(3 * max(t_ar - 2 * (0.7 * 0.01 + 0.3 * 0.001), 0.0))
    assert (
        cm.time_breakdown(
            bare,
            **{**kw, "link": cm.LinkProfile(name="fast", latency_s=1e-6, bandwidth_Bps=1e12)},
            sync_delay=2,
        )["communication"][-1]
        == 0
    )
