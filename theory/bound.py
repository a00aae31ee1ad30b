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
Sympy expressions are compiled once per bound with :func:`sympy.lambdify` into a
sympy-free :class:`~theory.bound_numeric.CompiledBound` (:attr:`Bound.compiled`), kept in
the on-disk cache of :mod:`theory.bound_cache`; the numeric methods delegate to it.
Public methods validate their inputs once through :func:`theory.validation.validate`;
the searches work on the validated arrays without validating again.

Numerical methods assume what the encoded bounds satisfy and the tests check:
the bound is unimodal in ``log(alpha)`` (used by :meth:`Bound.optimal_step`), each
condition is monotone in ``alpha`` (holds on an interval ``(0, alpha_max]``, used by
:meth:`Bound.max_step`), and the rate terms and conditions are monotone in ``H``
(used by :meth:`Bound.max_H`).
"""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import sympy as sp

from theory import bound_cache
from theory import symbols as S
from theory.assumptions import Assumption
from theory.bound_numeric import (
    RTOL,
    CompiledBound,
    CompiledFn,
    ConditionResult,
    MaxH,
    OptimalStep,
    resolve_globals,
)
from theory.safe_parse import parse_condition, parse_formula
from theory.validation import UserInputError

__all__ = [
    "Condition",
    "ConditionResult",
    "Bound",
    "MaxH",
    "OptimalStep",
    "RateTerm",
    "param_name",
    "RTOL",
]


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
class RateTerm:
    """One group of the rate: ``coefficient * T**t_exponent`` (coefficient free of T)."""

    coefficient: sp.Expr
    t_exponent: sp.Rational

    @property
    def expression(self) -> sp.Expr:
        return self.coefficient * S.T**self.t_exponent

    def __str__(self) -> str:
        return f"({self.coefficient}) * T^({self.t_exponent})"


def _compile(exprs: sp.Expr | Sequence[sp.Expr], owner: str) -> CompiledFn:
    """Lambdify ``exprs`` (one expression or a list) into a :class:`CompiledFn` (source kept)."""
    multi = isinstance(exprs, list | tuple)
    items = list(exprs) if multi else [exprs]
    syms = sorted(set().union(*(sp.sympify(e).free_symbols for e in items)), key=lambda s: s.name)
    fn = sp.lambdify(syms, items if multi else items[0], "numpy")
    source = inspect.getsource(fn)
    free = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        free |= set(code.co_names)
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    globals_ = resolve_globals(fn.__globals__, sorted(free))
    if globals_ is None:
        raise UserInputError(
            f"bound {owner!r}: a formula compiles to names outside numpy/functools/math"
        )
    return CompiledFn([param_name(x) for x in syms], source, globals_, owner, multi)


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
    @property
    def step_name(self) -> str:
        """Parameter name of the step-size symbol (``"alpha"`` unless ``step_symbol`` says)."""
        return param_name(self.step_symbol)

    def _step_name(self) -> str:
        return self.step_name

    @cached_property
    def compiled(self) -> CompiledBound:
        """The sympy-free numerics (:class:`~theory.bound_numeric.CompiledBound`).

        Built once per bound and kept in the on-disk cache (:mod:`theory.bound_cache`),
        keyed by the statement's expressions and the package version.
        """
        return bound_cache.compiled(self)

    def compile_entry(self) -> dict[str, Any]:
        """The input-independent symbolic work, as the JSON-ready cache entry.

        Compiled expression, terms, condition sides, recommended step, and the expanded
        speed-up split of :meth:`max_H` at the recommended step (the costly part: sympy
        expansion of the bound at that step).
        """
        speedup = None
        if self.recommended_step is not None and self.uses_H:
            lead, rest = self._speedup_exprs(self.recommended_step)
            speedup = [_compile(lead, self.name).to_dict(), _compile(rest, self.name).to_dict()]
        sides = [e for c in self.conditions for e in c.sides]
        return {
            "parameters": list(self.parameters),
            "uses_H": self.uses_H,
            "terms": [str(t) for t in self.terms],
            "conditions": [[c.name, str(c.relation), c.strict] for c in self.conditions],
            "f_expression": _compile(self.expression, self.name).to_dict(),
            "f_terms": _compile(list(self.terms), self.name).to_dict(),
            "f_conditions": _compile(sides, self.name).to_dict() if sides else None,
            "f_recommended": None
            if self.recommended_step is None
            else _compile(self.recommended_step, self.name).to_dict(),
            "speedup": speedup,
        }

    def cache_text(self) -> str:
        """The statement as text (sympy ``srepr`` of the expression, the conditions, the
        recommended step and the step symbol): what the compiled forms depend on."""
        parts = [
            sp.srepr(self.expression),
            [[c.name, sp.srepr(c.relation)] for c in self.conditions],
            None if self.recommended_step is None else sp.srepr(self.recommended_step),
            sp.srepr(self.step_symbol),
        ]
        return json.dumps(parts)

    @cached_property
    def uses_H(self) -> bool:
        """Whether the bound or a condition depends on ``H``."""
        return S.H in self.expression.free_symbols or any(
            S.H in c.relation.free_symbols for c in self.conditions
        )

    @property
    def _f_expression(self) -> CompiledFn:
        return self.compiled.f_expression

    @cached_property
    def _rate_cache(self) -> dict[Any, list[RateTerm]]:
        return {}

    # ----------------------------------------------------------------- public numerics
    def evaluate(self, **values: Any) -> np.ndarray:
        """Value of the bound (vectorised; parameters may be arrays, aliases accepted)."""
        return self.compiled.evaluate(**values)

    def __call__(self, **values: Any) -> np.ndarray:
        """``b(L=..., sigma=..., ...)`` is ``b.evaluate(L=..., sigma=..., ...)``."""
        return self.compiled.evaluate(**values)

    def at_optimal_step(self, **values: Any) -> OptimalStep:
        """The bound at :meth:`optimal_step`: that step and the value there (vectorised;
        NaN where no step meets the conditions; a given ``alpha`` is ignored)."""
        return self.compiled.at_optimal_step(**values)

    def term_values(self, **values: Any) -> list[tuple[str, np.ndarray]]:
        """Each additive term's value, labelled by its sympy string (order of :attr:`terms`)."""
        return self.compiled.term_values(**values)

    def condition_report(self, **values: Any) -> list[ConditionResult]:
        """Each condition's verdict and margin (``big - small``; >= 0 means it holds)."""
        return self.compiled.condition_report(**values)

    def conditions_hold(self, **values: Any) -> np.ndarray:
        """True where every condition holds (vectorised)."""
        return self.compiled.conditions_hold(**values)

    def recommended_step_value(self, **values: Any) -> np.ndarray | None:
        """:attr:`recommended_step` at ``values`` (vectorised, aliases accepted).

        ``None`` if the bound has no recommended step or ``values`` lack one of its
        parameters.
        """
        return self.compiled.recommended_step_value(**values)

    def max_step(self, *, iters: int | None = None, **values: Any) -> np.ndarray:
        """Largest step ``alpha`` for which every condition holds (margins >= 0 in floating point).

        ``inf`` if the conditions hold up to ``alpha = 1e12``; NaN if they fail already at
        ``alpha = 1e-14``. Vectorised search in ``log(alpha)`` (decades, then grids of
        candidates down to a relative width of about 1e-14); assumes the feasible set is
        ``(0, alpha_max]``. A given ``alpha`` is ignored; ``iters`` is accepted for
        compatibility and not used.
        """
        return self.compiled.max_step(**values)

    def optimal_step(self, *, iters: int | None = None, **values: Any) -> np.ndarray:
        """Step ``alpha`` minimising the bound subject to the conditions.

        Vectorised grid search in ``log(alpha)`` over ``[alpha_max * 1e-20, alpha_max]``
        (``[1e-20, 1e20]`` when no condition limits ``alpha``), each round keeping the two
        grid cells around the best point, to a relative width of about 1e-15; assumes the
        bound is unimodal in ``log(alpha)``. NaN where no step is feasible. A given
        ``alpha`` is ignored; ``iters`` is accepted for compatibility and not used.
        """
        return self.compiled.optimal_step(**values)

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

    def _speedup_exprs(self, step: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
        """(leading, rest) of the rate at ``step``, from the expanded groups of
        :meth:`_rate_groups` (the simplification :meth:`rate` does for display costs seconds
        for the PALSGD bounds and does not change the values)."""
        groups = {e: c for e, c in self._rate_groups(step).items() if c != 0}
        e0 = max(groups, key=float)
        lead = groups[e0] * S.T**e0
        rest = sp.Add(*(c * S.T**e for e, c in groups.items() if e != e0))
        return lead, rest

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
        :meth:`rate`) are at most ``factor`` times the leading term; otherwise the largest
        ``H`` with ``bound(H) <= (1 + factor) * bound(1)`` at that step.
        ``conditions``: largest ``H`` for which the conditions hold at that step.
        ``step`` is ``"recommended"`` (the bound's schedule; falls back to ``"optimal"`` if
        it has none), ``"optimal"`` (numeric optimum at each H) or a number. A given ``H``
        (and, unless ``step`` is a number, ``alpha``) is ignored. Returns NaN where ``H = 1``
        already fails, and ``h_max`` where no limit was found below it (always, if the bound
        does not depend on ``H``). The result (:class:`~theory.bound_numeric.MaxH`) also
        holds the smaller of the two limits, which one binds, and the step used there.
        """
        return self.compiled.max_H(factor=factor, step=step, h_max=h_max, **values)

    def rounds_to_eps(self, eps: float, *, t_max: int = 10**15, **values: Any) -> np.ndarray:
        """Communication rounds ``R = T/H`` needed to guarantee bound <= ``eps``.

        ``T = R * H`` (``H = 1`` if the bound has no ``H``: every step is a round). Uses the
        optimal step at each ``T``; the search over ``R`` assumes the optimised bound decreases
        in ``T``. Returns ``inf`` where even ``T = t_max`` is not enough. A given ``T`` and
        ``alpha`` are ignored.
        """
        return self.compiled.rounds_to_eps(eps, t_max=t_max, **values)
