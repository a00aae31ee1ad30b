"""Theorem 2 (derived here): PALSGD and Local SGD with an outer learning rate and momentum.

The bounds come from :mod:`theory.proofs.anchor` (lemma chain O1-O10, ``docs/anchor_theorem.md``);
expression and conditions are read off the assembled theorem objects, not retyped.

Measured quantity: ``(1/R) sum_{r<R} E||grad f(z_r)||^2`` over the ``R = T/H`` anchors
``z_r`` (the model the outer optimizer holds at the start of each round), not the per-step
average of the other bounds. Outer step: SGD ``z <- z + gamma Delta`` (``gamma = 1`` is
plain averaging), heavy-ball or PyTorch-Nesterov momentum ``0 <= mu < 1``; inner SGD;
independent coins.

``palsgd_outer``
    PALSGD, ``0 < p < 1``, any ``eta >= 0`` with ``alpha eta <= 1``; summed drift.
``palsgd_pull_aware``
    PALSGD with ``eta > L``: the pull contracts the drift, whose horizon becomes
    ``min(H - 1, 2/(alpha (eta - L)))``; the absorption condition does not grow with ``H``.
``local_sgd_outer``
    Local SGD (``p = 0``) with the same outer optimizers (e.g. DiLoCo's outer Nesterov).
"""

from __future__ import annotations

from theory.algorithm import AlgorithmSpec
from theory.assumptions import (
    A1_SMOOTH,
    A2_NOISE,
    A3_HETEROGENEITY,
    A4_LOWER_BOUND,
    INDEPENDENT_COINS,
    INNER_SGD,
    Assumption,
)
from theory.bound import Bound
from theory.bounds import register, theorem_bound
from theory.proofs.anchor import theorem

__all__ = ["OUTER_OPTIMIZER", "PALSGD_OUTER", "PALSGD_PULL_AWARE", "LOCAL_SGD_OUTER"]

#: the outer optimizers Theorem 2 covers (the key ``S2o`` marks a bound that covers them)
OUTER_OPTIMIZER = Assumption(
    "S2o",
    "outer SGD or momentum",
    "z <- z + gamma Delta with Delta = mean_k x_k - z (gamma > 0; gamma = 1 is averaging), "
    "optionally with heavy-ball or PyTorch-Nesterov outer momentum 0 <= mu < 1",
)

_PROVENANCE = (
    "derived here: the project's Theorem 2 (docs/anchor_theorem.md), machine-checked lemma "
    "chain theory.proofs.anchor (O1-O10)"
)
_MEASURED = (
    "Bounds the average over the R = T/H rounds of E||grad f(z_r)||^2 at the anchors z_r "
    "(the outer model), not the per-step average of xbar_t. "
)
#: the outer updates Theorem 2 covers: SGD (heavy-ball momentum) and PyTorch-Nesterov momentum
OUTER_UPDATES = ("sgd", "nesterov")
_BASE = (A1_SMOOTH, A2_NOISE, A3_HETEROGENEITY, A4_LOWER_BOUND, INNER_SGD, OUTER_OPTIMIZER)


def _bound(kind: str, name: str, title: str, algorithm: str, notes: str) -> Bound:
    spec = AlgorithmSpec.of(algorithm, outer="sgd")  # the proofs' outer SGD, heavy ball or Nesterov
    coins = (INDEPENDENT_COINS,) if spec.definition.pulls else ()
    return theorem_bound(
        theorem(kind),
        provenance=_PROVENANCE,
        name=name,
        title=title,
        assumptions=_BASE + coins,
        algorithm=spec,
        outers=OUTER_UPDATES,
        notes=_MEASURED + notes,
        measured="anchors",
    )


PALSGD_OUTER = register(
    _bound(
        "palsgd",
        "palsgd_outer",
        "PALSGD, inner SGD, outer SGD/momentum (gamma, mu), independent coins (derived here)",
        "palsgd",
        "Any pull rate eta with alpha eta <= 1, 0 < p < 1. The effective outer rate is "
        "gamma/(1-mu); momentum raises the outer curvature to L(1+mu)/(1-mu). Not covered: "
        "shared coins, adaptive inner or outer optimizers (Adam/AdamW): the nearest covered "
        "case is SGD inner steps at lr alpha with the same outer optimizer.",
    )
)

PALSGD_PULL_AWARE = register(
    _bound(
        "pull_aware",
        "palsgd_pull_aware",
        "PALSGD with eta > L: pull-aware drift horizon min(H-1, 2/(alpha(eta-L))) (derived here)",
        "palsgd",
        "For eta > L each worker's mean step is a gradient step on the strongly convex "
        "f_k + (eta/2)||x - z||^2, so the drift stays of order zeta^2/(eta - L)^2 whatever H "
        "is; a round makes at most about one prox step: the F0 term carries "
        "(1 + alpha eta H)/H_rounds. Independent coins only.",
    )
)

LOCAL_SGD_OUTER = register(
    _bound(
        "local_sgd",
        "local_sgd_outer",
        "Local SGD, inner SGD, outer SGD/momentum (gamma, mu) (derived here)",
        "diloco",
        "p = 0 (no pull). Covers DiLoCo's outer Nesterov with SGD inner steps; with AdamW "
        "inner steps (DiLoCo's own) this is the nearest covered case. At H = 1, gamma = 1, "
        "mu = 0 it is 4 F0/(alpha T) + 4 L alpha sigma^2/K (twice the minibatch-SGD F0 term, "
        "four times its noise term) under alpha L <= 1/8.",
    )
)
