"""PALSGD bounds (derived here) and the project's own Local SGD bound (their ``p = 0`` case).

The paper's theorem text (Naganuma et al., TMLR 2025) was not available to the project;
these bounds are the project's own Theorem 1, proved in ``docs/palsgd_proof.md`` as a chain
of lemmas that :mod:`theory.proofs.palsgd` builds and the tests check. The expression and
the step-size conditions registered here are taken from the assembled theorem object, not
retyped.

Registered bounds:

``palsgd``
    inner SGD, outer averaging (``gamma = 1``, ``mu = 0``), independent coins,
    ``0 < p < 1``; heterogeneity allowed.
``palsgd_shared_coins``
    the same with one coin per step shared by all workers (the authors' code).
``local_sgd_ours``
    the ``p = 0`` specialisation (``eta = 0`` first, then ``p = 0``): Local SGD with
    outer averaging, heterogeneity allowed.

The bounds are stated for ``T = R*H``; the per-round argument also holds for a final
partial round, so they hold for every ``T >= 1``.

Not covered (say so wherever these bounds are used): outer learning rate ``gamma != 1``,
outer momentum or Nesterov outer steps, adaptive inner optimizers (AdamW), and the
gradient-accumulation quirks of the authors' code.
"""

from __future__ import annotations

from typing import Any

from theory.algorithm import AlgorithmSpec
from theory.assumptions import COIN_ASSUMPTIONS
from theory.bound import Bound
from theory.bounds import register, theorem_bound
from theory.bounds.local_sgd import HETEROGENEOUS_LOCAL_SGD
from theory.proofs.palsgd import PALSGDTheorem, local_sgd_theorem, theorem

__all__ = ["PALSGD", "PALSGD_SHARED", "LOCAL_SGD_OURS", "bound_from_theorem"]

_PROVENANCE = (
    "derived here: the project's own Theorem 1 (docs/palsgd_proof.md), machine-checked lemma "
    "chain theory.proofs.palsgd; the paper's theorem text was not available"
)

_NOT_COVERED = (
    "Not covered: outer lr gamma != 1, outer momentum / Nesterov outer steps, AdamW or other "
    "adaptive inner optimizers."
)


def bound_from_theorem(th: PALSGDTheorem, **fields: Any) -> Bound:
    """A :class:`Bound` whose expression, conditions and step come from the theorem object;
    ``fields``: ``name``, ``title``, ``assumptions``, ``algorithm``, ``notes``."""
    return theorem_bound(th, provenance=_PROVENANCE, recommended_step=th.recommended_step, **fields)


def _palsgd(coins: str, name: str, title: str, notes: str) -> Bound:
    """The registered PALSGD bound of Theorem 1 with the coin model ``coins``."""
    return register(
        bound_from_theorem(
            theorem(coins),
            name=name,
            title=title,
            assumptions=(*HETEROGENEOUS_LOCAL_SGD, COIN_ASSUMPTIONS[coins]),
            algorithm=AlgorithmSpec.of("palsgd", coins=coins),
            notes=notes + _NOT_COVERED,
        )
    )


PALSGD = _palsgd(
    "independent",
    "palsgd",
    "PALSGD, inner SGD, outer averaging, independent coins (derived here)",
    "Valid for 0 < p < 1 (at p = 0 use local_sgd_ours: the terms eta^2 (1-p)/p are "
    "undefined there and the conditions report failure). The pull enters as L -> L + eta "
    "in the drift terms and through eta^2 (1-p)/p in C3/C4; the coin adds a factor "
    "1/(1-p) to the noise and a heterogeneity term 8 alpha L p zeta^2/(K(1-p)). ",
)

PALSGD_SHARED = _palsgd(
    "shared",
    "palsgd_shared_coins",
    "PALSGD, inner SGD, outer averaging, shared coins (derived here)",
    "Shared coins: the coin variance is not averaged over the K workers (no 1/K on the "
    "pull-variance terms) but does not see the heterogeneity. Valid for 0 < p < 1. ",
)

LOCAL_SGD_OURS = register(
    bound_from_theorem(
        local_sgd_theorem(),
        name="local_sgd_ours",
        title="Local SGD with outer averaging: the p = 0 case of the PALSGD theorem (derived here)",
        assumptions=HETEROGENEOUS_LOCAL_SGD,
        algorithm="local_sgd",
        notes=(
            "Obtained from the PALSGD theorem by eta = 0 then p = 0 (no pull happens at p = 0). "
            "At H = 1 it is exactly twice the minibatch SGD bound 'sgd' (the absorption of the "
            "heterogeneity reserves half of the descent); the sharp form of the theorem equals "
            "'sgd' there."
        ),
    )
)
