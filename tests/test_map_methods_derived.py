"""The map's methods come from the algorithm table, and the bounds that speak for a method
from each bound's own spec (Bound.algorithm, outers, assumptions), not from a second table."""

from __future__ import annotations

import dataclasses

from theory.algorithm import AlgorithmSpec
from theory.assumptions import A3_IID
from theory.bounds import get
from theory.compare.bounds_side import bounds_for, speaks_for
from theory.compare.methods import METHODS

#: what the registered bounds state, read by hand from their theorems
EXPECTED = {
    "sgd": {"sgd"},
    "local_sgd": {"local_sgd_ours", "local_sgd_noniid", "local_sgd_outer"},
    "diloco": {"local_sgd_outer"},
    "palsgd": {"palsgd", "palsgd_outer", "palsgd_pull_aware"},
    "palsgd_nesterov": {"palsgd_outer", "palsgd_pull_aware"},
    "palsgd_shared": {"palsgd_shared_coins"},
    "slowmo": {"local_sgd_outer"},  # heavy-ball outer step: Theorem 2 covers momentum
}


def test_each_method_gets_the_bounds_its_theorems_state():
    assert {n: set(bounds_for(n)) for n in METHODS} == EXPECTED


def test_methods_are_rows_of_the_table():
    assert METHODS["local_sgd"].spec == AlgorithmSpec.of("diloco", outer="sgd", mu=0.0)
    assert METHODS["palsgd_shared"].spec.shared_coins
    assert METHODS["sgd"].spec.kind == "sgd" and not METHODS["sgd"].has_outer


def test_negative_controls_a_bound_that_does_not_apply_is_left_out():
    """An i.i.d. bound, a bound for the other coin model, an averaging bound for a Nesterov
    method and a bound for another algorithm are each refused."""
    ours = get("local_sgd_ours")
    iid = dataclasses.replace(ours, assumptions=(*ours.assumptions, A3_IID))
    assert speaks_for(ours, METHODS["local_sgd"]) and not speaks_for(iid, METHODS["local_sgd"])
    assert not speaks_for(get("palsgd_shared_coins"), METHODS["palsgd"])
    assert not speaks_for(get("palsgd"), METHODS["palsgd_shared"])
    assert not speaks_for(get("palsgd"), METHODS["palsgd_nesterov"])
    assert not speaks_for(ours, METHODS["diloco"])
    assert not speaks_for(get("easgd"), METHODS["local_sgd"])
    assert not speaks_for(get("slowmo_ar_sgd"), METHODS["local_sgd"])


def test_a_new_bound_is_picked_up_from_its_spec():
    """A bound stated for PALSGD with an outer Nesterov step speaks for palsgd_nesterov
    without any table naming it."""
    new = dataclasses.replace(get("palsgd_outer"), name="palsgd_nesterov_new")
    assert speaks_for(new, METHODS["palsgd_nesterov"])
    assert speaks_for(new, METHODS["palsgd"])
    assert not speaks_for(new, METHODS["diloco"])
