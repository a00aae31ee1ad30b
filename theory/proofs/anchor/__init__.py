"""Theorem 2 (derived here): PALSGD and Local SGD with an outer learning rate and momentum.

The analysis follows the anchor sequence ``z_r`` (the model the outer optimizer holds)
instead of the per-step average, so the outer step can be any of

* outer SGD ``z <- z + gamma Delta`` (``gamma = 1``: plain averaging),
* heavy-ball ``z <- z + gamma Delta + mu (z - z_prev)``,
* PyTorch Nesterov ``buf <- mu buf - Delta; z <- z - gamma (-Delta + mu buf)``,

with ``Delta = mean_k x_{k,H} - z`` the round's displacement. The bound is on
``(1/R) sum_{r<R} E||grad f(z_r)||^2``, ``R = T/H`` rounds. Three drift routes give three
registered theorems (``docs/anchor_theorem.md``): ``"palsgd"`` (any pull rate, summed
drift), ``"pull_aware"`` (``eta > L``: the drift contracts, horizon
``min(H - 1, 2/(alpha (eta - L)))``) and ``"local_sgd"`` (``p = 0``).

Every lemma is one function returning a :mod:`theory.proofs.lemmas` object; a hypothesis
taken from another lemma is built from that lemma's object (:func:`borrow`,
:func:`theory.proofs.lemmas.from_lemma`), never retyped.

Files, in the order the proof reads: :mod:`.notation` (symbols, :func:`pieces`),
:mod:`.outer` (O1-O4), :mod:`.drift` (O6-O8s), :mod:`.rounds` (O5, O9, O10) and
:mod:`.theorem` (the chain, its conditions and bound).
"""

from __future__ import annotations

from theory.proofs.anchor.drift import (
    o6_pull_contraction,
    o7_drift_recursion,
    o8a_drift_horizon_t,
    o8b_drift_horizon_cap,
    o8s_summed_drift,
)
from theory.proofs.anchor.notation import KINDS, pieces
from theory.proofs.anchor.outer import (
    o1_virtual_sequence,
    o2_young,
    o3_outer_descent,
    o4_anchor_step,
)
from theory.proofs.anchor.rounds import o5_displacement, o9_round, o10_theorem
from theory.proofs.anchor.theorem import AnchorTheorem, build_chain, theorem
from theory.proofs.lemmas import borrow

final_lemma = o10_theorem

__all__ = [
    "KINDS",
    "AnchorTheorem",
    "borrow",
    "build_chain",
    "final_lemma",
    "o1_virtual_sequence",
    "o2_young",
    "o3_outer_descent",
    "o4_anchor_step",
    "o5_displacement",
    "o6_pull_contraction",
    "o7_drift_recursion",
    "o8a_drift_horizon_t",
    "o8b_drift_horizon_cap",
    "o8s_summed_drift",
    "o9_round",
    "o10_theorem",
    "pieces",
    "theorem",
]
