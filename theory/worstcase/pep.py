"""The class oracle: the worst case over the whole class, by performance estimation.

For a :class:`~theory.worstcase.design.ClassDesign`, :func:`solve` builds the performance
estimation problem (PEP; Drori and Teboulle 2014, Taylor, Hendrickx and Glineur 2017) with
PEPit (Goujaud et al., "PEPit: computer-assisted worst-case analyses of first-order
optimization methods in Python", Math. Prog. Comp. 2024) and solves its SDP with Clarabel
(an interior-point solver: SCS at its default tolerance is off by about 3e-3 relative)
through cvxpy. Variables: the Gram matrix of ``x0`` and every gradient of every ``f_k`` at
every point the method visits, and the function values there. Constraints:

* A1, each ``f_k`` ``L``-smooth: the interpolation conditions of smooth nonconvex functions
  (Taylor, Hendrickx and Glineur 2017, Theorem 3.10; PEPit's ``SmoothFunction``), between
  every pair of points of ``f_k``: necessary and sufficient for an ``L``-smooth ``f_k``
  through those points;
* A3 at every visited point ``y`` (worker iterates, averages, anchors, the last anchor):
  ``(1/K) sum_k ||grad f_k(y) - grad f(y)||^2 <= zeta^2``;
* A4 at every visited ``y``: ``f(x0) - f(y) <= F0`` and
  ``f(y) - (f(x0) - F0) >= ||grad f(y)||^2 / (2L)`` (both hold for every ``L``-smooth ``f``
  with ``f(x0) - inf f <= F0``: a gradient step of ``1/L`` from ``y`` descends by at least
  ``||grad f(y)||^2 / (2L)``).

A3 and A4 are imposed at the visited points only, so the PEP's value is an **upper bound on
the true worst case over the class** (a relaxation): a bound at or above it holds for every
function of the class at that design (certified on this relaxation); a bound below it is
only exceeded on the relaxed class until explicit functions that satisfy A1-A4 everywhere
reach above it (:mod:`theory.worstcase.lift`). The value reported is the dual objective (a
proof of the bound, up to the residuals :class:`WorstCase` reports).
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.worstcase.design import MAX_POINTS, ClassDesign
from theory.worstcase.trajectory import run

__all__ = ["WorstCase", "solve", "SOLVER", "CLASS_TEXT", "RELAXATIONS"]

#: where A3 and A4 are imposed: ``"full"``, at every visited point (each ``f_k`` evaluated
#: at every worker's iterates too); ``"compact"``, at the shared points only (anchors,
#: averages, common iterates; each ``f_k`` evaluated at those and at its own worker's
#: iterates): looser, but its value is the same for every ``K >= 2`` (docs/verification.md)
RELAXATIONS = ("full", "compact")

SOLVER = "CLARABEL"
#: the class, in one line (reports and ``--help``)
CLASS_TEXT = (
    "K functions f_k, each L-smooth (nonconvex allowed), f = mean f_k; at every visited point "
    "y: (1/K) sum_k ||grad f_k(y) - grad f(y)||^2 <= zeta^2 (A3), f(x0) - f(y) <= F0 and "
    "f(y) - f(x0) + F0 >= ||grad f(y)||^2/(2L) (A4); sigma = 0"
)


@dataclass
class WorstCase:
    """The class worst case of one design.

    ``value``: the worst case of the measured quantity over the relaxed class (the dual
    objective, in the design's units); ``primal``: the primal objective (equal up to the
    solver's tolerance). ``status``: the solver's. ``dual_residual``: how far the dual
    certificate is from feasible (the most negative eigenvalue of the dual matrix and of the
    inequality multipliers, in normalised units; 0 when exact). ``primal_residual``: the
    largest violation of a primal constraint. ``points``: the points each ``f_k`` is
    evaluated at; ``elapsed_s``: wall time. ``ok`` for an optimal (or almost optimal)
    solution and for the trivial class.
    """

    design: ClassDesign
    value: float
    primal: float
    status: str
    dual_residual: float
    primal_residual: float
    points: int
    elapsed_s: float
    solver: str = SOLVER

    @property
    def ok(self) -> bool:
        """Whether the value is usable: the solver reports an optimal (or almost optimal)
        solution, or the class is trivial (worst case 0)."""
        return self.status in ("optimal", "optimal_inaccurate", "trivial")

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.design.describe(), "value": self.value, "primal": self.primal,
            "status": self.status, "solver": self.solver, "dual_residual": self.dual_residual,
            "primal_residual": self.primal_residual, "points": self.points,
            "elapsed_s": self.elapsed_s,
        }  # fmt: skip


class _PepOracle:
    def __init__(self, fs: list[Any]) -> None:
        self.fs = fs

    def grad(self, k: int, y: Any) -> Any:
        return self.fs[k].gradient(y)


def _build(design: ClassDesign, relaxation: str = "full") -> tuple[Any, int]:
    """The PEPit problem of ``design`` (normalised: ``L = 1``, unit 1) and the points per
    function (:data:`RELAXATIONS`)."""
    from PEPit import PEP
    from PEPit.functions import SmoothFunction

    spec, zeta, F0 = design.normalised()
    K = design.K
    problem = PEP()
    fs = [problem.declare_function(SmoothFunction, L=1.0) for _ in range(K)]
    x0 = problem.set_initial_point()
    traj = run(spec, K, design.T, x0, _PepOracle(fs), measured=design.measured,
               pulls=design.pulls, zero=0 * x0)  # fmt: skip
    n = len(traj.visited)
    if n > MAX_POINTS:
        raise UserInputError(
            f"the design visits {n} points (the class oracle's SDP takes at most {MAX_POINTS} "
            "per function): shorten T or fix the pull pattern"
        )
    f0 = None
    for y in traj.visited if relaxation == "full" else traj.shared():
        oracles = [f.oracle(y) for f in fs]
        gbar = (1.0 / K) * _sum([g for g, _ in oracles])
        fbar = (1.0 / K) * _sum([v for _, v in oracles])
        if f0 is None:
            f0 = fbar  # x0 is visited first
        if K > 1:
            spread = (1.0 / K) * _sum([(g - gbar) ** 2 for g, _ in oracles])
            problem.add_constraint(spread <= zeta**2)
        problem.add_constraint(f0 - fbar <= F0)
        problem.add_constraint(fbar - f0 + F0 >= 0.5 * gbar**2)
    metric = _sum([w * ((1.0 / K) * _sum([f.gradient(y) for f in fs])) ** 2
                   for w, y in traj.metric])  # fmt: skip
    problem.set_performance_metric(metric)
    return problem, n


def _sum(items: list[Any]) -> Any:
    total = items[0]
    for it in items[1:]:
        total = total + it
    return total


def solve(design: ClassDesign, relaxation: str = "full") -> WorstCase:
    """The class worst case of ``design`` (module docstring): PEPit states the problem, the
    SDP goes to Clarabel through cvxpy as one vectorised constraint (:func:`_sdp`).

    The value is in the design's units (``u`` times the normalised value,
    :attr:`ClassDesign.unit`); a trivial class (``F0 = zeta = 0``) has worst case 0.
    """
    start = time.perf_counter()
    u = design.unit
    if u == 0.0:
        return WorstCase(design, 0.0, 0.0, "trivial", 0.0, 0.0, 1, time.perf_counter() - start)
    problem, n = _build(design, relaxation)
    dual, primal, status, dres, pres = _sdp(problem)
    return WorstCase(design, dual * u, primal * u, status, dres, pres, n,
                     time.perf_counter() - start)  # fmt: skip


def _rows(problem: Any) -> tuple[Any, Any, np.ndarray, int]:
    """Every constraint ``expression <= 0`` of the PEPit problem as sparse rows over
    ``vec(G)`` (Gram matrix, ``n x n``) and ``F`` (function values and the objective)."""
    import scipy.sparse as sps
    from PEPit.expression import Expression
    from PEPit.point import Point

    problem._prepare_constraints(verbose=0)
    n, m = Point.counter, Expression.counter
    gi, gj, gv, fi, fj, fv = [], [], [], [], [], []
    const = np.zeros(len(problem._list_of_prepared_constraints))
    for r, c in enumerate(problem._list_of_prepared_constraints):
        if c.equality_or_inequality != "inequality":
            raise RuntimeError("the class oracle states inequalities only")
        e = c.expression
        items = [(e, 1.0)] if e.get_is_leaf() else e.decomposition_dict.items()
        for key, w in items:
            if isinstance(key, Expression):
                fi.append(r)
                fj.append(key.counter)
                fv.append(w)
            elif isinstance(key, tuple):
                a, b = key[0].counter, key[1].counter
                gi += [r, r]
                gj += [a + b * n, b + a * n]
                gv += [w / 2, w / 2]
            else:
                const[r] += w
    rows = len(const)
    AG = sps.csr_matrix((gv, (gi, gj)), shape=(rows, n * n))
    AF = sps.csr_matrix((fv, (fi, fj)), shape=(rows, m))
    return AG, AF, const, n


def _sdp(problem: Any) -> tuple[float, float, str, float, float]:
    """Solve the SDP of ``problem``: maximise the objective ``tau`` subject to the rows of
    :func:`_rows` and ``G >= 0``. Returns ``(dual value, primal value, status, dual residual,
    primal residual)``; the dual value ``-c . lambda`` is a bound on the primal up to the
    dual residual (the most negative eigenvalue of ``sum_i lambda_i A_i``, the mismatch of
    the multipliers on ``F``, in normalised units)."""
    import cvxpy as cp

    AG, AF, c, n = _rows(problem)
    G = cp.Variable((n, n), symmetric=True)
    F = cp.Variable(AF.shape[1])
    rows = AG @ cp.vec(G, order="F") + AF @ F + c <= 0
    tau = problem.objective.counter
    prob = cp.Problem(cp.Maximize(F[tau]), [G >> 0, rows])
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            prob.solve(solver=getattr(cp, SOLVER))
        except cp.error.SolverError as exc:
            nan = float("nan")
            return nan, nan, f"solver error: {exc}", nan, nan
    status = str(prob.status)
    if rows.dual_value is None or G.value is None:
        return float("inf"), float("inf"), status, float("nan"), float("nan")
    lam = np.maximum(np.asarray(rows.dual_value, dtype=float), 0.0)
    S = (AG.T @ lam).reshape(n, n, order="F")
    e_tau = np.zeros(AF.shape[1])
    e_tau[tau] = 1.0
    dres = max(0.0, -float(np.min(np.linalg.eigvalsh((S + S.T) / 2))),
               float(np.max(np.abs(AF.T @ lam - e_tau))))  # fmt: skip
    g = np.asarray(G.value)
    viol = AG @ g.reshape(-1, order="F") + AF @ np.asarray(F.value) + c
    pres = max(0.0, float(np.max(viol)), -float(np.min(np.linalg.eigvalsh(g))))
    return float(-c @ lam), float(F.value[tau]), status, dres, pres
