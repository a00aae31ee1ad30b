"""The heterogeneity lower bound (derived here): the exact value on two-curvature instances.

The instances (``j`` workers with curvature ``L``, ``j`` with ``b``, one more with their mean
when ``K`` is odd; no noise, no initial gap) and their exact value are those of
:mod:`theory.lower.two_curvature`, whose docstring derives them; the region they must stay
in is sized by :mod:`theory.lower.region`. Each instance is in the class of A1-A4 at the
given ``L`` and ``zeta``, so its exact value is a lower bound on the worst case over the
class. :class:`InstanceLowerBound` takes the largest value over a fixed grid of ``b``
(:data:`B_GRID`) and over the horizons of :func:`~theory.lower.two_curvature.horizons`;
:data:`LOCAL_SGD_HETEROGENEITY_LOWER` is the registered one. At ``H = 1`` and ``p = 0`` the
average follows gradient descent on ``f`` from its minimiser and the value is 0:
heterogeneity costs nothing there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.algorithm import ALGORITHMS, OUTERS
from theory.lower.region import reach_history
from theory.lower.two_curvature import (
    COINS,
    MEASURED,
    HeteroInstance,
    _groups,
    _round_lengths,
    horizons,
    instance_value,
)
from theory.validation import validate

__all__ = [
    "B_GRID",
    "InstanceLowerBound",
    "LOCAL_SGD_HETEROGENEITY_LOWER",
]

#: curvatures ``b / L`` of the second worker group tried by the registered lower bound
B_GRID = (-0.9, -0.5, 0.0, 0.5)


@dataclass(frozen=True, eq=False)
class InstanceLowerBound:
    """A lower bound evaluated as the exact value on explicit instances of the class.

    Same reading as every lower bound of :mod:`theory.lower` (``kind = "lower"``): no valid
    upper bound may be below it inside its conditions. ``evaluate`` takes scalars.
    ``attained_on``: the family its value is attained on (``"two_curvature"``), which the
    verifier evaluates exactly with code of its own; ``charge_region``: see
    :func:`instance_value`.
    """

    name: str
    title: str
    provenance: str
    algorithms: tuple[str, ...]
    parameters: tuple[str, ...]
    optional: dict[str, float] = field(default_factory=dict)
    derived_here: bool = True
    notes: str = ""
    b_grid: Sequence[float] = B_GRID
    kind: str = "lower"
    attained_on: str = "two_curvature"
    charge_region: bool = True

    def instances(self, **values: Any) -> list[HeteroInstance]:
        """The instance at each ``b`` of the grid and each horizon (value, ``c``, region).

        Computed once per set of values (:func:`_cached_instances`): ``palsgd check`` asks
        for the same instances beside every upper bound it checks at one step.
        """
        try:
            key = tuple(sorted(values.items()))
            hash(key)
        except TypeError:  # an unhashable value (an array): computed, not cached
            return self._instances(values)
        return list(_cached_instances(self, key))

    def _instances(self, values: dict[str, Any]) -> list[HeteroInstance]:
        """:meth:`instances`, computed."""
        v = self._inputs(values)
        out = []
        H, T = v["H"], v["T"]
        spans = horizons(H, T, v["p"])
        for f in self.b_grid:
            best = 0.0
            hist = reach_history(
                _groups(v["K"], v["L"], f * v["L"]), _round_lengths(H, max(spans)),
                v["alpha"], v["p"], v["eta"], v["outer"], v["gamma"], v["mu"],
            )  # fmt: skip
            for n in spans:
                U = float(hist[-1] if n == T else hist[n // H - 1])
                ins = instance_value(
                    b=f * v["L"], horizon=n, reach=U, charge_region=self.charge_region, **v
                )
                out.append(ins)
                if ins.value < 0.5 * best:  # past the best horizon: longer ones cost more
                    break
                best = max(best, ins.value)
        return out

    def evaluate(self, **values: Any) -> float:
        """The largest exact value over the grid of instances (a lower bound)."""
        return max(i.value for i in self.instances(**values))

    def _inputs(self, values: dict[str, Any]) -> dict[str, Any]:
        missing = sorted(set(self.parameters) - set(values))
        if missing:
            raise UserInputError(f"{self.name}: missing parameter(s) {missing}")
        known = set(self.parameters) | set(self.optional) | {"outer", "measured", "coins"}
        # sigma and F0: the instances have no noise and no initial gap, in the class for any
        unknown = sorted(set(values) - known - {"sigma", "F0"})
        if unknown:
            raise UserInputError(
                f"{self.name}: unknown parameter(s) {unknown}; it takes {sorted(known)}"
            )
        if values.get("p", 0) and "eta" not in values:
            raise UserInputError(f"{self.name}: p > 0 (PALSGD) needs the pull rate eta")
        v = {**self.optional, **{k: x for k, x in values.items() if k in known}}
        outer = v.pop("outer", None)
        measured = check_choice("measured", v.pop("measured", "iterates"), MEASURED)
        coins = check_choice("coins", v.pop("coins", "independent"), COINS)
        num = validate({k: x for k, x in v.items()})
        out: dict[str, Any] = {k: float(np.asarray(x).reshape(())) for k, x in num.items()}
        for k in ("K", "H", "T"):
            out[k] = int(out[k])
        plain = out["gamma"] == 1 and out["mu"] == 0
        if outer is None and not plain:
            raise UserInputError(
                f"{self.name}: gamma = {out['gamma']:g}, mu = {out['mu']:g} given without "
                f"outer: say which outer optimiser ({list(OUTERS)})"
            )
        outer = check_choice("outer optimiser", outer or "average", OUTERS)
        return {**out, "outer": outer, "measured": measured, "coins": coins}


#: the algorithms whose exact value the instances compute: the local methods of the exact
#: moment recursion without a required warm-up (Local SGD, DiLoCo, PALSGD with either coin
#: model; :data:`theory.algorithm.ALGORITHMS`)
INSTANCE_ALGORITHMS = tuple(
    a.name
    for a in ALGORITHMS.values()
    if a.exact == "moments" and a.local and a.warmup != "required"
)

LOCAL_SGD_HETEROGENEITY_LOWER = InstanceLowerBound(
    name="local_sgd_heterogeneity_lower",
    title="Local SGD / PALSGD: exact value on a two-curvature heterogeneous instance (lower bound)",
    provenance=(
        "derived here: exact moments of Local SGD / PALSGD (independent or shared coins) on the "
        "piecewise-quadratic instances of theory.lower.hetero (docs/lower_bounds.md)"
    ),
    algorithms=INSTANCE_ALGORITHMS,
    parameters=("alpha", "L", "zeta", "K", "H", "T"),
    optional={"p": 0.0, "eta": 0.0, "gamma": 1.0, "mu": 0.0},
    notes=(
        "A lower bound (kind = 'lower'): the exact (1/T) sum_t E||grad f(xbar_t)||^2 on "
        "instances with sigma = 0 and F0 = 0 that satisfy A1-A4 at the given L and zeta; "
        f"the largest over b/L in {list(B_GRID)}. It grows with H and zeta and is 0 at H = 1."
    ),
)


@functools.lru_cache(maxsize=256)
def _cached_instances(
    bound: InstanceLowerBound, key: tuple[tuple[str, Any], ...]
) -> tuple[HeteroInstance, ...]:
    """The instances of ``bound`` at the values ``key`` (sorted items), kept: the instances
    are frozen, and a lower bound of the registry is one object for the whole process."""
    return tuple(bound._instances(dict(key)))
