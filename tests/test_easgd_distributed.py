"""EASGD on torch.distributed (``empirical.algorithms.elastic``), K = 3 gloo processes on CPU.

Synchronous EASGD (Zhang, Choromanska & LeCun, NeurIPS 2015; the simulator's form,
``theory.simulate``): local SGD steps, and every ``H`` steps, from the pre-mixing values,
``x_k <- x_k - a (x_k - z)``, ``z <- z + a sum_k (x_k - z)``, with ``a = 2/(K+2)``; the
workers are not restarted from ``z``. K = 3 so that ``1 - K a = -1/5`` is neither 0 nor 1
(with K = 2 the new centre would be the workers' mean, whatever the old one).

One spawn (a module fixture) runs every scenario and returns plain arrays; the tests compare
in the parent, in float64:

* a small MLP with a DDP warm-up and 3 syncs, equal (1e-12) to the rule written out here (a
  plain loop over the K workers with the same batches); Local SGD's rule (restart from
  ``z``) differs;
* a checkpoint in the middle of a round, restored into a fresh model and algorithm, resumes
  on the same trajectory (the centre saved and restored with the anchor);
* a heterogeneous quadratic with Gaussian gradient noise, equal (1e-12) to the simulator
  (``theory.simulate.simulate``, R = 1) after every step: the noise is the simulator's own
  draws (the same ``numpy`` generator, replayed here and added to each worker's gradient).
"""

from __future__ import annotations

import copy
import importlib.util

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.distributed import spawn_workers

# theory.simulate / theory.problems (scipy) are imported in the parent only
pytestmark = pytest.mark.distributed
DT = torch.float64
K, LR, H, T0 = 3, 0.1, 3, 2
A_EL = 2.0 / (K + 2)  # the elastic coefficient (Lemma 1 of Wang & Joshi; the simulator's)
T_MLP = T0 + 3 * H  # a warm-up and three rounds: syncs after steps 4, 7, 10
T_SAVE = 6  # the checkpoint: mid-round, after the first sync (workers and centre differ)
D, HQ, TQ, ALPHA_Q, SEED_Q = 4, 4, 12, 0.1, 5  # the quadratic: 3 syncs, no warm-up
X0 = np.linspace(-1.5, 2.0, D)


# ---------------------------------------------------------------------- helpers (run in workers)


def make_model(seed: int = 0) -> nn.Module:
    """A float64 MLP with seeded weights."""
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(DT)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=DT))
    return model


def batch(rank: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Worker ``rank``'s batch of step ``t`` (heterogeneous: targets shifted by ``rank``)."""
    g = torch.Generator().manual_seed((rank * 100003 + t) * 17 + 1)
    return torch.randn(4, 3, generator=g, dtype=DT), torch.randn(4, 2, generator=g, dtype=DT) + rank


def loss(model: nn.Module, rank: int, t: int) -> torch.Tensor:
    x, y = batch(rank, t)
    return nn.functional.mse_loss(model(x), y)


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def gathered(x: torch.Tensor) -> np.ndarray:
    """Every worker's ``x`` stacked (K, n)."""
    out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x.contiguous())
    return torch.stack(out).numpy()


def run_mlp(algo, model: nn.Module, rank: int, steps: range) -> tuple[list, list]:
    """Train over ``steps``; every worker's iterates and the centre after each step."""
    xs, zs = [], []
    for t in steps:
        assert algo.t == t
        loss(model, rank, t).backward()
        algo.step()
        xs.append(gathered(flat(model)))
        zs.append(algo.z.clone().numpy())
    return xs, zs


def _sgd(model: nn.Module) -> tuple[nn.Module, torch.optim.Optimizer]:
    return model, torch.optim.SGD(model.parameters(), lr=LR)


class Quadratic(nn.Module):
    """``1/2 (x - b_k)^T A (x - b_k) + noise_t . x``: the gradient is the simulator's
    ``A (x - b_k) + noise_{t,k}`` (``noise_t`` set before each step)."""

    def __init__(self, A: np.ndarray, b: np.ndarray) -> None:
        super().__init__()
        self.x = nn.Parameter(torch.tensor(X0, dtype=DT))
        self.A, self.b = torch.tensor(A, dtype=DT), torch.tensor(b, dtype=DT)
        self.noise = torch.zeros(D, dtype=DT)

    def forward(self) -> torch.Tensor:
        r = self.x - self.b
        return 0.5 * r @ (self.A @ r) + self.noise @ self.x


def worker(rank: int, world: int, A: np.ndarray, b: np.ndarray, noise: np.ndarray) -> dict:
    out: dict = {}
    cfg = AlgorithmConfig(name="easgd", H=H, T0=T0)
    model, inner = _sgd(make_model(10 + rank))  # rank 0's model is broadcast
    algo = build_algorithm(cfg, model, inner)
    xs, zs = run_mlp(algo, model, rank, range(T_SAVE))
    saved = (copy.deepcopy(model.state_dict()), algo.state_dict())
    more = run_mlp(algo, model, rank, range(T_SAVE, T_MLP))
    out["mlp"] = {"x": np.stack(xs + more[0]), "z": np.stack(zs + more[1])}
    algo.resolve_timings()
    out["stats"] = {k: algo.stats[k] for k in ("syncs", "outer_steps", "allreduce_calls")}
    out["consensus"] = algo.stats["last_consensus"]
    out["n"] = sum(p.numel() for p in model.parameters())
    model, inner = _sgd(make_model(99))  # a fresh start, then the checkpoint
    algo = build_algorithm(cfg, model, inner)
    model.load_state_dict(saved[0])
    algo.load_state_dict(saved[1])
    resumed = run_mlp(algo, model, rank, range(T_SAVE, T_MLP))
    out["resumed"] = {"x": np.stack(resumed[0]), "z": np.stack(resumed[1])}
    quad = Quadratic(A, b[rank])
    algo = build_algorithm(
        AlgorithmConfig(name="easgd", H=HQ), quad, torch.optim.SGD(quad.parameters(), lr=ALPHA_Q)
    )
    qx, qz = [], []
    for t in range(TQ):
        quad.noise = torch.tensor(noise[t, rank], dtype=DT)
        quad().backward()
        algo.step()
        qx.append(gathered(quad.x.detach()))
        qz.append(algo.z.clone().numpy())
    out["quad"] = {"x": np.stack(qx), "z": np.stack(qz)}
    return out


# ---------------------------------------------------------------------- the parent


def make_problem():
    from theory import problems

    return problems.make_quadratic(
        K=K, d=D, noise="gaussian", sigma=0.5, zeta=1.0, seed=3, rotate=True, L=2.0, lam_min=0.2
    )


def simulator_noise(prob) -> np.ndarray:
    """The simulator's noise draws (TQ, K, D): one ``draw_randomness`` per step from
    ``numpy.random.default_rng(seed)`` (``theory.simulate``, "Noise"), R = 1."""
    rng = np.random.default_rng(SEED_Q)
    return np.stack([prob.draw_randomness(rng, (1,))[0] for _ in range(TQ)])


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    if importlib.util.find_spec("theory.simulate") is None:
        pytest.skip("theory.simulate is not available")
    prob = make_problem()
    return spawn_workers(worker, K, prob.A, prob.b, simulator_noise(prob), timeout_s=240)


def written_out(restart: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """EASGD on the MLP as a plain loop over the K workers: the warm-up averages the K
    gradients, then local SGD steps and, after each ``H``-th, the elastic mixing from the
    pre-mixing values (``restart``: Local SGD's rule instead, ``x_k <- z = mean_k x_k``).
    Every worker's iterates (T_MLP, K, n), the centre (T_MLP, n) after each step, and the
    consensus ``mean_k ||x_k - xbar||^2`` before the last mixing."""
    models = [make_model(10) for _ in range(K)]
    xs, zs, consensus = [], [], 0.0
    z = flat(models[0]).clone()
    for t in range(T_MLP):
        grads = []
        for k, m in enumerate(models):
            m.zero_grad(set_to_none=True)
            loss(m, k, t).backward()
            grads.append([p.grad.clone() for p in m.parameters()])
        with torch.no_grad():
            for k, m in enumerate(models):
                for i, p in enumerate(m.parameters()):
                    g = sum(gr[i] for gr in grads) / K if t < T0 else grads[k][i]
                    p -= LR * g
        X = torch.stack([flat(m) for m in models])
        if t < T0:
            z = X[0].clone()
        elif (t - T0 + 1) % H == 0:
            consensus = float(((X - X.mean(0)) ** 2).sum(1).mean())
            if restart:
                z, X_new = X.mean(0), X.mean(0).expand(K, -1)
            else:
                X_new = X - A_EL * (X - z)
                z = z + A_EL * (X - z).sum(0)
            for m, x in zip(models, X_new, strict=True):
                torch.nn.utils.vector_to_parameters(x.clone(), m.parameters())
        xs.append(torch.stack([flat(m) for m in models]).numpy())
        zs.append(z.clone().numpy())
    return np.stack(xs), np.stack(zs), consensus


def test_every_rank_saw_the_same_run(runs):
    for r in runs[1:]:
        for key in ("mlp", "resumed", "quad"):
            np.testing.assert_array_equal(r[key]["x"], runs[0][key]["x"])
            np.testing.assert_array_equal(r[key]["z"], runs[0][key]["z"])  # one centre


def test_equals_the_rule_written_out(runs):
    xs, zs, consensus = written_out()
    got = runs[0]["mlp"]
    np.testing.assert_allclose(got["x"], xs, rtol=0, atol=1e-12)
    # the centre exists from the end of the warm-up (after step T0 - 1: z <- x)
    np.testing.assert_allclose(got["z"][T0 - 1 :], zs[T0 - 1 :], rtol=0, atol=1e-12)
    # the workers differ after the syncs (no restart) and from the centre
    assert np.abs(xs[-1] - xs[-1].mean(0)).max() > 1e-2
    assert np.abs(xs[-1] - zs[-1]).max() > 1e-2
    np.testing.assert_allclose(runs[0]["consensus"], consensus, rtol=1e-9, atol=1e-12)
    assert consensus > 1e-4
    # one all-reduce per warm-up step and per mixing (one outer step each)
    assert runs[0]["stats"] == {"syncs": 3, "outer_steps": 3, "allreduce_calls": T0 + 3}


def test_local_sgds_restart_differs(runs):
    """Negative control: the restart from ``z`` (Local SGD's rule) is not what ran."""
    xs, zs, _ = written_out(restart=True)
    got = runs[0]["mlp"]
    assert np.abs(got["x"][-1] - xs[-1]).max() > 1e-2
    assert np.abs(got["z"][-1] - zs[-1]).max() > 1e-2


def test_a_checkpoint_mid_round_resumes_on_the_same_trajectory(runs):
    got, resumed = runs[0]["mlp"], runs[0]["resumed"]
    np.testing.assert_array_equal(resumed["x"], got["x"][T_SAVE:])
    np.testing.assert_array_equal(resumed["z"], got["z"][T_SAVE:])


def test_equals_the_simulator_with_the_same_noise(runs):
    from theory.simulate import AlgorithmSpec, simulate

    prob = make_problem()
    spec = AlgorithmSpec(kind="easgd", alpha=ALPHA_Q, H=HQ)
    assert spec.elastic_coef(K) == A_EL
    got = runs[0]["quad"]
    for t in range(1, TQ + 1):
        tr = simulate(prob, spec, T=t, R=1, seed=SEED_Q, x0=X0)
        np.testing.assert_allclose(got["x"][t - 1], tr.final_x[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got["z"][t - 1], tr.anchor[0], rtol=0, atol=1e-12)
    assert np.abs(got["x"][-1] - X0).max() > 0.1
    # the noise is the simulator's: another seed's run differs
    other = simulate(prob, spec, T=TQ, R=1, seed=SEED_Q + 1, x0=X0)
    assert np.abs(got["x"][-1] - other.final_x[0]).max() > 1e-6
