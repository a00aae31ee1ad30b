"""A small framework for machine-checked proof steps.

A proof is a numbered chain of :class:`Lemma` objects. Each lemma states one fact as sympy
expressions and says how it is checked:

``identity``
    ``lhs == rhs``, decided by reducing ``lhs - rhs`` to a canonical rational form
    (:func:`is_zero`). Expectations over a Bernoulli coin and the gradient noise are written
    out as probability-weighted sums over the branches (:class:`Branches`, :func:`expect`).

``certificate``
    ``lhs <= rhs``, proved by an explicit certificate: the identity

        rhs - lhs == sum_i m_i * h_i + sum_j n_j

    where each ``h_i`` is the slack of a hypothesis (``h_i >= 0``: an assumption, a
    step-size condition or an earlier lemma; or ``h_i == 0``, whose multiplier may have any
    sign), each multiplier ``m_i`` of an inequality hypothesis and each extra term ``n_j``
    is *manifestly nonnegative* (:func:`manifestly_nonnegative`: built from squares,
    nonnegative symbols and nonnegative constants by sums, products and quotients, after
    the :class:`Domain` reparametrisation). Sums of squares (SOS) are the special case
    without hypotheses. The identity is checked like an ``identity`` lemma.

``sampling``
    ``lhs <= rhs`` checked at many random points with exact rationals (sympy ``Rational``)
    inside a region given by relations; used only as a cross-check or where no
    certificate is given, and always labelled as such.

``cited``
    A published fact (for example the descent lemma of an L-smooth function), with its
    reference and a numerical spot check.

Vector quantities are explicit small-dimensional symbolic vectors (:func:`vector`). Every
identity and certificate in this project is a polynomial of degree two in the vectors, so it
holds in every dimension as soon as it holds coordinate-wise, that is, as a polynomial
identity in the coordinates of the small vectors used here.

Files: :mod:`.algebra` (symbolic vectors, branch sums), :mod:`.deciders` (zero test, the
sign-check :class:`Domain`, structural nonnegativity), :mod:`.kinds` (:class:`Identity`,
:class:`Inequality`, :class:`Cited`, :class:`Family`), :mod:`.sampling`
(:class:`SampledInequality`), :mod:`.induction` (:class:`Induction`: a claim for every
integer from a base case and a step), :mod:`.links` (:func:`from_lemma`, :func:`borrow`:
hypotheses built from lemma objects).
"""

from theory.proofs.lemmas.algebra import Branches, dot, expect, mean_zero_two_point, sqnorm, vector
from theory.proofs.lemmas.deciders import Domain, is_zero, manifestly_nonnegative
from theory.proofs.lemmas.induction import Induction
from theory.proofs.lemmas.kinds import (
    CheckResult,
    Cited,
    Family,
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
)
from theory.proofs.lemmas.links import borrow, by_key, check_all, from_lemma
from theory.proofs.lemmas.sampling import SampledInequality, exact_function

__all__ = [
    "Branches",
    "CheckResult",
    "Cited",
    "Domain",
    "Family",
    "Hypothesis",
    "Identity",
    "Induction",
    "Inequality",
    "Lemma",
    "SampledInequality",
    "borrow",
    "by_key",
    "check_all",
    "dot",
    "exact_function",
    "expect",
    "from_lemma",
    "is_zero",
    "manifestly_nonnegative",
    "mean_zero_two_point",
    "sqnorm",
    "vector",
]
