"""The torch outer optimizer (empirical.algorithms.outer) is the spec's outer update
(theory.algorithm.outer_step): the same anchor and momentum over several syncs, for outer
SGD without and with momentum and for Nesterov, with the extra zero-gradient steps of
``outer_steps_per_sync > 1`` included."""

from __future__ import annotations

import pytest
import torch

from empirical.algorithms.outer import OuterOptimizer
from theory.algorithm import outer_step


@pytest.mark.parametrize(
    ("outer", "mu", "steps_per_sync"),
    [
        ("sgd", 0.0, 1),
        ("sgd", 0.0, 3),
        ("sgd", 0.9, 1),
        ("sgd", 0.9, 3),
        ("nesterov", 0.9, 1),
        ("nesterov", 0.7, 4),
        ("average", 0.0, 1),
    ],
)
def test_outer_optimizer_equals_the_spec_over_several_syncs(outer, mu, steps_per_sync):
    gamma, syncs, n = 0.7, 6, 11
    g = torch.Generator().manual_seed(3)
    z0 = torch.randn(n, generator=g, dtype=torch.float64)
    deltas = [torch.randn(n, generator=g, dtype=torch.float64) for _ in range(syncs)]
    z = z0.clone()
    opt = OuterOptimizer(z, outer, gamma, mu, steps_per_sync)
    z_ref, buf_ref = z0.clone(), torch.zeros(n, dtype=torch.float64)
    taken = 0
    for delta in deltas:
        taken += opt.step(delta.clone())
        z_ref, buf_ref = outer_step(
            z_ref, buf_ref, delta, outer=outer, gamma=gamma, mu=mu, extra_steps=steps_per_sync - 1
        )
        torch.testing.assert_close(z, z_ref, rtol=1e-12, atol=1e-12)
        if mu > 0:
            torch.testing.assert_close(opt.momentum_buffer, buf_ref, rtol=1e-12, atol=1e-12)
    assert taken == syncs * (1 if outer == "average" else steps_per_sync)
    assert not torch.equal(z, z0)


def test_outer_optimizer_differs_from_the_spec_with_other_hyperparameters():
    """The comparison above can fail: a different momentum gives a different anchor."""
    g = torch.Generator().manual_seed(4)
    z0 = torch.randn(5, generator=g, dtype=torch.float64)
    deltas = [torch.randn(5, generator=g, dtype=torch.float64) for _ in range(3)]
    z = z0.clone()
    opt = OuterOptimizer(z, "nesterov", 0.5, 0.9, 2)
    z_ref, buf_ref = z0.clone(), torch.zeros(5, dtype=torch.float64)
    for delta in deltas:
        opt.step(delta.clone())
        z_ref, buf_ref = outer_step(
            z_ref, buf_ref, delta, outer="nesterov", gamma=0.5, mu=0.8, extra_steps=1
        )
    assert not torch.allclose(z, z_ref)
