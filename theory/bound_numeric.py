"""Numerics of a bound without sympy: compiled formulas, conditions and the step-size searches.

A :class:`CompiledBound` holds what :class:`theory.bound.Bound` computes from its sympy
expressions once (the lambdified Python source of the expression, its terms, the condition
sides, the recommended step and the expanded speed-up split of :meth:`Bound.max_H`) and
everything the checker prints about the bound. It is built from a ``Bound`` by
:func:`theory.bound_cache.compiled` (or loaded from the on-disk cache), so ``palsgd check``
runs without importing sympy. Every numeric method of ``Bound`` delegates to it; the
semantics (units, vectorisation, assumptions of the searches) are documented there.

The searches are vectorised over candidate grids: each round evaluates the compiled formula
on ``GRID`` points at once (a trailing array axis), so a search costs about ten calls of a
formula instead of hundreds of scalar calls.
"""

from __future__ import annotations

import base64
import functools
import marshal
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from theory.assumptions import Assumption
from theory.validation import UserInputError, validate

__all__ = ["RTOL", "GRID", "CompiledFn", "CompiledBound", "ConditionResult", "MaxH", "OptimalStep"]

#: relative tolerance for a non-strict condition ``lhs <= rhs``: it holds when
#: ``lhs <= rhs + RTOL * (|lhs| + |rhs|)``. Four machine epsilons: this absorbs the rounding
#: of evaluating the two sides in floating point only (e.g. ``alpha = 1/L`` evaluated as
#: ``alpha * L = 1.0000000000000002``), nothing more.
RTOL = 4 * sys.float_info.epsilon
#: candidates per round of the vectorised searches
GRID = 64


@dataclass(frozen=True)
class ConditionResult:
    """Verdict of one condition: ``holds`` (bool array) and ``margin = big - small``."""

    name: str
    text: str
    holds: np.ndarray
    margin: np.ndarray
    description: str


@dataclass(frozen=True, eq=False)
class OptimalStep:
    """A bound at its optimal step: ``alpha`` (the minimiser under the conditions) and the
    bound's ``value`` there; both NaN where no step meets the conditions (arrays of the
    broadcast shape of the inputs)."""

    alpha: np.ndarray
    value: np.ndarray


@dataclass(frozen=True, eq=False)
class MaxH:
    """The largest sync interval ``H`` of :meth:`CompiledBound.max_H` (arrays of the broadcast
    shape of the inputs).

    ``speedup``: the largest ``H`` keeping linear speed-up; ``conditions``: the largest ``H``
    at which the step-size conditions hold; ``H``: the smaller of the two (NaN where ``H = 1``
    already fails one of them). ``binding`` says which limit sets ``H``: ``"speedup"``,
    ``"conditions"``, ``"both"`` (equal limits) or ``"none"`` (no limit below ``h_max``).
    ``step`` is the step rule used (``"recommended"``, ``"optimal"`` or the given number) and
    ``alpha`` the step it gives at ``H`` (NaN where ``H`` is NaN).
    """

    H: np.ndarray
    speedup: np.ndarray
    conditions: np.ndarray
    binding: np.ndarray
    step: str | float
    alpha: np.ndarray

    def __getitem__(self, key: str) -> Any:
        """``result["speedup"]`` is ``result.speedup`` (any field by name)."""
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def as_dict(self) -> dict[str, Any]:
        """The fields by name."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _binding(speedup: np.ndarray, conditions: np.ndarray, h_max: float) -> np.ndarray:
    """Which of the two limits sets ``H`` (see :class:`MaxH`)."""
    s_nan, c_nan = np.isnan(speedup), np.isnan(conditions)
    out = np.where(speedup < conditions, "speedup", "conditions").astype(object)
    out = np.where(speedup == conditions, "both", out)
    out = np.where((speedup == h_max) & (conditions == h_max), "none", out)
    out = np.where(s_nan & ~c_nan, "speedup", out)
    out = np.where(c_nan & ~s_nan, "conditions", out)
    out = np.where(s_nan & c_nan, "both", out)
    return out.astype(str)


#: the interpreter's bytecode tag: cached code objects are used only by the same one
CODE_TAG = f"{sys.implementation.cache_tag}-{sys.version_info[0]}.{sys.version_info[1]}"
#: modules the free names of a compiled formula may come from (``"module.name"`` entries)
MODULES = {"numpy": np, "functools": functools, "math": math}


def resolve_globals(namespace: Mapping[str, Any], names: Sequence[str]) -> list[str] | None:
    """``"module.name"`` for each free name, from :data:`MODULES`; ``None`` if one is not there."""
    out = []
    for n in names:
        if n not in namespace:
            continue  # a builtin
        val = namespace[n]
        for mod_name, mod in MODULES.items():
            cand = getattr(mod, n, None)
            if cand is val or (isinstance(val, float) and cand == val):
                out.append(f"{mod_name}.{n}")
                break
        else:
            return None
    return out


class CompiledFn:
    """A compiled formula (or list of formulas): Python source over numpy, and its parameters.

    ``names``: the parameter names in argument order; ``source``: the text of a function
    ``def _lambdifygenerated(<names>)``; ``globals_``: its free names as ``"module.name"``
    (modules of :data:`MODULES`).
    """

    __slots__ = ("names", "source", "globals_", "_fn", "_code", "owner", "multi")

    def __init__(
        self,
        names: Sequence[str],
        source: str,
        globals_: Sequence[str],
        owner: str,
        multi: bool,
        code: bytes | None = None,
    ):
        self.names, self.source, self.globals_ = tuple(names), str(source), tuple(globals_)
        self.owner, self.multi, self._code = owner, bool(multi), code
        for g in self.globals_:
            mod, _, attr = g.partition(".")
            if mod not in MODULES or not hasattr(MODULES[mod], attr):
                raise ValueError(f"bound {owner!r}: unknown global {g!r} in a compiled formula")
        self._fn: Callable[..., Any] | None = None

    @property
    def fn(self) -> Callable[..., Any]:
        """The Python function (compiled from :attr:`source` on first use)."""
        if self._fn is None:
            ns: dict[str, Any] = {}
            for g in self.globals_:
                mod, _, attr = g.partition(".")
                ns[attr] = getattr(MODULES[mod], attr)
            exec(self._code_object(), ns)  # noqa: S102 (the project's own formula)
            self._fn = ns["_lambdifygenerated"]
        return self._fn

    def _code_object(self) -> Any:
        if self._code is not None:
            try:
                return marshal.loads(self._code)
            except (ValueError, EOFError, TypeError):
                self._code = None
        return compile(self.source, f"<bound {self.owner}>", "exec")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the source, and its bytecode for this interpreter (:data:`CODE_TAG`)."""
        code = marshal.dumps(compile(self.source, f"<bound {self.owner}>", "exec"))
        return {"names": list(self.names), "source": self.source, "globals": list(self.globals_),
                "multi": self.multi, "code_tag": CODE_TAG,
                "code": base64.b64encode(code).decode("ascii")}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], owner: str) -> CompiledFn:
        """Inverse of :meth:`to_dict`; the bytecode is used only by the interpreter that wrote it."""
        code = base64.b64decode(d["code"]) if d.get("code_tag") == CODE_TAG else None
        return cls(d["names"], d["source"], d["globals"], owner, d["multi"], code)

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


def _ext(arr: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every array with a trailing axis of length 1 (room for a candidate grid)."""
    return {k: v[..., None] for k, v in arr.items()}


def _log_grid(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """``n`` points strictly inside ``[log lo, log hi]`` (given as logs), trailing axis."""
    j = np.arange(1, n + 1) / (n + 1)
    return lo[..., None] + (hi - lo)[..., None] * j


def _last_true_int(
    pred: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Largest integer in ``[lo, hi)`` with ``pred`` true, for ``pred`` true then false.

    ``pred(lo)`` is taken as true and ``pred(hi)`` as false; ``pred`` gets integer
    candidates with a trailing grid axis and returns booleans of that shape.
    """
    lo, hi = lo.copy(), hi.copy()
    while True:
        gap = hi - lo > 1
        if not gap.any():
            return lo
        width = np.where(gap, hi - lo, 2.0)
        j = np.arange(1, GRID + 1) / (GRID + 1)
        cand = np.clip(lo[..., None] + np.ceil(width[..., None] * j), lo[..., None] + 1,
                       hi[..., None] - 1)  # fmt: skip
        cand = np.where(gap[..., None], cand, lo[..., None])
        ok = pred(cand) & gap[..., None]
        lo = np.maximum(lo, np.max(np.where(ok, cand, -np.inf), axis=-1))
        hi = np.minimum(hi, np.min(np.where(~ok & gap[..., None], cand, np.inf), axis=-1))


@dataclass(frozen=True, eq=False)
class CompiledBound:
    """A bound's metadata and compiled numerics (no sympy); see the module docstring.

    ``conditions``: ``(name, text, description, strict)`` per condition; ``terms``: the
    labels of the additive terms; ``recommended_step``: its text (``None``: none);
    ``speedup``: the compiled (leading, rest) split of the rate at the recommended step.
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
        return self.f_expression(arr, shape)

    def _margins(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...], rtol: float = RTOL
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per condition: (holds, margin); ``rtol`` is the rounding allowance (see RTOL)."""
        if self.f_conditions is None:
            return []
        sides = self.f_conditions(arr, shape)
        out = []
        for i, (_, _, _, strict) in enumerate(self.conditions):
            small, big = sides[2 * i], sides[2 * i + 1]
            m = big - small
            holds = m > 0 if strict else m >= -rtol * (np.abs(small) + np.abs(big))
            out.append((holds & np.isfinite(m), m))
        return out

    def _holds(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...], rtol: float = RTOL
    ) -> np.ndarray:
        res = self._margins(arr, shape, rtol)
        if not res:
            return np.ones(shape, dtype=bool)
        return np.logical_and.reduce([h for h, _ in res])

    def feasible(self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        """Every condition holds exactly (margins >= 0, > 0 if strict; no rounding allowance)
        at already-validated float arrays ``arr`` of broadcast shape ``shape``."""
        return self._holds(arr, shape, rtol=0.0)

    def _max_step_arr(self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        """Largest feasible step (margins >= 0 exactly): decades, then log-grid refinement."""
        if self.f_conditions is None:  # nothing limits the step
            return np.full(shape, np.inf)
        ext, step = _ext(arr), self.step_name

        def ok(a: np.ndarray) -> np.ndarray:  # a: (*shape, n)
            return self._holds({**ext, step: a}, a.shape, rtol=0.0)

        decades = 10.0 ** np.arange(-14.0, 13.0)  # 1e-14 ... 1e12
        okd = ok(np.broadcast_to(decades, (*shape, decades.size)))
        ok_lo, ok_hi = okd[..., 0], okd[..., -1]
        # last feasible decade (feasible sets are (0, alpha_max]): bracket [10^i, 10^(i+1)]
        i = np.clip(np.sum(np.cumprod(okd, axis=-1), axis=-1) - 1, 0, decades.size - 2)
        lo, hi = np.log(decades[i]), np.log(decades[i + 1])
        active = ok_lo & ~ok_hi
        for _ in range(12):
            if not active.any():
                break
            g = _log_grid(lo, hi, GRID)
            good = ok(np.exp(g)) & active[..., None]
            k = np.sum(np.cumprod(good, axis=-1), axis=-1)  # feasible prefix length
            new_lo = np.where(
                k > 0, np.take_along_axis(g, np.maximum(k - 1, 0)[..., None], -1)[..., 0], lo
            )
            new_hi = np.where(
                k < GRID, np.take_along_axis(g, np.minimum(k, GRID - 1)[..., None], -1)[..., 0], hi
            )
            lo, hi = np.where(active, new_lo, lo), np.where(active, new_hi, hi)
            active &= hi - lo > 4 * sys.float_info.epsilon * np.maximum(1.0, np.abs(lo))
        out = np.where(ok_hi, np.inf, np.exp(lo))
        # exp(log(x)) may round above the feasible boundary: step down until feasible
        for _ in range(4):
            bad = np.isfinite(out) & ~ok(out[..., None])[..., 0]
            if not bad.any():
                break
            out = np.where(bad, np.nextafter(out, 0.0) * (1 - 2 * sys.float_info.epsilon), out)
        return np.where(ok_lo, out, np.nan)

    def _optimal_step_arr(
        self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...]
    ) -> np.ndarray:
        """Minimiser over ``[alpha_max 1e-20, alpha_max]`` of the bound (unimodal in log alpha)."""
        step, ext = self.step_name, _ext(arr)
        amax = self._max_step_arr(arr, shape)
        unbounded = np.isinf(amax)
        feasible = ~np.isnan(amax)
        top = np.where(unbounded, 1e20, np.where(feasible, amax, 1.0))
        b = np.log(top)
        a = b - np.where(unbounded, 40.0, 20.0) * np.log(10.0)

        def f(logs: np.ndarray) -> np.ndarray:  # logs: (*shape, n)
            v = self._value({**ext, step: np.exp(logs)}, logs.shape)
            return np.where(np.isnan(v), np.inf, v)

        for _ in range(14):
            g = np.concatenate([a[..., None], _log_grid(a, b, GRID), b[..., None]], axis=-1)
            j = np.clip(np.argmin(f(g), axis=-1), 1, GRID)
            a = np.take_along_axis(g, (j - 1)[..., None], -1)[..., 0]
            b = np.take_along_axis(g, (j + 1)[..., None], -1)[..., 0]
            if np.all(b - a <= 1e-15 * np.maximum(1.0, np.abs(a))):
                break
        mid = (a + b) / 2
        pair = f(np.stack([mid, np.log(top)], axis=-1))
        best = np.exp(mid)
        # the optimum may sit on the boundary alpha_max
        best = np.where((pair[..., 1] <= pair[..., 0]) & ~unbounded, top, best)
        return np.where(feasible, best, np.nan)

    # ----------------------------------------------------------------- public numerics
    def evaluate(self, **values: Any) -> np.ndarray:
        arr, shape = self._arrays(values)
        return self._value(arr, shape)

    def __call__(self, **values: Any) -> np.ndarray:
        return self.evaluate(**values)

    def at_optimal_step(self, **values: Any) -> OptimalStep:
        arr, shape = self._arrays(values, drop=(self.step_name,))
        a = self._optimal_step_arr(arr, shape)
        ok = np.isfinite(a)
        v = self._value({**arr, self.step_name: np.where(ok, a, 1.0)}, shape)
        return OptimalStep(alpha=a, value=np.where(ok, v, np.nan))

    def term_values(self, **values: Any) -> list[tuple[str, np.ndarray]]:
        arr, shape = self._arrays(values)
        return list(zip(self.terms, self.f_terms(arr, shape), strict=True))

    def condition_report(self, **values: Any) -> list[ConditionResult]:
        arr, shape = self._arrays(values)
        return [
            ConditionResult(name, text, h, m, desc)
            for (name, text, desc, _), (h, m) in zip(
                self.conditions, self._margins(arr, shape), strict=True
            )
        ]

    def conditions_hold(self, **values: Any) -> np.ndarray:
        arr, shape = self._arrays(values)
        return self._holds(arr, shape)

    def recommended_step_value(self, **values: Any) -> np.ndarray | None:
        f = self.f_recommended
        if f is None:
            return None
        arr, shape = self._arrays(values)
        if any(n not in arr for n in f.names):
            return None
        return f(arr, shape)

    def max_step(self, **values: Any) -> np.ndarray:
        arr, shape = self._arrays(values, drop=(self.step_name,))
        return self._max_step_arr(arr, shape)

    def optimal_step(self, **values: Any) -> np.ndarray:
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
        stepname = self.step_name
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
        ext = _ext(arr)

        def with_step(hv: np.ndarray) -> dict[str, np.ndarray]:  # hv: (*shape, n)
            a = {**ext, "H": hv}
            if step == "recommended":
                a[stepname] = self.f_recommended(a, hv.shape)
            elif step == "optimal":
                a[stepname] = self._optimal_step_arr(a, hv.shape)
            return a

        if self.uses_H:
            speedup = _largest_true_integer(
                self._speedup_test(step, factor, ext, shape, with_step), shape, float(h_max)
            )
            conditions = _largest_true_integer(
                lambda hv: self._holds(with_step(hv), hv.shape), shape, float(h_max)
            )
        else:
            speedup = np.full(shape, float(h_max))
            conditions = speedup.copy()
        H = np.asarray(np.minimum(speedup, conditions))
        at = np.where(np.isfinite(H), H, 1.0)[..., None]
        alpha = np.broadcast_to(with_step(at)[stepname], at.shape)[..., 0]
        return MaxH(
            H=H,
            speedup=speedup,
            conditions=conditions,
            binding=_binding(speedup, conditions, float(h_max)),
            step=step,
            alpha=np.where(np.isfinite(H), alpha, np.nan),
        )

    def _speedup_test(
        self,
        step: str | float,
        factor: float,
        ext: Mapping[str, np.ndarray],
        shape: tuple[int, ...],
        with_step: Callable[[np.ndarray], dict[str, np.ndarray]],
    ) -> Callable[[np.ndarray], np.ndarray]:
        """The predicate "``H`` keeps linear speed-up" of :meth:`max_H` (see there)."""
        if step == "recommended":
            lead_fn, rest_fn = self.speedup

            def speedup_ok(hv: np.ndarray) -> np.ndarray:
                a = {**ext, "H": hv}
                return rest_fn(a, hv.shape) <= factor * lead_fn(a, hv.shape)

            return speedup_ok
        one = np.ones((*shape, 1))
        base = self._value(with_step(one), one.shape)

        def within(hv: np.ndarray) -> np.ndarray:
            return self._value(with_step(hv), hv.shape) <= (1 + factor) * base

        return within

    def rounds_to_eps(self, eps: float, *, t_max: int = 10**15, **values: Any) -> np.ndarray:
        eps = float(validate(eps=eps)["eps"])
        arr, shape = self._arrays(values, drop=("T", self.step_name))
        hv = arr.get("H", np.ones(()))
        ext, step = _ext(arr), self.step_name
        r_max = np.floor(t_max / hv) * np.ones(shape)

        def not_ok(r: np.ndarray) -> np.ndarray:  # r: (*shape, n); monotone false -> true
            a = {**ext, "T": r * hv[..., None]}
            best = self._optimal_step_arr(a, r.shape)
            v = self._value({**a, step: np.where(np.isnan(best), 1.0, best)}, r.shape)
            return ~(np.isfinite(best) & (v <= eps)) | (r > r_max[..., None])

        # doubling grid 1, 2, 4, ... (one call), then integer refinement of the bracket
        pw = 2.0 ** np.arange(0, 64)
        cand = np.minimum(pw, r_max[..., None])
        bad = not_ok(cand)
        reach = ~bad[..., -1] & (r_max >= 1)
        k = np.sum(np.cumprod(bad, axis=-1), axis=-1)  # leading infeasible candidates
        k = np.minimum(k, pw.size - 1)
        hi = np.take_along_axis(cand, k[..., None], -1)[..., 0]
        lo = np.where(
            k > 0, np.take_along_axis(cand, np.maximum(k - 1, 0)[..., None], -1)[..., 0], 0.0
        )
        lo = np.where(reach, lo, 0.0)
        hi = np.where(reach, hi, 1.0)
        last_bad = _last_true_int(not_ok, lo, hi)
        return np.where(reach, last_bad + 1, np.inf)


def _largest_true_integer(
    pred: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...], h_max: float
) -> np.ndarray:
    """Largest integer ``h`` in ``[1, h_max]`` with ``pred(h)`` (pred monotone: true then false).

    NaN where ``pred(1)`` is false; ``h_max`` where ``pred(h_max)`` is true. ``pred`` takes
    candidates with a trailing grid axis: one call on the powers of two, then the refinement.
    """
    n = max(1, int(math.ceil(math.log2(h_max))) + 1)
    cand = np.minimum(2.0 ** np.arange(n), h_max)
    cand = np.append(cand, h_max)
    okc = pred(np.broadcast_to(cand, (*shape, cand.size)).copy())
    ok1, ok_top = okc[..., 0], okc[..., -1]
    k = np.sum(np.cumprod(okc, axis=-1), axis=-1)  # leading true candidates
    lo = np.take_along_axis(np.broadcast_to(cand, okc.shape), np.maximum(k - 1, 0)[..., None], -1)[
        ..., 0
    ]
    hi = np.take_along_axis(
        np.broadcast_to(cand, okc.shape), np.minimum(k, cand.size - 1)[..., None], -1
    )[..., 0]
    lo = np.where(ok1 & ~ok_top, lo, 1.0)
    hi = np.where(ok1 & ~ok_top, hi, 1.0)
    best = _last_true_int(pred, lo, hi)
    best = np.where(ok_top, h_max, best)
    return np.where(ok1, best, np.nan)
