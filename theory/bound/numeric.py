"""Numerics of a bound without sympy: :class:`CompiledBound`, the compiled formulas, the
conditions and the step-size, ``H`` and rounds searches.

A :class:`CompiledBound` holds what :class:`theory.bound.Bound` computes from its sympy
expressions once (the lambdified Python source of the expression, its terms, the condition
sides, the recommended step and the expanded speed-up split of :meth:`CompiledBound.max_H`)
and everything the checker prints about the bound. It is built from a ``Bound`` by
:func:`theory.bound.cache.compiled` (or loaded from the on-disk cache), so ``palsgd check``
runs without importing sympy. Every numeric method of ``Bound`` is the method of the same
name here; units, vectorisation and the assumptions of the searches are documented on
:class:`theory.bound.Bound`.

The compiled formulas are :class:`~theory.bound.compiled_fn.CompiledFn`; the searches are the
grid searches of :mod:`theory.bound.search`; the results are the types of
:mod:`theory.bound.results`. Their names are re-exported here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice, check_int, check_number
from theory.assumptions import Assumption
from theory.bound.compiled_fn import CODE_TAG, MODULES, CompiledFn, resolve_globals
from theory.bound.results import ConditionResult, MaxH, OptimalStep, binding
from theory.bound.search import (
    GRID,
    ext,
    first_true_count,
    largest_feasible,
    largest_true_integer,
    log_minimiser,
    shape_of,
)
from theory.validation import validate

__all__ = [
    "CODE_TAG",
    "GRID",
    "MODULES",
    "RTOL",
    "CompiledBound",
    "CompiledFn",
    "ConditionResult",
    "MaxH",
    "OptimalStep",
    "resolve_globals",
]

#: relative tolerance for a non-strict condition ``lhs <= rhs``: it holds when
#: ``lhs <= rhs + RTOL * (|lhs| + |rhs|)``. Four machine epsilons: this absorbs the rounding
#: of evaluating the two sides in floating point only (e.g. ``alpha = 1/L`` evaluated as
#: ``alpha * L = 1.0000000000000002``), nothing more.
RTOL = 4 * sys.float_info.epsilon

Arrays = Mapping[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class CompiledBound:
    """A bound's metadata and compiled numerics (no sympy); see the module docstring.

    ``conditions``: ``(name, text, description, strict)`` per condition; ``terms``: the
    labels of the additive terms; ``recommended_step``: its text (``None``: none);
    ``speedup``: the compiled (leading, rest) split of the rate at the recommended step.
    ``measured``: what the bound's left-hand side averages (:attr:`theory.bound.Bound.measured`);
    ``refuted``: :attr:`theory.bound.Bound.refuted`. ``algorithm``, ``outers``: the spec the
    bound is stated for and the outer updates it covers (:attr:`theory.bound.Bound.algorithm`);
    ``algorithms``: the names that covers.
    """

    name: str
    title: str
    provenance: str
    derived_here: bool
    algorithms: tuple[str, ...]
    assumptions: tuple[Assumption, ...]
    notes: str
    recommended_step: str | None
    step_name: str
    parameters: tuple[str, ...]
    uses_H: bool
    terms: tuple[str, ...]
    conditions: tuple[tuple[str, str, str, bool], ...]
    f_expression: CompiledFn
    f_terms: CompiledFn
    f_conditions: CompiledFn | None
    f_recommended: CompiledFn | None
    speedup: tuple[CompiledFn, CompiledFn] | None
    measured: str = "iterates"
    refuted: str = ""
    algorithm: Any = None
    outers: tuple[str, ...] = ()

    # ----------------------------------------------------------------- input handling
    def _arrays(
        self, values: Mapping[str, Any], drop: Sequence[str] = ()
    ) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
        """Validate once; return float arrays keyed by project name, and their broadcast shape."""
        vals = validate(values)
        arr = {k: np.asarray(v, dtype=float) for k, v in vals.items() if k not in drop}
        try:
            shape = shape_of(arr)
        except ValueError as exc:
            raise UserInputError(
                f"bound {self.name!r}: parameter arrays do not broadcast: {exc}"
            ) from None
        return arr, shape

    # ----------------------------------------------------------------- numerics on arrays
    def _value(self, arr: Arrays, shape: tuple[int, ...]) -> np.ndarray:
        return self.f_expression(arr, shape)

    def _margins(
        self, arr: Arrays, shape: tuple[int, ...], rtol: float = RTOL
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per condition: (holds, margin); ``rtol`` is the rounding allowance (see RTOL)."""
        if self.f_conditions is None:
            return []
        sides = self.f_conditions(arr, shape)
        out = []
        for i, (_, _, _, strict) in enumerate(self.conditions):
            small, big = sides[2 * i], sides[2 * i + 1]
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, not holding
                m = big - small
                holds = m > 0 if strict else m >= -rtol * (np.abs(small) + np.abs(big))
            out.append((holds & np.isfinite(m), m))
        return out

    def _holds(self, arr: Arrays, shape: tuple[int, ...], rtol: float = RTOL) -> np.ndarray:
        res = self._margins(arr, shape, rtol)
        if not res:
            return np.ones(shape, dtype=bool)
        return np.logical_and.reduce([h for h, _ in res])

    def feasible(self, arr: Arrays, shape: tuple[int, ...]) -> np.ndarray:
        """Every condition holds exactly (margins >= 0, > 0 if strict; no rounding allowance)
        at already-validated float arrays ``arr`` of broadcast shape ``shape``."""
        return self._holds(arr, shape, rtol=0.0)

    def _max_step_arr(self, arr: Arrays, shape: tuple[int, ...]) -> np.ndarray:
        """Largest feasible step (margins >= 0 exactly) at validated arrays."""
        if self.f_conditions is None:  # nothing limits the step
            return np.full(shape, np.inf)
        grid, step = ext(arr), self.step_name
        return largest_feasible(lambda a: self._holds({**grid, step: a}, a.shape, rtol=0.0), shape)

    def _optimal_step_arr(self, arr: Arrays, shape: tuple[int, ...]) -> np.ndarray:
        """Minimiser over ``[alpha_max 1e-20, alpha_max]`` of the bound at validated arrays
        (``[1e-20, 1e20]`` without a limit; NaN where no step is feasible)."""
        step, grid = self.step_name, ext(arr)
        amax = self._max_step_arr(arr, shape)
        unbounded, feasible = np.isinf(amax), ~np.isnan(amax)
        top = np.where(unbounded, 1e20, np.where(feasible, amax, 1.0))

        def f(logs: np.ndarray) -> np.ndarray:  # logs: (*shape, n)
            v = self._value({**grid, step: np.exp(logs)}, logs.shape)
            return np.where(np.isnan(v), np.inf, v)

        best = log_minimiser(f, top, np.where(unbounded, 40.0, 20.0), ~unbounded)
        return np.where(feasible, best, np.nan)

    # ----------------------------------------------------------------- public numerics
    def evaluate(self, **values: Any) -> np.ndarray:
        """Value of the bound (vectorised; parameters may be arrays, aliases accepted)."""
        arr, shape = self._arrays(values)
        return self._value(arr, shape)

    def __call__(self, **values: Any) -> np.ndarray:
        """``b(L=..., sigma=..., ...)`` is ``b.evaluate(L=..., sigma=..., ...)``."""
        return self.evaluate(**values)

    def at_optimal_step(self, **values: Any) -> OptimalStep:
        """The bound at :meth:`optimal_step`: that step and the value there (vectorised;
        NaN where no step meets the conditions; a given ``alpha`` is ignored)."""
        arr, shape = self._arrays(values, drop=(self.step_name,))
        a = self._optimal_step_arr(arr, shape)
        ok = np.isfinite(a)
        v = self._value({**arr, self.step_name: np.where(ok, a, 1.0)}, shape)
        return OptimalStep(alpha=a, value=np.where(ok, v, np.nan))

    def term_values(self, **values: Any) -> list[tuple[str, np.ndarray]]:
        """Each additive term's value, labelled by its sympy string (order of :attr:`terms`)."""
        arr, shape = self._arrays(values)
        return list(zip(self.terms, self.f_terms(arr, shape), strict=True))

    def condition_report(self, **values: Any) -> list[ConditionResult]:
        """Each condition's verdict and margin (``big - small``; >= 0 means it holds)."""
        arr, shape = self._arrays(values)
        return [
            ConditionResult(name, text, h, m, desc)
            for (name, text, desc, _), (h, m) in zip(
                self.conditions, self._margins(arr, shape), strict=True
            )
        ]

    def conditions_hold(self, **values: Any) -> np.ndarray:
        """True where every condition holds (vectorised)."""
        arr, shape = self._arrays(values)
        return self._holds(arr, shape)

    def recommended_step_value(self, **values: Any) -> np.ndarray | None:
        """The recommended step at ``values`` (vectorised, aliases accepted).

        ``None`` if the bound has no recommended step or ``values`` lack one of its
        parameters.
        """
        f = self.f_recommended
        if f is None:
            return None
        arr, shape = self._arrays(values)
        if any(n not in arr for n in f.names):
            return None
        return f(arr, shape)

    def max_step(self, *, iters: int | None = None, **values: Any) -> np.ndarray:
        """Largest step ``alpha`` for which every condition holds (margins >= 0 in floating point).

        ``inf`` if the conditions hold up to ``alpha = 1e12``; NaN if they fail already at
        ``alpha = 1e-14``. Vectorised search in ``log(alpha)`` (decades, then grids of
        candidates down to a relative width of about 1e-14); assumes the feasible set is
        ``(0, alpha_max]``. A given ``alpha`` is ignored; ``iters`` is accepted for
        compatibility and not used.
        """
        arr, shape = self._arrays(values, drop=(self.step_name,))
        return self._max_step_arr(arr, shape)

    def optimal_step(self, *, iters: int | None = None, **values: Any) -> np.ndarray:
        """Step ``alpha`` minimising the bound subject to the conditions.

        Vectorised grid search in ``log(alpha)`` over ``[alpha_max * 1e-20, alpha_max]``
        (``[1e-20, 1e20]`` when no condition limits ``alpha``), each round keeping the two
        grid cells around the best point, to a relative width of about 1e-15; assumes the
        bound is unimodal in ``log(alpha)``. NaN where no step is feasible. A given
        ``alpha`` is ignored; ``iters`` is accepted for compatibility and not used.
        """
        arr, shape = self._arrays(values, drop=(self.step_name,))
        return self._optimal_step_arr(arr, shape)

    def max_H(
        self,
        *,
        factor: float = 1.0,
        step: str | float = "recommended",
        h_max: int = 10**9,
        **values: Any,
    ) -> MaxH:
        """Largest sync interval ``H`` that keeps linear speed-up, and that keeps the conditions.

        ``speedup``: with ``step="recommended"``, the largest ``H`` such that the bound's
        higher-order terms (those that decay faster in ``T`` than the leading term of
        :meth:`theory.bound.Bound.rate`) are at most ``factor`` times the leading term;
        otherwise the largest ``H`` with ``bound(H) <= (1 + factor) * bound(1)`` at that step.
        ``conditions``: largest ``H`` for which the conditions hold at that step.
        ``step`` is ``"recommended"`` (the bound's schedule; falls back to ``"optimal"`` if
        it has none), ``"optimal"`` (numeric optimum at each H) or a number. A given ``H``
        (and, unless ``step`` is a number, ``alpha``) is ignored. NaN where ``H = 1``
        already fails, and ``h_max`` where no limit was found below it (always, if the bound
        does not depend on ``H``). The result (:class:`~theory.bound.results.MaxH`) also
        holds the smaller of the two limits, which one binds, and the step used there.
        """
        factor = check_number("factor", factor, 0.0, low_open=True)
        h_max = check_int("h_max", h_max, 1, integral_floats=True)
        if step == "recommended" and self.recommended_step is None:
            step = "optimal"
        arr, shape = self._max_H_arrays(step, values)
        with_step = self._with_step(step, ext(arr))
        if self.uses_H:
            speedup = largest_true_integer(
                self._speedup_test(step, factor, ext(arr), shape, with_step), shape, float(h_max)
            )
            conditions = largest_true_integer(
                lambda hv: self._holds(with_step(hv), hv.shape), shape, float(h_max)
            )
        else:
            speedup = np.full(shape, float(h_max))
            conditions = speedup.copy()
        H = np.asarray(np.minimum(speedup, conditions))
        at = np.where(np.isfinite(H), H, 1.0)[..., None]
        alpha = np.broadcast_to(with_step(at)[self.step_name], at.shape)[..., 0]
        return MaxH(
            H=H,
            speedup=speedup,
            conditions=conditions,
            binding=binding(speedup, conditions, float(h_max)),
            step=step,
            alpha=np.where(np.isfinite(H), alpha, np.nan),
        )

    def _max_H_arrays(
        self, step: str | float, values: Mapping[str, Any]
    ) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
        """Validated arrays of :meth:`max_H` (a numeric ``step`` among them)."""
        stepname = self.step_name
        drop = ("H",) if isinstance(step, int | float) else ("H", stepname)
        arr, shape = self._arrays(values, drop=drop)
        if isinstance(step, int | float):
            arr[stepname] = np.asarray(validate({stepname: step})[stepname], dtype=float)
            shape = shape_of(arr)
        else:
            check_choice(
                "max_H step", step, ("recommended", "optimal"), plural="steps (or a number)"
            )
        return arr, shape

    def _with_step(
        self, step: str | float, grid: Arrays
    ) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
        """``hv -> arrays at H = hv`` with the step rule ``step`` applied (``hv``: a grid)."""

        def with_step(hv: np.ndarray) -> dict[str, np.ndarray]:  # hv: (*shape, n)
            a = {**grid, "H": hv}
            if step == "recommended":
                a[self.step_name] = self.f_recommended(a, hv.shape)
            elif step == "optimal":
                a[self.step_name] = self._optimal_step_arr(a, hv.shape)
            return a

        return with_step

    def _speedup_test(
        self,
        step: str | float,
        factor: float,
        grid: Arrays,
        shape: tuple[int, ...],
        with_step: Callable[[np.ndarray], dict[str, np.ndarray]],
    ) -> Callable[[np.ndarray], np.ndarray]:
        """The predicate "``H`` keeps linear speed-up" of :meth:`max_H` (see there)."""
        if step == "recommended":
            lead_fn, rest_fn = self.speedup

            def speedup_ok(hv: np.ndarray) -> np.ndarray:
                a = {**grid, "H": hv}
                return rest_fn(a, hv.shape) <= factor * lead_fn(a, hv.shape)

            return speedup_ok
        one = np.ones((*shape, 1))
        base = self._value(with_step(one), one.shape)

        def within(hv: np.ndarray) -> np.ndarray:
            return self._value(with_step(hv), hv.shape) <= (1 + factor) * base

        return within

    def rounds_to_eps(self, eps: float, *, t_max: int = 10**15, **values: Any) -> np.ndarray:
        """Communication rounds ``R = T/H`` needed to guarantee bound <= ``eps``.

        ``T = R * H`` (``H = 1`` if the bound has no ``H``: every step is a round). Uses the
        optimal step at each ``T``; the search over ``R`` assumes the optimised bound decreases
        in ``T``. Returns ``inf`` where even ``T = t_max`` is not enough. A given ``T`` and
        ``alpha`` are ignored.
        """
        eps = float(validate(eps=eps)["eps"])
        t_max = check_int("t_max", t_max, 1, integral_floats=True)
        arr, shape = self._arrays(values, drop=("T", self.step_name))
        hv = arr.get("H", np.ones(()))
        grid, step = ext(arr), self.step_name
        r_max = np.floor(t_max / hv) * np.ones(shape)

        def not_ok(r: np.ndarray) -> np.ndarray:  # r: (*shape, n); monotone false -> true
            a = {**grid, "T": r * hv[..., None]}
            best = self._optimal_step_arr(a, r.shape)
            v = self._value({**a, step: np.where(np.isnan(best), 1.0, best)}, r.shape)
            return ~(np.isfinite(best) & (v <= eps)) | (r > r_max[..., None])

        return first_true_count(not_ok, r_max)
