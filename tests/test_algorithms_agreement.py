"""THE AGREEMENT TEST: the distributed code (empirical.algorithms, K = 2 gloo processes) and
the simulator (theory.simulate.simulate, R = 1) produce the same trajectory on the same
problem with the same coins, the overlapped sync (sync_delay) included.

Problem: theory.problems' heterogeneous quadratic ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)``
with a dense (rotated) ``A``, no noise (sigma = 0), so gradients are deterministic. The
torch model holds ``x`` as two tensors (the first ``M`` coordinates and the rest), which
makes ``pull_first_tensor_only`` the simulator's ``pull_fraction = M/d``. After every step
the workers' iterates and the anchor are compared with ``simulate(T = t)`` in float64.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.distributed import spawn_workers

if importlib.util.find_spec("theory.simulate") is None:
    pytest.skip("theory.simulate is not available", allow_module_level=True)

# theory.simulate / theory.problems (scipy) are imported in the parent only: the spawned
# workers import this module too and need nothing but torch and the algorithms
pytestmark = pytest.mark.distributed
K, D, M, T, ALPHA = 2, 5, 2, 24, 0.1
X0 = np.linspace(-1.5, 2.0, D)
SPEC_FIELDS = (
    "H",
    "p",
    "eta",
    "outer",
    "gamma",
    "mu",
    "T0",
    "coins",
    "seed",
    "outer_steps_per_sync",
    "sync_offset",
    "sync_delay",
)

CONFIGS = {
    "palsgd_nesterov": AlgorithmConfig(
        name="palsgd", H=4, T0=3, p=0.3, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9, seed=5
    ),
    "palsgd_average": AlgorithmConfig(name="palsgd", H=3, p=0.5, eta=0.8, seed=2),
    "palsgd_shared": AlgorithmConfig(
        name="palsgd", H=5, T0=2, p=0.4, eta=1.2, outer="sgd", gamma=0.8, coins="shared", seed=11
    ),
    # the simulator takes the A - 1 zero-gradient outer steps at the sync; the interleaved
    # form of the preset is checked against the authors' loop in test_algorithms_faithful.py
    "palsgd_reference": AlgorithmConfig.reference_faithful(
        H=4,
        T0=4,
        p=0.3,
        eta=1.0,
        outer="nesterov",
        gamma=0.5,
        mu=0.9,
        A=3,
        seed=1,
        interleave_outer_steps=False,
    ),
    "local_sgd": AlgorithmConfig(name="local_sgd", H=3),
    "post_local_sgd": AlgorithmConfig(name="post_local_sgd", H=3, T0=2),
    "diloco": AlgorithmConfig(name="diloco", H=3, T0=2),
    # the overlapped sync: the outer step lands sync_delay steps after its all-reduce starts
    "palsgd_overlapped": AlgorithmConfig(
        name="palsgd",
        H=4,
        T0=3,
        p=0.3,
        eta=1.0,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        seed=5,
        sync_delay=2,
    ),  # fmt: skip
    "local_sgd_overlapped": AlgorithmConfig(name="local_sgd", H=3, sync_delay=1),
}


def make_problem():
    from theory import problems

    return problems.make_quadratic(
        K=K, d=D, noise="none", zeta=1.0, seed=3, rotate=True, L=2.0, lam_min=0.2
    )


class Quadratic(nn.Module):
    """Worker ``k``'s loss ``1/2 (x - b_k)^T A (x - b_k)`` with ``x = cat(x1, x2)``."""

    def __init__(self, A: np.ndarray, b: np.ndarray, x0: np.ndarray) -> None:
        super().__init__()
        x0t = torch.tensor(x0, dtype=torch.float64)
        self.x1 = nn.Parameter(x0t[:M].clone())
        self.x2 = nn.Parameter(x0t[M:].clone())
        # plain attributes, not buffers: buffers are broadcast from rank 0 at construction
        # (as torch DDP does) and averaged at syncs, while b_k is worker k's own data
        self.A = torch.tensor(A, dtype=torch.float64)
        self.b = torch.tensor(b, dtype=torch.float64)

    def forward(self) -> torch.Tensor:
        r = torch.cat([self.x1, self.x2]) - self.b
        return 0.5 * r @ (self.A @ r)


def _dense_A(prob) -> np.ndarray:
    return prob.A if prob.A is not None else np.diag(prob.eigenvalues)


def _record(model: Quadratic, algo, world: int, xs: list, zs: list) -> None:
    """Append every worker's iterate (gathered) and this rank's anchor."""
    x = torch.cat([model.x1.detach(), model.x2.detach()])
    gathered = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(gathered, x)
    xs.append(torch.stack(gathered).numpy())
    zs.append(None if algo.z is None else algo.z.clone().numpy())


def worker(rank: int, world: int, A: np.ndarray, b: np.ndarray) -> dict:
    out = {}
    for key, cfg in CONFIGS.items():
        model = Quadratic(A, b[rank], X0)
        algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=ALPHA))
        xs, zs, actions, flying = [], [], [], []
        for _ in range(T):
            action = algo.next_action()
            if action == "grad":
                model().backward()
            actions.append(action)
            algo.step()
            _record(model, algo, world, xs, zs)
            flying.append(algo.sync.in_flight is not None)
        algo.finish()  # a run of T steps ends with the update in flight landed
        _record(model, algo, world, xs, zs)
        out[key] = {"x": np.stack(xs), "z": zs, "actions": actions, "in_flight": flying}
    return out


@pytest.fixture(scope="module")
def runs():
    prob = make_problem()
    return spawn_workers(worker, K, _dense_A(prob), prob.b, timeout_s=240)


def spec_of(cfg: AlgorithmConfig):
    from theory.simulate import AlgorithmSpec

    kw = {f: getattr(cfg, f) for f in SPEC_FIELDS}
    return AlgorithmSpec(
        kind=cfg.name,
        alpha=ALPHA,
        pull_fraction=M / D if cfg.pull_first_tensor_only else 1.0,
        **kw,
    )


@pytest.mark.parametrize("key", list(CONFIGS))
def test_distributed_trajectory_equals_simulator(runs, key):
    from theory.simulate import simulate

    cfg = CONFIGS[key]
    prob = make_problem()
    spec = spec_of(cfg)
    mine = runs[0][key]
    assert np.array_equal(mine["x"], runs[1][key]["x"])  # both ranks gathered the same
    moved, compared = 0.0, 0
    for t in range(1, T + 1):
        # a simulated run of t steps lands the update in flight at its end; the distributed
        # run lands it later (after step t + sync_delay, or at finish() after step T)
        i = T if t == T else t - 1
        if t < T and mine["in_flight"][t - 1]:
            continue
        compared += 1
        tr = simulate(prob, spec, T=t, R=1, seed=0, x0=X0)
        np.testing.assert_allclose(
            mine["x"][i],
            tr.final_x[0],
            rtol=1e-10,
            atol=1e-12,
            err_msg=f"{key}: workers' iterates after step {t}",
        )
        if mine["z"][i] is not None and t >= cfg.T0:
            np.testing.assert_allclose(
                mine["z"][i],
                tr.anchor[0],
                rtol=1e-10,
                atol=1e-12,
                err_msg=f"{key}: anchor after step {t}",
            )
        moved = max(moved, float(np.abs(mine["x"][i] - X0).max()))
    assert moved > 0.1
    assert compared >= T // 2 + 1
    if cfg.has_pulls:
        pulls = [sum(a == "pull" for a in r[key]["actions"]) for r in runs]
        np.testing.assert_array_equal(pulls, tr.pull_steps[0])
        assert sum(pulls) > 0


def test_a_different_seed_gives_a_different_trajectory(runs):
    """The comparison is sharp: the simulator with other coins disagrees with the run."""
    from theory.simulate import simulate

    cfg = CONFIGS["palsgd_nesterov"]
    prob = make_problem()
    tr = simulate(prob, spec_of(cfg.replace(seed=cfg.seed + 1)), T=T, R=1, seed=0, x0=X0)
    assert np.abs(runs[0]["palsgd_nesterov"]["x"][-1] - tr.final_x[0]).max() > 1e-6


def test_the_delay_of_the_overlapped_sync_shows_in_the_trajectory(runs):
    """The overlapped runs are not the blocking ones: the simulator without the delay
    disagrees with them."""
    from theory.simulate import simulate

    prob = make_problem()
    for key in ("palsgd_overlapped", "local_sgd_overlapped"):
        cfg = CONFIGS[key]
        tr = simulate(prob, spec_of(cfg.replace(sync_delay=0)), T=T, R=1, seed=0, x0=X0)
        assert np.abs(runs[0][key]["x"][-1] - tr.final_x[0]).max() > 1e-6, key
