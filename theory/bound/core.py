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
Sympy expressions are compiled once per bound with :func:`sympy.lambdify`
(:mod:`theory.bound.compiler`) into a sympy-free :class:`~theory.bound.numeric.CompiledBound`
(:attr:`Bound.compiled`), kept in the on-disk cache of :mod:`theory.bound.cache`; the
numeric methods are that object's methods of the same name, documented there. The rate
in ``T`` is :mod:`theory.bound.rates`.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import sympy as sp

from core.errors import UserInputError
from theory import symbols as S
from theory.algorithm import AlgorithmSpec, covered_names, spec_summary
from theory.assumptions import COIN_ASSUMPTIONS, Assumption
from theory.bound import cache as bound_cache
from theory.bound.compiler import cache_text, compile_entry, param_name
from theory.bound.numeric import RTOL, CompiledBound, CompiledFn, ConditionResult, MaxH, OptimalStep
from theory.bound.rates import RateTerm, rate_groups, rate_terms
from theory.safe_parse import parse_condition, parse_formula

__all__ = [
    "Condition",
    "ConditionResult",
    "Bound",
    "CompiledFn",
    "MaxH",
    "OptimalStep",
    "RateTerm",
    "param_name",
    "RTOL",
]


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


def _numeric(name: str) -> Any:
    """The method ``name`` of :class:`~theory.bound.numeric.CompiledBound`, run on
    :attr:`Bound.compiled` (same signature and docstring)."""
    target = getattr(CompiledBound, name)

    def method(self: Bound, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.compiled, name)(*args, **kwargs)

    method.__name__, method.__qualname__ = name, f"Bound.{name}"
    method.__doc__ = target.__doc__
    method.__signature__ = inspect.signature(target)  # type: ignore[attr-defined]
    return method


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
    algorithm: the algorithm the statement is about, an :class:`~theory.algorithm.AlgorithmSpec`
        (a name of the algorithm table is read by :meth:`AlgorithmSpec.of`) with its coin
        model and outer update, validated against the table; its hyperparameters are the
        bound's parameters (the verifier sets them per design and simulates exactly this
        spec). ``None``: not stated (nothing covered, nothing verified).
    outers: the outer updates the statement covers (default: the spec's own); a formula
        that reads ``gamma`` or ``mu`` needs one that is not plain averaging.
    recommended_step: a closed-form step size ``alpha(T, K, ...)`` used by :meth:`rate`
        (usually the step that balances the leading terms); ``None`` means none.
    notes: caveats shown with the bound.
    step_symbol: the step-size symbol the solvers optimise over (default ``alpha``).
    measured: what the left-hand side averages: ``"iterates"`` (default,
        ``(1/T) sum_t E||grad f(xbar_t)||^2``) or ``"anchors"``
        (``(1/R) sum_{r<R} E||grad f(z_r)||^2`` over the anchors of the ``R = T/H`` rounds).
    refuted: empty, or where a finding shows this statement false inside its conditions
        (``palsgd check`` then reports it as a caveat, so it never counts as covering a run).
    """

    name: str
    title: str
    expression: sp.Expr
    conditions: tuple[Condition, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    provenance: str = ""
    derived_here: bool = False
    algorithm: AlgorithmSpec | str | None = None
    outers: tuple[str, ...] = ()
    recommended_step: sp.Expr | None = None
    notes: str = ""
    step_symbol: sp.Symbol = field(default=S.alpha)
    measured: str = "iterates"
    refuted: str = ""

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
        self._check_algorithm()

    def _check_algorithm(self) -> None:
        """The spec of :attr:`algorithm`, validated against the table, its outer updates and
        coin model against the formula and the assumptions."""
        spec = self.algorithm
        if isinstance(spec, str):
            spec = AlgorithmSpec.of(spec)
        elif spec is not None and not isinstance(spec, AlgorithmSpec):
            raise UserInputError(
                f"bound {self.name!r}: 'algorithm' must be a name of the algorithm table or a "
                f"theory.algorithm.AlgorithmSpec, got {type(spec).__name__}"
            )
        object.__setattr__(self, "algorithm", spec)
        if spec is None:
            return
        outers = tuple(self.outers) or (spec.outer,)
        allowed = spec.definition.outers
        if any(o not in allowed for o in outers):
            raise UserInputError(
                f"bound {self.name!r}: {spec.kind!r} takes the outer update(s) {list(allowed)}, "
                f"not {list(outers)}"
            )
        object.__setattr__(self, "outers", outers)
        reads = sorted({"gamma", "mu"} & set(self.parameters))
        if reads and outers == ("average",):
            raise UserInputError(
                f"bound {self.name!r}: its formula reads {reads}, but its algorithm "
                f"{spec.kind!r} averages the models; state the outer update it is for "
                "(e.g. outer 'sgd')"
            )
        stated = {a for a in self.assumptions if a in COIN_ASSUMPTIONS.values()}
        if stated - {COIN_ASSUMPTIONS[spec.coins]}:
            raise UserInputError(
                f"bound {self.name!r}: the assumption {sorted(a.key for a in stated)} contradicts "
                f"its algorithm's coin model {spec.coins!r}"
            )

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The names of the algorithms it covers: its spec's kind, and the kind's distributed
        name where that differs (minibatch SGD is ``ddp`` on ``torch.distributed``)."""
        return covered_names(self.algorithm)

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
            "algorithm": spec_summary(self.algorithm, self.outers),
            "parameters": list(self.parameters),
            "recommended_step": None
            if self.recommended_step is None
            else str(self.recommended_step),
            "notes": self.notes,
            "refuted": self.refuted,
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
        """The sympy-free numerics (:class:`~theory.bound.numeric.CompiledBound`).

        Built once per bound and kept in the on-disk cache (:mod:`theory.bound.cache`),
        keyed by the statement's expressions and the package version.
        """
        return bound_cache.compiled(self)

    def compile_entry(self) -> dict[str, Any]:
        """The input-independent symbolic work, as the JSON-ready cache entry
        (:func:`theory.bound.compiler.compile_entry`)."""
        return compile_entry(self)

    def cache_text(self) -> str:
        """The statement as text: what the compiled forms depend on
        (:func:`theory.bound.compiler.cache_text`)."""
        return cache_text(self)

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
    # documented on theory.bound.numeric.CompiledBound, which computes them
    __call__ = _numeric("__call__")
    evaluate = _numeric("evaluate")
    at_optimal_step = _numeric("at_optimal_step")
    term_values = _numeric("term_values")
    condition_report = _numeric("condition_report")
    conditions_hold = _numeric("conditions_hold")
    recommended_step_value = _numeric("recommended_step_value")
    max_step = _numeric("max_step")
    optimal_step = _numeric("optimal_step")
    max_H = _numeric("max_H")
    rounds_to_eps = _numeric("rounds_to_eps")

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
        if step not in self._rate_cache:
            self._rate_cache[step] = rate_terms(self, step)
        return list(self._rate_cache[step])

    def _rate_groups(self, step: sp.Expr) -> dict[sp.Expr, sp.Expr]:
        """The bound at ``step`` as ``{exponent of T: T-free coefficient}``, expanded only."""
        return rate_groups(self, step)
