"""The algorithm spec (theory.algorithm) is the one definition every layer uses."""

import numpy as np
import pytest
import torch

import empirical.algorithms.config as dist_config
import empirical.algorithms.local as local_algos
import empirical.cost.trace as cost_trace
import empirical.probe.compare as probe_compare
import theory.moments.exact as moments_exact
import theory.moments.rounds as moments_rounds
import theory.moments.spec as moments_spec
import theory.simulate as sim
from core.errors import UserInputError
from theory import algorithm as spec
from theory.moments import exact_moments
from theory.problems import QuadraticProblem


def test_layers_take_names_from_the_spec():
    assert sim.KINDS is spec.KINDS and sim.OUTERS is spec.OUTERS and sim.COINS is spec.COINS
    assert sim.AlgorithmSpec is spec.AlgorithmSpec
    assert dist_config.NAMES == spec.distributed_choices()
    assert dist_config.OUTERS is spec.OUTERS and dist_config.COINS is spec.COINS
    assert dist_config.authors_sync_offset is spec.authors_sync_offset
    assert set(spec.LOCAL_NAMES) <= set(spec.KINDS) & set(spec.DISTRIBUTED_NAMES)


def test_sync_rule_on_ints_and_arrays():
    t = np.arange(40)
    got = spec.is_sync_step(t, 7, 5, 2)
    want = np.array([s >= 7 and (s - 7 + 1 + 2) % 5 == 0 for s in t])
    assert np.array_equal(got, want)
    assert bool(spec.is_sync_step(9, 7, 5, 2)) and not bool(spec.is_sync_step(4, 7, 5, 2))
    tt = torch.arange(40)
    assert np.array_equal(spec.is_sync_step(tt, 7, 5, 2).numpy(), want)


@pytest.mark.parametrize("outer,mu", [("sgd", 0.0), ("sgd", 0.8), ("nesterov", 0.9)])
@pytest.mark.parametrize("extra", [0, 2])
def test_outer_step_equals_torch_sgd(outer, mu, extra):
    """The array outer update equals torch.optim.SGD on the outer gradient, extra steps too."""
    gen = torch.Generator().manual_seed(0)
    z0 = torch.randn(6, generator=gen, dtype=torch.float64)
    p = torch.nn.Parameter(z0.clone())
    opt = torch.optim.SGD([p], lr=0.3, momentum=mu, dampening=0.0, nesterov=outer == "nesterov")
    z, buf = z0.clone(), torch.zeros(6, dtype=torch.float64)
    for _ in range(3):
        delta = torch.randn(6, generator=gen, dtype=torch.float64)
        p.grad = delta.clone()
        opt.step()
        for _ in range(extra):
            p.grad = torch.zeros(6, dtype=torch.float64)
            opt.step()
        z, buf = spec.outer_step(z, buf, delta, outer=outer, gamma=0.3, mu=mu, extra_steps=extra)
    assert torch.allclose(p.detach(), z, rtol=0, atol=1e-14)


def test_outer_average_is_the_mean():
    z = np.array([1.0, 2.0])
    xbar = np.array([0.5, -1.0])
    out, _ = spec.outer_step(z, np.zeros(2), z - xbar, outer="average", gamma=9.0, mu=0.9)
    assert np.allclose(out, xbar)
    with pytest.raises(UserInputError, match="adam"):
        spec.outer_step(z, z, z, outer="adam", gamma=1.0, mu=0.0)


def test_outer_sgd_momentum_is_not_dropped():
    """SGD with momentum mu is heavy ball in the simulator and in the exact recursion alike."""
    prob = QuadraticProblem(
        K=2, d=3, eigenvalues=[1.0, 0.3, 0.05], b=[[1.0, -0.5, 2.0], [-1.0, 0.5, -2.0]],
        noise="none", x0=[1.0, 1.0, 1.0],
    )  # fmt: skip
    kw = dict(kind="palsgd", alpha=0.05, H=4, p=0.25, eta=1.0, outer="sgd", gamma=0.5)
    runs = {}
    for mu in (0.0, 0.7):
        a = spec.AlgorithmSpec(mu=mu, **kw)
        runs[mu] = sim.simulate(prob, a, T=24, R=1, seed=0).final_grad_norm_sq[0]
    assert runs[0.0] != pytest.approx(runs[0.7], rel=1e-6)
    a = spec.AlgorithmSpec(mu=0.7, **{**kw, "p": 0.0, "eta": 0.0, "kind": "diloco"})
    trace = sim.simulate(prob, a, T=24, R=1, seed=0)
    ex = exact_moments(prob, a, T=24)
    assert ex.final_grad_norm_sq == pytest.approx(trace.final_grad_norm_sq[0], rel=1e-9)


def test_every_layer_takes_the_sync_rule_and_names_from_the_spec():
    """The sync rule, the outer update and the name lists are the spec's objects everywhere."""
    assert local_algos.is_sync_step is spec.is_sync_step
    assert cost_trace.is_sync_step is spec.is_sync_step
    assert moments_exact.is_sync_step is spec.is_sync_step
    assert moments_rounds.outer_step is spec.outer_step
    assert set(moments_spec.MOMENT_KINDS) == set(spec.LOCAL_NAMES) | {"sgd"}
    assert cost_trace.lookup is spec.lookup
    assert probe_compare.lookup is spec.lookup
