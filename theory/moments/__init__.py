"""Exact first and second moments of every algorithm on heterogeneous quadratics.

Files: ``inputs.py`` the quadratics the recursions take (:class:`MatrixQuadratic`, the
quadratics of :mod:`theory.problems`) reduced to A's eigenbasis; ``spec.py`` the check that
an :class:`~theory.algorithm.AlgorithmSpec` (the one spec every layer takes) has a moment
recursion here; ``branches.py`` one local step's two branches and the
closed forms of a round; ``step.py`` and ``exact.py`` the step-by-step second-moment
recursion (:func:`exact_moments`, ``O(T d K^2)``); ``rounds.py`` the within-round moment
recursion and the round map; ``oracle.py`` the fast exact oracle of one run by round
transfer maps (:func:`exact_oracle`, ``O(H d + d log(T/H))``); ``batch.py`` the same for
many designs at once (:func:`oracle_batch`); ``easgd.py`` EASGD's batched exact oracle.
"""

from theory.moments.batch import BatchResult, oracle_batch
from theory.moments.branches import (
    Branch,
    local_sgd_round_mean_factor,
    local_step_branches,
    within_round_closed_form,
    within_round_moments,
)
from theory.moments.easgd import oracle_batch_easgd
from theory.moments.exact import ExactCurves, exact_moments
from theory.moments.inputs import MatrixQuadratic
from theory.moments.oracle import Directions, OracleResult, directions_of, exact_oracle, oracle_on

__all__ = [
    "MatrixQuadratic",
    "ExactCurves",
    "Branch",
    "exact_moments",
    "local_step_branches",
    "within_round_moments",
    "within_round_closed_form",
    "local_sgd_round_mean_factor",
    "Directions",
    "OracleResult",
    "directions_of",
    "exact_oracle",
    "oracle_on",
    "BatchResult",
    "oracle_batch",
    "oracle_batch_easgd",
]
