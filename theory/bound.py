"""The :class:`Bound` abstraction: a convergence bound with its conditions and provenance.

A bound states

    (1/T) sum_{t<T} E||grad f(xbar_t)||^2  <=  expression(L, sigma, zeta, F0, K, H, p, alpha, ...)

whenever every step-size condition holds. ``xbar_t`` is the average of the workers'
iterates at step ``t`` (for single-model methods, the model itself; a bound whose averaged
model is different, e.g. EASGD's, says so in its ``notes``). Units: the bound is in units of
squared gradient norm; ``F0`` is in units of loss, ``L`` of loss/length^2, ``sigma`` and
``zeta`` of gradient norm, ``alpha`` of length^2/loss; ``K``, ``H``, ``T`` are counts.

Everything numeric is vectorised: any parameter may be a numpy array, and results have the
broadcast shape of *all* supplied parameters (including ones the bound does not use).
Sympy expressions are compiled once per bound with :func:`sympy.lambdify` and cached.
Public methods validate their inputs once through :func:`theory.validation.validate`;
the iterative solvers work on the validated arrays without validating again.

Numerical methods assume what the encoded bounds satisfy and the tests check:
the bound is unimodal in ``log(alpha)`` (used by :meth:`Bound.optimal_step`), each
condition is monotone in ``alpha`` (holds on an interval ``(0, alpha_max]``, used by
:meth:`Bound.max_step`), and the rate terms and conditions are monotone in ``H``
(used by :meth:`Bound.max_H`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import sympy as sp

from theory import symbols as S
from theory.assumptions import Assumption
from theory.safe_parse import parse_condition, parse_formula
from theory.validation import UserInputError, validate

__all__ = ["Condition", "ConditionResult", "Bound", "RateTerm", "param_name"]

#: relative tolerance for a non-strict condition ``lhs <= rhs``: it holds when
#: ``lhs <= rhs + RTOL * (|lhs| + |rhs|)``. Four machine epsilons: this absorbs the rounding
#: of evaluating the two sides in floating point only (e.g. ``alpha = 1/L`` evaluated as
#: ``alpha * L = 1.0000000000000002``), nothing more.
RTOL = 4 * float(np.finfo(float).eps)


def param_name(sym: sp.Symbol) -> str:
    """Parameter name of a symbol (``epsilon`` is the parameter ``eps``)."""
    return "eps" if sym.name == "epsilon" else sym.name


@dataclass(frozen=True)
class Condition:
    """A step-size or stability condition ``lhs <= rhs`` (or ``<``, ``>=``, ``>``), with meaning."""

    name: str
    relation: sp.core.relational.Relational
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.relation, sp.core.relational.Relational):
            raise TypeError(f"condition {self.name!r}: relation must be a sympy relation")
        if self.relation.rel_op not in ("<=", "<", ">=", ">"):
            raise TypeError(f"condition {self.name!r}: only <, <=, >, >= are supported")

    @property
    def strict(self) -> bool:
        return self.relation.rel_op in ("<", ">")

    @property
    def sides(self) -> tuple[sp.Expr, sp.Expr]:
        """``(small, big)``: the condition reads ``small <= big`` (``<`` if strict)."""
        r = self.relation
        return (r.lhs, r.rhs) if r.rel_op in ("<=", "<") else (r.rhs, r.lhs)

    @property
    def margin(self) -> sp.Expr:
        """``big - small``: the condition holds iff margin >= 0 (> 0 if strict)."""
        small, big = self.sides
        return big - small

    def latex(self) -> str:
        return sp.latex(self.relation)


@dataclass(frozen=True)
class ConditionResult:
    """Verdict of one condition: ``holds`` (bool array) and ``margin = big - small``."""

    name: str
    text: str
    holds: np.ndarray
    margin: np.ndarray
    description: str


@dataclass(frozen=True)
class RateTerm:
    """One group of the rate: ``coefficient * T**t_exponent`` (coefficient free of T)."""

    coefficient: sp.Expr
    t_exponent: sp.Rational

    @property
    def expression(self) -> sp.Expr:
        return self.coefficient * S.T**self.t_exponent

    def __str__(self) -> str:
        return f"({self.coefficient}) * T^({self.t_exponent})"


class _Compiled:
    """A lambdified expression (or tuple of expressions) with its parameter names."""

    __slots__ = ("names", "fn", "owner", "multi")

    def __init__(self, exprs: sp.Expr | Sequence[sp.Expr], owner: str):
        self.multi = isinstance(exprs, list | tuple)
        items = list(exprs) if self.multi else [exprs]
        syms = sorted(
            set().union(*(sp.sympify(e).free_symbols for e in items)), key=lambda s: s.name
        )
        self.names = tuple(param_name(s) for s in syms)
        self.fn: Callable[..., Any] = sp.lambdify(syms, items if self.multi else items[0], "numpy")
        self.owner = owner

    def __call__(self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> Any:
        try:
            args = [arr[n] for n in self.names]
        except KeyError:
            missing = sorted(set(self.names) - set(arr))
            raise UserInputError(f"bound {self.owner!r} needs parameter(s) {missing}") from None
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = self.fn(*args)
        if self.multi:
            return [_shaped(o, shape) for o in out]
        return _shaped(out, shape)


def _shaped(out: Any, shape: tuple[int, ...]) -> np.ndarray:
    out = np.asarray(out, dtype=float)
    if out.shape != shape:
        out = np.array(np.broadcast_to(out, shape))
    return out


def _shape_of(arr: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    return np.broadcast_shapes(*(a.shape for a in arr.values())) if arr else ()


@dataclass(frozen=True, eq=False)
class Bound:
    """A convergence bound on ``(1/T) sum_t E||grad f(xbar_t)||^2``.

    Parameters
    ----------
    name: registry key (``"sgd"``, ``"local_sgd_iid"``, ...).
    title: one-line human title.
    expression: the right-hand side, a sympy expression in :mod:`theory.symbols`.
    conditions: step-size/stability conditions under which the bound holds.
    assumptions: the named hypotheses (:mod:`theory.assumptions`).
    provenance: citation (paper, theorem, equation) or ``"derived here: ..."``.
    derived_here: True for the project's own theorems (not published statements).
    algorithms: the algorithms it covers (``"sgd"``, ``"local_sgd"``, ``"palsgd"``, ...).
    recommended_step: a closed-form step size ``alpha(T, K, ...)`` used by :meth:`rate`
        (usually the step that balances the leading terms); ``None`` means none.
    notes: caveats shown with the bound.
    step_symbol: the step-size symbol the solvers optimise over (default ``alpha``).
    measured: what the left-hand side averages: ``"iterates"`` (default,
        ``(1/T) sum_t E||grad f(xbar_t)||^2``) or ``"anchors"``
        (``(1/R) sum_{r<R} E||grad f(z_r)||^2`` over the anchors of the ``R = T/H`` rounds).
    """

    name: str
    title: str
    expression: sp.Expr
    conditions: tuple[Condition, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    provenance: str = ""
    derived_here: bool = False
    algorithms: tuple[str, ...] = ()
    recommended_step: sp.Expr | None = None
    notes: str = ""
    step_symbol: sp.Symbol = field(default=S.alpha)
    measured: str = "iterates"

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_strings(
        cls,
        name: str,
        expression: str,
        conditions: Sequence[str] | Mapping[str, str] = (),
        **kwargs: Any,
    ) -> Bound:
        """Build a user bound from strings in the project's symbols.

        The text is read by :mod:`theory.safe_parse` (a whitelist over Python's ``ast``:
        numbers, the project's symbols, ``+ - * / **``, ``sqrt, log, exp, min, max, Abs``),
        never evaluated; anything else is refused naming the offending token.

        ``recommended_step`` may also be given as a string.

        >>> b = Bound.from_strings("mine", "2*F0/(alpha*T) + L*alpha*sigma**2/K",
        ...                        ["alpha*L <= 1"], provenance="my notes")
        """

        def parse(text: str, what: str) -> Any:
            try:
                if what == "condition":
                    return parse_condition(text, what)
                return parse_formula(text, what)
            except UserInputError as exc:
                raise UserInputError(f"bound {name!r}: {exc}") from None

        expr = parse(expression, "expression")
        if isinstance(expr, sp.core.relational.Relational) or not isinstance(expr, sp.Expr):
            raise UserInputError(f"bound {name!r}: expression {expression!r} is not a formula")
        items = conditions.items() if isinstance(conditions, Mapping) else enumerate(conditions)
        conds = []
        for key, text in items:
            rel = parse(text, "condition")
            conds.append(Condition(f"C{key + 1}" if isinstance(key, int) else str(key), rel))
        if isinstance(kwargs.get("recommended_step"), str):
            kwargs["recommended_step"] = parse(kwargs["recommended_step"], "recommended_step")
        kwargs.setdefault("title", name)
        return cls(name=name, expression=expr, conditions=tuple(conds), **kwargs)

    def __post_init__(self) -> None:
        allowed = set(S.ALL)
        checks = [("expression", self.expression)]
        checks += [(f"condition {c.name}", c.relation) for c in self.conditions]
        if self.recommended_step is not None:
            checks.append(("recommended_step", self.recommended_step))
        for what, e in checks:
            unknown = e.free_symbols - allowed
            if unknown:
                raise UserInputError(
                    f"bound {self.name!r}: {what} uses unknown symbols "
                    f"{sorted(map(str, unknown))}; use theory.symbols ({[s.name for s in S.ALL]})"
                )
        if self.step_symbol not in allowed:
            raise UserInputError(f"bound {self.name!r}: step symbol must be one of theory.symbols")

    # ----------------------------------------------------------------- structure
    @cached_property
    def parameters(self) -> tuple[str, ...]:
        """Parameter names the bound and its conditions depend on (sorted)."""
        syms = set(self.expression.free_symbols)
        for c in self.conditions:
            syms |= c.relation.free_symbols
        return tuple(sorted(param_name(s) for s in syms))

    @cached_property
    def terms(self) -> tuple[sp.Expr, ...]:
        """The additive terms of the bound, as written (not expanded)."""
        return tuple(sp.Add.make_args(self.expression))

    def latex(self) -> str:
        """LaTeX of the statement: bound and conditions."""
        conds = r",\quad ".join(c.latex() for c in self.conditions)
        body = r"\frac{1}{T}\sum_{t<T}\mathbb{E}\|\nabla f(\bar x_t)\|^2 \le " + sp.latex(
            self.expression
        )
        return body + (r"\quad\text{if}\quad " + conds if conds else "")

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (for ``palsgd bounds --json``)."""
        return {
            "name": self.name,
            "title": self.title,
            "expression": str(self.expression),
            "terms": [str(t) for t in self.terms],
            "latex": self.latex(),
            "conditions": [
                {
                    "name": c.name,
                    "relation": str(c.relation),
                    "latex": c.latex(),
                    "description": c.description,
                }
                for c in self.conditions
            ],
            "assumptions": [str(a) for a in self.assumptions],
            "provenance": self.provenance,
            "derived_here": self.derived_here,
            "algorithms": list(self.algorithms),
            "parameters": list(self.parameters),
            "recommended_step": None
            if self.recommended_step is None
            else str(self.recommended_step),
            "notes": self.notes,
        }

    # ----------------------------------------------------------------- compiled pieces
    def _step_name(self) -> str:
        return param_name(self.step_symbol)

    @cached_property
    def _f_expression(self) -> _Compiled:
        return _Compiled(self.expression, self.name)

    @cached_property
    def _f_terms(self) -> _Compiled:
        return _Compiled(list(self.terms), self.name)

    @cached_property
    def _f_conditions(self) -> _Compiled | None:
        if not self.conditions:
            return None
        sides = [e for c in self.conditions for e in c.sides]
        return _Compiled(sides, self.name)

    @cached_property
    def _f_recommended(self) -> _Compiled | None:
        return (
            None if self.recommended_step is None else _Compiled(self.recommended_step, self.name)
        )

    @cached_property
    def _rate_cache(self) -> dict[Any, list[RateTerm]]:
        return {}

    @cached_property
    def _speedup_cache(self) -> dict[Any, tuple[_Compiled, _Compiled]]:
        return {}

    # ----------------------------------------------------------------- input handling
    def _arrays(
        self, values: Mapping[str, Any], drop: Sequence[str] = ()
    ) -> tuple[dict[str, np.ndarray], tuple[int, ...]]:
        """Validate once; return float arrays keyed by project name, and their broadcast shape."""
        vals = validate(values)
        arr = {k: np.asarray(v, dtype=float) for k, v in vals.items() if k not in drop}
        try:
            shape = _shape_of(arr)
        except ValueError as exc:
            raise UserInputError(
                f"bound {self.name!r}: parameter arrays do not broadcast: {exc}"
            ) from None
        return arr, shape

    # ----------------------------------------------------------------- numerics on arrays
    def _value(self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        return self._f_expression(arr, shape)

    def _margins(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...], rtol: float = RTOL
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per condition: (holds, margin); ``rtol`` is the rounding allowance (see RTOL)."""
        if self._f_conditions is None:
            return []
        sides = self._f_conditions(arr, shape)
        out = []
        for i, c in enumerate(self.conditions):
            small, big = sides[2 * i], sides[2 * i + 1]
            m = big - small
            if c.strict:
                holds = m > 0
            else:
                holds = m >= -rtol * (np.abs(small) + np.abs(big))
            out.append((holds & np.isfinite(m), m))
        return out

    def _holds(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...], rtol: float = RTOL
    ) -> np.ndarray:
        res = self._margins(arr, shape, rtol)
        if not res:
            return np.ones(shape, dtype=bool)
        return np.logical_and.reduce([h for h, _ in res])

    def _max_step_arr(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...], iters: int = 80
    ) -> np.ndarray:
        if self._f_conditions is None:  # nothing limits the step
            return np.full(shape, np.inf)
        step = self._step_name()

        def ok(a: np.ndarray) -> np.ndarray:  # exact: the returned step has margin >= 0
            return self._holds({**arr, step: a}, shape, rtol=0.0)

        lo = np.full(shape, 1e-300)
        hi = np.full(shape, 1e-12)
        ok_lo = ok(np.full(shape, 1e-14))
        ok_hi = ok(hi)
        for _ in range(30):  # grow hi by decades while it is still feasible
            grow = ok_hi & (hi < 1e12)
            if not grow.any():
                break
            lo = np.where(grow, hi, lo)
            hi = np.where(grow, hi * 10.0, hi)
            ok_hi = np.where(grow, ok(hi), ok_hi)
        active = ~ok_hi & ok_lo
        if active.any():
            for _ in range(iters):
                mid = np.sqrt(lo * hi)
                good = ok(mid)
                lo = np.where(good, mid, lo)
                hi = np.where(good, hi, mid)
        out = np.where(ok_hi, np.inf, lo)
        return np.where(ok_lo, out, np.nan)

    def _optimal_step_arr(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...], iters: int = 100
    ) -> np.ndarray:
        step = self._step_name()
        amax = self._max_step_arr(arr, shape)
        unbounded = np.isinf(amax)
        feasible = ~np.isnan(amax)
        top = np.where(unbounded, 1e20, np.where(feasible, amax, 1.0))
        a = np.log(top) - np.where(unbounded, 40.0, 20.0) * np.log(10.0)
        b = np.log(top)
        g = (np.sqrt(5.0) - 1) / 2

        def f(logs: np.ndarray) -> np.ndarray:
            v = self._value({**arr, step: np.exp(logs)}, shape)
            return np.where(np.isnan(v), np.inf, v)

        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = f(c), f(d)
        for _ in range(iters):
            left = fc <= fd
            a, b = np.where(left, a, c), np.where(left, d, b)
            c_new = np.where(left, b - g * (b - a), d)
            d_new = np.where(left, c, a + g * (b - a))
            fc_new = np.where(left, f(c_new), fd)
            fd_new = np.where(left, fc, f(d_new))
            c, d, fc, fd = c_new, d_new, fc_new, fd_new
        best = np.exp((a + b) / 2)
        # the optimum may sit on the boundary alpha_max
        better_top = f(np.log(top)) <= f(np.log(best))
        best = np.where(better_top & ~unbounded, top, best)
        return np.where(feasible, best, np.nan)

    # ----------------------------------------------------------------- public numerics
    def evaluate(self, **values: Any) -> np.ndarray:
        """Value of the bound (vectorised; parameters may be arrays, aliases accepted)."""
        arr, shape = self._arrays(values)
        return self._value(arr, shape)

    def term_values(self, **values: Any) -> list[tuple[str, np.ndarray]]:
        """Each additive term's value, labelled by its sympy string (order of :attr:`terms`)."""
        arr, shape = self._arrays(values)
        vals = self._f_terms(arr, shape)
        return [(str(t), v) for t, v in zip(self.terms, vals, strict=True)]

    def condition_report(self, **values: Any) -> list[ConditionResult]:
        """Each condition's verdict and margin (``big - small``; >= 0 means it holds)."""
        arr, shape = self._arrays(values)
        return [
            ConditionResult(c.name, str(c.relation), h, m, c.description)
            for c, (h, m) in zip(self.conditions, self._margins(arr, shape), strict=True)
        ]

    def conditions_hold(self, **values: Any) -> np.ndarray:
        """True where every condition holds (vectorised)."""
        arr, shape = self._arrays(values)
        return self._holds(arr, shape)

    def recommended_step_value(self, **values: Any) -> np.ndarray | None:
        """:attr:`recommended_step` at ``values`` (vectorised, aliases accepted).

        ``None`` if the bound has no recommended step or ``values`` lack one of its
        parameters.
        """
        f = self._f_recommended
        if f is None:
            return None
        arr, shape = self._arrays(values)
        if any(n not in arr for n in f.names):
            return None
        return f(arr, shape)

    def max_step(self, *, iters: int = 80, **values: Any) -> np.ndarray:
        """Largest step ``alpha`` for which every condition holds (margins >= 0 in floating point).

        ``inf`` if the conditions hold up to ``alpha = 1e12``; NaN if they fail already at
        ``alpha = 1e-14``. Bisection in ``log(alpha)``, vectorised; assumes the feasible set
        is ``(0, alpha_max]``. A given ``alpha`` is ignored.
        """
        arr, shape = self._arrays(values, drop=(self._step_name(),))
        return self._max_step_arr(arr, shape, iters)

    def optimal_step(self, *, iters: int = 100, **values: Any) -> np.ndarray:
        """Step ``alpha`` minimising the bound subject to the conditions.

        Golden-section search in ``log(alpha)`` over ``[alpha_max * 1e-20, alpha_max]``
        (``[1e-20, 1e20]`` when no condition limits ``alpha``); assumes the bound is unimodal
        in ``log(alpha)``. NaN where no step is feasible. A given ``alpha`` is ignored.
        """
        arr, shape = self._arrays(values, drop=(self._step_name(),))
        return self._optimal_step_arr(arr, shape, iters)

    def optimal_step_symbolic(self) -> list[sp.Expr]:
        """Positive stationary points of the bound in ``alpha`` (empty if sympy finds none).

        This ignores the conditions; :meth:`optimal_step` applies them numerically.
        """
        a = self.step_symbol
        try:
            sols = sp.solve(sp.diff(self.expression, a), a)
        except NotImplementedError:
            return []
        return [s for s in sols if s.is_positive is not False and s.is_real is not False]

    def rate(self, step: sp.Expr | None = None) -> list[RateTerm]:
        """Terms of the bound after substituting a step schedule, grouped by power of ``T``.

        ``step`` defaults to :attr:`recommended_step`. Returned slowest-decaying first, so
        ``rate()[0]`` is the leading term and the rest are higher-order terms.
        """
        step = self.recommended_step if step is None else sp.sympify(step)
        if step is None:
            raise UserInputError(f"bound {self.name!r} has no recommended step; pass one")
        if step in self._rate_cache:
            return list(self._rate_cache[step])
        groups = self._rate_groups(step)
        out = [RateTerm(sp.factor(sp.simplify(c)), e) for e, c in groups.items() if c != 0]
        out.sort(key=lambda r: -float(r.t_exponent))
        self._rate_cache[step] = out
        return list(out)

    def _rate_groups(self, step: sp.Expr) -> dict[sp.Expr, sp.Expr]:
        """The bound at ``step`` as ``{exponent of T: T-free coefficient}``, expanded only."""
        expr = sp.expand(sp.powsimp(self.expression.subs(self.step_symbol, step), force=True))
        groups: dict[sp.Expr, sp.Expr] = {}
        for term in sp.Add.make_args(expr):
            coeff, expo = sp.powsimp(term, force=True).as_coeff_exponent(S.T)
            if S.T in coeff.free_symbols:
                raise UserInputError(
                    f"bound {self.name!r}: term {term} is not a power of T times a T-free factor"
                )
            groups[expo] = groups.get(expo, 0) + coeff
        return groups

    def _speedup_fns(self, step: sp.Expr) -> tuple[_Compiled, _Compiled]:
        """(leading, rest) of the rate at ``step``, compiled from the expanded groups of
        :meth:`_rate_groups` (the simplification :meth:`rate` does for display costs seconds
        for the PALSGD bounds and does not change the values)."""
        if step not in self._speedup_cache:
            groups = {e: c for e, c in self._rate_groups(step).items() if c != 0}
            e0 = max(groups, key=float)
            lead = groups[e0] * S.T**e0
            rest = sp.Add(*(c * S.T**e for e, c in groups.items() if e != e0))
            self._speedup_cache[step] = (_Compiled(lead, self.name), _Compiled(rest, self.name))
        return self._speedup_cache[step]

    def max_H(
        self,
        *,
        factor: float = 1.0,
        step: str | float = "recommended",
        h_max: int = 10**9,
        **values: Any,
    ) -> dict[str, np.ndarray]:
        """Largest sync interval ``H`` that keeps linear speed-up, and that keeps the conditions.

        ``speedup``: with ``step="recommended"``, the largest ``H`` such that the bound's
        higher-order terms (those that decay faster in ``T`` than the leading term of
        :meth:`rate`) are at most ``factor`` times the leading term; otherwise the largest
        ``H`` with ``bound(H) <= (1 + factor) * bound(1)`` at that step.
        ``conditions``: largest ``H`` for which the conditions hold at that step.
        ``step`` is ``"recommended"`` (the bound's schedule; falls back to ``"optimal"`` if
        it has none), ``"optimal"`` (numeric optimum at each H) or a number. A given ``H``
        (and, unless ``step`` is a number, ``alpha``) is ignored. Returns NaN where ``H = 1``
        already fails, and ``h_max`` where no limit was found below it (always, if the bound
        does not depend on ``H``).
        """
        stepname = self._step_name()
        if step == "recommended" and self.recommended_step is None:
            step = "optimal"
        drop = ("H",) if isinstance(step, int | float) else ("H", stepname)
        arr, shape = self._arrays(values, drop=drop)
        if isinstance(step, int | float):
            arr[stepname] = np.asarray(validate({stepname: step})[stepname], dtype=float)
            shape = _shape_of(arr)
        elif step not in ("recommended", "optimal"):
            raise UserInputError(
                f"max_H: step must be 'recommended', 'optimal' or a number, not {step!r}"
            )
        uses_h = S.H in self.expression.free_symbols or any(
            S.H in c.relation.free_symbols for c in self.conditions
        )
        if not uses_h:
            full = np.full(shape, float(h_max))
            return {"speedup": full, "conditions": full.copy()}

        def with_step(hv: np.ndarray) -> dict[str, np.ndarray]:
            a = {**arr, "H": hv}
            if step == "recommended":
                a[stepname] = self._f_recommended(a, shape)
            elif step == "optimal":
                a[stepname] = self._optimal_step_arr(a, shape)
            return a

        if step == "recommended":
            lead_fn, rest_fn = self._speedup_fns(self.recommended_step)

            def speedup_ok(hv: np.ndarray) -> np.ndarray:
                a = {**arr, "H": hv}
                return rest_fn(a, shape) <= factor * lead_fn(a, shape)
        else:
            base = self._value(with_step(np.ones(shape)), shape)

            def speedup_ok(hv: np.ndarray) -> np.ndarray:
                return self._value(with_step(hv), shape) <= (1 + factor) * base

        def cond_ok(hv: np.ndarray) -> np.ndarray:
            return self._holds(with_step(hv), shape)

        result = {}
        for key, pred in (("speedup", speedup_ok), ("conditions", cond_ok)):
            result[key] = _largest_true_integer(pred, shape, float(h_max))
        return result

    def rounds_to_eps(self, eps: float, *, t_max: int = 10**15, **values: Any) -> np.ndarray:
        """Communication rounds ``R = T/H`` needed to guarantee bound <= ``eps``.

        ``T = R * H`` (``H = 1`` if the bound has no ``H``: every step is a round). Uses the
        optimal step at each ``T``; bisection over ``R`` assumes the optimised bound decreases
        in ``T``. Returns ``inf`` where even ``T = t_max`` is not enough. A given ``T`` and
        ``alpha`` are ignored.
        """
        eps = float(validate(eps=eps)["eps"])
        arr, shape = self._arrays(values, drop=("T", self._step_name()))
        hv = arr.get("H", np.ones(()))
        step = self._step_name()

        def ok(r: np.ndarray) -> np.ndarray:
            a = {**arr, "T": r * hv}
            best = self._optimal_step_arr(a, shape)
            v = self._value({**a, step: np.where(np.isnan(best), 1.0, best)}, shape)
            return np.isfinite(best) & (v <= eps)

        r_max = np.floor(t_max / hv) * np.ones(shape)
        lo = np.zeros(shape)  # infeasible by convention
        hi = np.ones(shape)
        ok_hi = ok(hi) & (hi <= r_max)  # one round may already exceed t_max
        while True:
            grow = ~ok_hi & (hi < r_max)
            if not grow.any():
                break
            lo = np.where(grow, hi, lo)
            hi = np.where(grow, np.minimum(hi * 2, r_max), hi)
            ok_hi = np.where(grow, ok(hi), ok_hi)
        while True:
            gap = ok_hi & (hi - lo > 1)
            if not gap.any():
                break
            mid = np.where(gap, np.floor((lo + hi) / 2), hi)
            good = ok(mid)
            hi = np.where(gap & good, mid, hi)
            lo = np.where(gap & ~good, mid, lo)
        return np.where(ok_hi, hi, np.inf)


def _largest_true_integer(
    pred: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...], h_max: float
) -> np.ndarray:
    """Largest integer ``h`` in ``[1, h_max]`` with ``pred(h)`` (pred monotone: true then false).

    NaN where ``pred(1)`` is false; ``h_max`` where ``pred(h_max)`` is true.
    """
    lo = np.ones(shape)
    ok1 = pred(lo)
    hi = np.full(shape, min(2.0, h_max))
    ok_hi = pred(hi)
    for _ in range(64):
        grow = ok_hi & (hi < h_max)
        if not grow.any():
            break
        lo = np.where(grow, hi, lo)
        hi = np.where(grow, np.minimum(hi * 2, h_max), hi)
        ok_hi = np.where(grow, pred(hi), ok_hi)
    while True:
        gap = (hi - lo > 1) & ~ok_hi & ok1
        if not gap.any():
            break
        mid = np.where(gap, np.floor((lo + hi) / 2), lo)
        ok = pred(mid)
        lo = np.where(gap & ok, mid, lo)
        hi = np.where(gap & ~ok, mid, hi)
    best = np.where(ok_hi, hi, lo)
    return np.where(ok1, best, np.nan)
