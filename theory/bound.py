"""The :class:`Bound` abstraction: a convergence bound with its conditions and provenance.

A bound states

    (1/T) sum_{t<T} E||grad f(xbar_t)||^2  <=  expression(L, sigma, zeta, F0, K, H, p, alpha, ...)

whenever every step-size condition holds. ``xbar_t`` is the average of the workers'
iterates at step ``t`` (for single-model methods, the model itself). Everything numeric
is vectorised: any parameter may be a numpy array and results broadcast.

Numerical methods assume what the encoded bounds satisfy and the tests check:
the bound is unimodal in ``log(alpha)`` (used by :meth:`Bound.optimal_step`), each
condition is monotone in ``alpha`` (holds on an interval ``(0, alpha_max]``, used by
:meth:`Bound.max_step`), and the bound and the conditions are monotone in ``H``
(used by :meth:`Bound.max_H`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import sympy as sp

from theory import symbols as S
from theory.assumptions import Assumption
from theory.validation import UserInputError, canonical_name, validate

__all__ = ["Condition", "ConditionResult", "Bound", "RateTerm", "param_name"]


def param_name(sym: sp.Symbol) -> str:
    """Parameter name of a symbol (``epsilon`` is the parameter ``eps``)."""
    return "eps" if sym.name == "epsilon" else sym.name


@dataclass(frozen=True)
class Condition:
    """A step-size or stability condition ``lhs <= rhs`` (or ``<``) with its meaning."""

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
    def margin(self) -> sp.Expr:
        """``rhs - lhs`` for ``lhs <= rhs``: the condition holds iff margin >= 0 (> 0 if strict)."""
        r = self.relation
        return r.rhs - r.lhs if r.rel_op in ("<=", "<") else r.lhs - r.rhs

    def latex(self) -> str:
        return sp.latex(self.relation)


@dataclass(frozen=True)
class ConditionResult:
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

    def __str__(self) -> str:
        return f"({self.coefficient}) * T^({self.t_exponent})"


def _as_arrays(values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float) for k, v in values.items()}


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

        >>> b = Bound.from_strings("mine", "2*F0/(alpha*T) + L*alpha*sigma**2/K",
        ...                        ["alpha*L <= 1"], provenance="my notes")
        """
        local = {s.name: s for s in S.ALL}
        local["eps"] = S.eps

        def parse(text: str, what: str) -> Any:
            try:
                return sp.sympify(text, locals=local)
            except (sp.SympifyError, SyntaxError, TypeError) as exc:
                raise UserInputError(f"bound {name!r}: cannot parse {what} {text!r}: {exc}") from None

        expr = parse(expression, "expression")
        items = conditions.items() if isinstance(conditions, Mapping) else enumerate(conditions)
        conds = []
        for key, text in items:
            rel = parse(text, "condition")
            if not isinstance(rel, sp.core.relational.Relational):
                raise UserInputError(f"bound {name!r}: condition {text!r} is not an inequality")
            conds.append(Condition(f"C{key + 1}" if isinstance(key, int) else str(key), rel))
        kwargs.setdefault("title", name)
        return cls(name=name, expression=expr, conditions=tuple(conds), **kwargs)

    def __post_init__(self) -> None:
        allowed = set(S.ALL)
        for what, e in [("expression", self.expression)] + [
            (f"condition {c.name}", c.relation) for c in self.conditions
        ]:
            unknown = e.free_symbols - allowed
            if unknown:
                raise UserInputError(
                    f"bound {self.name!r}: {what} uses unknown symbols "
                    f"{sorted(map(str, unknown))}; use theory.symbols ({[s.name for s in S.ALL]})"
                )

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
            "latex": self.latex(),
            "conditions": [
                {"name": c.name, "relation": str(c.relation), "description": c.description}
                for c in self.conditions
            ],
            "assumptions": [str(a) for a in self.assumptions],
            "provenance": self.provenance,
            "derived_here": self.derived_here,
            "algorithms": list(self.algorithms),
            "parameters": list(self.parameters),
            "recommended_step": None if self.recommended_step is None else str(self.recommended_step),
            "notes": self.notes,
        }

    # ----------------------------------------------------------------- numerics
    def _symbols_of(self, expr: sp.Expr) -> list[sp.Symbol]:
        return sorted(expr.free_symbols, key=lambda s: s.name)

    def _compile(self, expr: sp.Expr) -> tuple[list[str], Callable[..., Any]]:
        syms = self._symbols_of(expr)
        fn = sp.lambdify(syms, expr, modules="numpy")
        return [param_name(s) for s in syms], fn

    @cached_property
    def _compiled_expression(self):
        return self._compile(self.expression)

    @cached_property
    def _compiled_terms(self):
        return [self._compile(t) for t in self.terms]

    @cached_property
    def _compiled_margins(self):
        return [self._compile(c.margin) for c in self.conditions]

    def _prepare(self, values: Mapping[str, Any], needed: Iterable[str]) -> dict[str, np.ndarray]:
        vals = validate(values)
        missing = sorted(set(needed) - set(vals))
        if missing:
            raise UserInputError(
                f"bound {self.name!r} needs parameter(s) {missing} (it depends on "
                f"{list(self.parameters)})"
            )
        return _as_arrays(vals)

    @staticmethod
    def _call(compiled, vals: Mapping[str, np.ndarray]) -> np.ndarray:
        names, fn = compiled
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = fn(*(vals[n] for n in names))
        shape = np.broadcast_shapes(*(np.shape(vals[n]) for n in names)) if names else ()
        return np.broadcast_to(np.asarray(out, dtype=float), shape).copy()

    def evaluate(self, **values: Any) -> np.ndarray:
        """Value of the bound (vectorised; parameters may be arrays, aliases accepted)."""
        names = self._compiled_expression[0]
        vals = self._prepare(values, names)
        return self._call(self._compiled_expression, vals)

    def term_values(self, **values: Any) -> list[tuple[str, np.ndarray]]:
        """Each additive term's value, labelled by its sympy string."""
        needed = {n for names, _ in self._compiled_terms for n in names}
        vals = self._prepare(values, needed)
        return [(str(t), self._call(c, vals)) for t, c in zip(self.terms, self._compiled_terms, strict=True)]

    def condition_report(self, **values: Any) -> list[ConditionResult]:
        """Each condition's verdict and margin (``rhs - lhs``; >= 0 means it holds)."""
        needed = {n for names, _ in self._compiled_margins for n in names}
        vals = self._prepare(values, needed)
        out = []
        for c, comp in zip(self.conditions, self._compiled_margins, strict=True):
            m = self._call(comp, vals)
            holds = m > 0 if c.strict else m >= -1e-12 * (1 + np.abs(m))
            holds = holds & np.isfinite(m)
            out.append(ConditionResult(c.name, str(c.relation), holds, m, c.description))
        return out

    def conditions_hold(self, **values: Any) -> np.ndarray:
        """True where every condition holds (vectorised)."""
        rep = self.condition_report(**values)
        if not rep:
            shape = np.broadcast_shapes(*(np.shape(v) for v in values.values())) if values else ()
            return np.ones(shape, dtype=bool)
        return np.logical_and.reduce([r.holds for r in rep])

    def _step_name(self) -> str:
        return param_name(self.step_symbol)

    def max_step(self, *, iters: int = 80, **values: Any) -> np.ndarray:
        """Largest step ``alpha`` for which every condition holds (NaN if none does).

        Bisection in ``log(alpha)``, vectorised; assumes the feasible set is ``(0, alpha_max]``.
        """
        step = self._step_name()
        values = {canonical_name(k): v for k, v in values.items() if canonical_name(k) != step}
        probe = {**values, step: 1.0}
        shape = np.broadcast_shapes(*(np.shape(v) for v in probe.values()))
        lo = np.full(shape, 1e-300)
        hi = np.full(shape, 1e-12)
        ok_lo = self.conditions_hold(**{**values, step: np.full(shape, 1e-14)})
        ok_hi = self.conditions_hold(**{**values, step: hi})
        for _ in range(120):  # grow hi while it is still feasible
            grow = ok_hi & (hi < 1e12)
            if not grow.any():
                break
            lo = np.where(grow, hi, lo)
            hi = np.where(grow, hi * 10.0, hi)
            ok_hi = np.where(grow, self.conditions_hold(**{**values, step: hi}), ok_hi)
        for _ in range(iters):
            mid = np.sqrt(lo * hi)
            ok = self.conditions_hold(**{**values, step: mid})
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        out = np.where(ok_hi, np.inf, lo)
        return np.where(ok_lo, out, np.nan)

    def optimal_step(self, *, iters: int = 100, **values: Any) -> np.ndarray:
        """Step ``alpha`` minimising the bound subject to the conditions.

        Golden-section search in ``log(alpha)`` over ``[alpha_max * 1e-12, alpha_max]``;
        assumes the bound is unimodal in ``log(alpha)``. NaN where no step is feasible.
        """
        step = self._step_name()
        values = {canonical_name(k): v for k, v in values.items() if canonical_name(k) != step}
        amax = self.max_step(**values)
        top = np.where(np.isinf(amax), 1e12, amax)
        feasible = np.isfinite(top)
        top = np.where(feasible, top, 1.0)
        a, b = np.log(top) - 12 * np.log(10.0), np.log(top)
        g = (np.sqrt(5.0) - 1) / 2

        def f(logs: np.ndarray) -> np.ndarray:
            v = self.evaluate(**{**values, step: np.exp(logs)})
            return np.where(np.isnan(v), np.inf, v)

        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = f(c), f(d)
        for _ in range(iters):
            left = fc <= fd
            a, b = np.where(left, a, c), np.where(left, d, b)
            c_new = np.where(left, b - g * (b - a), d)
            d_new = np.where(left, c, a + g * (b - a))
            fc, fd = np.where(left, f(c_new), fd), np.where(left, fc, f(d_new))
            c, d = c_new, d_new
        best = np.exp((a + b) / 2)
        # the optimum may sit on the boundary alpha_max
        better_top = f(np.log(top)) <= f(np.log(best))
        best = np.where(better_top, top, best)
        return np.where(feasible, best, np.nan)

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
        step = self.recommended_step if step is None else step
        if step is None:
            raise UserInputError(f"bound {self.name!r} has no recommended step; pass one")
        expr = sp.expand(sp.powsimp(self.expression.subs(self.step_symbol, step), force=True))
        groups: dict[sp.Expr, sp.Expr] = {}
        for term in sp.Add.make_args(expr):
            coeff, expo = sp.powsimp(term, force=True).as_coeff_exponent(S.T)
            if S.T in coeff.free_symbols:
                raise UserInputError(
                    f"bound {self.name!r}: term {term} is not a power of T times a T-free factor"
                )
            groups[expo] = groups.get(expo, 0) + coeff
        out = [RateTerm(sp.simplify(c), e) for e, c in groups.items() if c != 0]
        return sorted(out, key=lambda r: -float(r.t_exponent))

    def max_H(
        self,
        *,
        factor: float = 1.0,
        step: str | float = "recommended",
        h_max: int = 10**9,
        **values: Any,
    ) -> dict[str, np.ndarray]:
        """Largest sync interval ``H`` that keeps linear speed-up, and that keeps the conditions.

        ``speedup``: largest ``H`` such that the bound's higher-order terms (those that decay
        faster than the leading power of ``T`` under ``step``) are at most ``factor`` times
        the leading terms. ``conditions``: largest ``H`` for which the conditions hold at that
        step. ``step`` is ``"recommended"`` (the bound's schedule), ``"optimal"`` (numeric
        optimum at each H) or a number. Returns NaN where ``H = 1`` already fails, and
        ``h_max`` where no limit was found below it.
        """
        values = {canonical_name(k): v for k, v in values.items() if canonical_name(k) != "H"}
        H = S.H
        uses_h = H in self.expression.free_symbols or any(
            H in c.relation.free_symbols for c in self.conditions
        )
        rate = self.rate() if step == "recommended" else None

        def step_at(hv: np.ndarray) -> np.ndarray:
            if step == "recommended":
                names, fn = self._compile(self.recommended_step)
                vals = _as_arrays(validate({**values, "H": hv}))
                return self._call((names, fn), vals)
            if step == "optimal":
                return self.optimal_step(**{**values, "H": hv})
            return np.broadcast_to(np.asarray(float(step)), np.shape(hv))

        def speedup_ok(hv: np.ndarray) -> np.ndarray:
            vals = {**values, "H": hv}
            if rate is not None:
                lead, rest = rate[0], rate[1:]
                arr = _as_arrays(validate(vals))
                lv = self._call(self._compile(lead.coefficient * S.T**lead.t_exponent), arr)
                rv = sum(
                    (self._call(self._compile(r.coefficient * S.T**r.t_exponent), arr) for r in rest),
                    np.zeros_like(lv),
                )
                return rv <= factor * lv
            one = self.evaluate(**{**vals, "H": np.ones_like(hv), self._step_name(): step_at(np.ones_like(hv))})
            return self.evaluate(**{**vals, self._step_name(): step_at(hv)}) <= (1 + factor) * one

        def cond_ok(hv: np.ndarray) -> np.ndarray:
            return self.conditions_hold(**{**values, "H": hv, self._step_name(): step_at(hv)})

        shape = np.broadcast_shapes(*(np.shape(v) for v in values.values())) if values else ()
        result = {}
        for key, pred in (("speedup", speedup_ok), ("conditions", cond_ok)):
            if not uses_h:
                result[key] = np.full(shape, float(h_max))
                continue
            lo = np.ones(shape)
            ok1 = pred(lo)
            hi = np.full(shape, 2.0)
            ok_hi = pred(hi)
            for _ in range(64):
                grow = ok_hi & (hi < h_max)
                if not grow.any():
                    break
                lo = np.where(grow, hi, lo)
                hi = np.where(grow, np.minimum(hi * 2, h_max), hi)
                ok_hi = np.where(grow, pred(hi), ok_hi)
            while True:
                gap = (hi - lo > 1) & ~ok_hi
                if not gap.any():
                    break
                mid = np.floor((lo + hi) / 2)
                ok = pred(mid)
                lo = np.where(gap & ok, mid, lo)
                hi = np.where(gap & ~ok, mid, hi)
            best = np.where(ok_hi, hi, lo)
            result[key] = np.where(ok1, best, np.nan)
        return result

    def rounds_to_eps(self, eps: float, *, t_max: int = 10**15, **values: Any) -> np.ndarray:
        """Communication rounds ``R = T/H`` needed to guarantee bound <= ``eps``.

        Uses the optimal step at each ``T``; bisection over ``R`` assumes the optimised bound
        decreases in ``T``. Returns ``inf`` where even ``T = t_max`` is not enough.
        """
        validate(eps=eps)
        values = {canonical_name(k): v for k, v in values.items() if canonical_name(k) != "T"}
        hv = np.asarray(values.get("H", 1.0), dtype=float)

        def ok(r: np.ndarray) -> np.ndarray:
            t = r * hv
            a = self.optimal_step(**{**values, "T": t})
            v = self.evaluate(**{**values, "T": t, self._step_name(): np.where(np.isnan(a), 1.0, a)})
            return np.isfinite(a) & (v <= eps)

        shape = np.broadcast_shapes(hv.shape, *(np.shape(v) for v in values.values()))
        r_max = np.floor(t_max / hv) * np.ones(shape)
        lo = np.zeros(shape)  # infeasible by convention
        hi = np.ones(shape)
        ok_hi = ok(hi)
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
            mid = np.floor((lo + hi) / 2)
            good = ok(mid)
            hi = np.where(gap & good, mid, hi)
            lo = np.where(gap & ~good, mid, lo)
        return np.where(ok_hi, hi, np.inf)
