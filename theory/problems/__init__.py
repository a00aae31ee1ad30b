"""Synthetic distributed problems whose constants are known exactly (or bounded, as stated).

A :class:`Problem` is ``f(x) = (1/K) sum_k f_k(x)`` over ``x in R^d``, one local function
per worker, with a stochastic-gradient oracle and the declared constants of the theory
(see ``theory.assumptions``):

* ``L``: every ``f_k`` is ``L``-smooth (A1),
* ``sigma2``: ``E||g_k(x) - grad f_k(x)||^2 <= sigma2`` per worker and step (A2),
* ``zeta2``: ``sup_x (1/K) sum_k ||grad f_k(x) - grad f(x)||^2 <= zeta2`` (A3),
* ``f_star``: ``inf f >= f_star`` (A4); ``F0 = f(x0) - f_star``.

``problem.exactness`` says for each constant whether it is ``"exact"`` (the supremum /
infimum is attained or approached) or only ``"upper bound"`` / ``"lower bound"``; the
derivation of each value is in the docstring of the problem's factory. Every array is
float64; a batch of worker iterates ``X`` has shape ``(..., K, d)`` (leading dims e.g.
``R`` Monte-Carlo replicas), a batch of points ``x`` has shape ``(..., d)``.

Built-in problems (:data:`PROBLEMS`, :func:`make_problem`):

* ``"quadratic"``: ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)``, all constants exact.
* ``"cosine"``: separable ``sum_i x_i^2/2 + c cos(w x_i)`` plus per-worker linear terms,
  nonconvex when ``c w^2 > 1``, all constants exact (``f_star`` by certified 1-D global
  minimisation).
* ``"robust_regression"``: Geman-McClure or Cauchy loss on a data matrix (nonconvex).
* ``"logistic"``: logistic regression with the nonconvex regulariser
  ``lambda sum_i x_i^2/(1 + x_i^2)``.

Noise models: ``"gaussian"`` (isotropic, per-coordinate variance ``sigma^2/d``),
``"rademacher"`` (coordinates ``+-sigma/sqrt(d)``), ``"finite_sum"`` (true minibatch
sampling, with replacement, from a per-worker finite sum), ``"none"``.

:func:`check_constants` samples a problem and raises :class:`~core.errors.UserInputError`
when a declared constant is contradicted; use it on any problem you register.

Files: ``base.py`` the base class :class:`Problem` (constants, noise models, oracle calls);
``args.py`` the factories' common keywords :class:`ProblemArgs` and argument helpers
(noise variance, heterogeneity and finite-sum scaling); ``quadratic.py``, ``cosine.py``,
``data.py`` (the shared base of the data problems) and ``regression.py`` (robust and
logistic regression, their data keywords :class:`DataOptions`) the built-in problems and
their factories; ``function.py`` problems from user callables; ``registry.py``
:data:`PROBLEMS`, :func:`register_problem`, :func:`make_problem`; ``constants.py``
:func:`check_constants`.
"""

from core.lazy import lazy_exports

# lazy (core.lazy): a module of the package (base.py for NOISE_MODELS) is imported without
# scipy, which the constants' checks need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "theory.problems.args": ("ProblemArgs",),
        "theory.problems.base": (
            "NOISE_MODELS",
            "Problem",
        ),
        "theory.problems.constants": (
            "ConstantsReport",
            "check_constants",
            "with_declared",
        ),
        "theory.problems.cosine": (
            "CosineProblem",
            "make_cosine",
            "minimize_1d_global",
        ),
        "theory.problems.function": ("FunctionProblem",),
        "theory.problems.quadratic": (
            "QuadraticProblem",
            "make_quadratic",
        ),
        "theory.problems.registry": (
            "PROBLEMS",
            "make_problem",
            "problem_names",
            "register_problem",
        ),
        "theory.problems.regression": (
            "DataOptions",
            "LogisticProblem",
            "RobustRegressionProblem",
            "make_logistic",
            "make_robust_regression",
        ),
    },
)

__all__ = [
    "NOISE_MODELS",
    "Problem",
    "ProblemArgs",
    "DataOptions",
    "QuadraticProblem",
    "CosineProblem",
    "RobustRegressionProblem",
    "LogisticProblem",
    "FunctionProblem",
    "make_quadratic",
    "make_cosine",
    "make_robust_regression",
    "make_logistic",
    "PROBLEMS",
    "register_problem",
    "make_problem",
    "problem_names",
    "ConstantsReport",
    "check_constants",
    "minimize_1d_global",
    "with_declared",
]
