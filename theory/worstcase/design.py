"""A design of the class oracle: one method, one horizon, one function class.

:class:`ClassDesign` holds what :func:`theory.worstcase.worst_case` needs, validated once:
the method (an :class:`~theory.algorithm.AlgorithmSpec` with its step ``alpha``), ``K``
workers, ``T`` steps, the class constants ``L``, ``zeta``, ``F0``, what is measured and the
coins (every coin path with its probability, or one fixed pull pattern).

The class (A1, A3, A4 as the toolkit states them, :mod:`theory.assumptions`; ``sigma = 0``):
``K`` functions ``f_k``, each ``L``-smooth (nonconvex allowed), ``f = (1/K) sum_k f_k``,
``(1/K) sum_k ||grad f_k(y) - grad f(y)||^2 <= zeta^2`` and ``f(x0) - inf f <= F0``.

Scaling: with ``u = max(L F0, zeta^2)`` (units of a squared gradient) the worst case is
``u * W(alpha L, eta/L, zeta/sqrt(u), L F0/u)`` with ``W`` the worst case at ``L = 1`` (the
change of variables ``f -> (L/u) f(x u^(1/2)/L)``); the oracle solves the normalised problem,
which keeps the SDP's numbers near 1 whatever the units. ``u = 0`` (``F0 = 0`` and
``zeta = 0``) is the trivial class: ``grad f(x0) = 0`` and every method stays at ``x0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.algorithm import AlgorithmSpec
from theory.validation import validate
from theory.worstcase.trajectory import MEASURED, path_count

__all__ = ["ClassDesign", "MAX_PATHS", "MAX_POINTS"]

#: the most coin paths the oracle enumerates (the SDP grows with every path)
MAX_PATHS = 64
#: the most points one function is evaluated at (the SDP has about ``K * MAX_POINTS`` rows)
MAX_POINTS = 160


@dataclass(frozen=True)
class ClassDesign:
    """One design of the class oracle (module docstring).

    ``spec``: the method, with ``spec.alpha`` set; its ``sync_delay`` must be 0 (blocking
    sync) and EASGD's elastic mixing is not covered. ``T``: steps (``measured="anchors"``:
    ``R = T/H`` rounds, ``T`` a multiple of ``H``, no warm-up). ``pulls``: ``None`` (the
    expectation over every coin path, at most :data:`MAX_PATHS` of them) or a ``K x T``
    table of 0/1 (1: a pull; shared coins need equal rows).
    """

    spec: AlgorithmSpec
    K: int
    T: int
    L: float
    zeta: float
    F0: float
    measured: str = "iterates"
    pulls: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        spec = self.spec
        if not isinstance(spec, AlgorithmSpec):
            raise UserInputError("a class design needs an AlgorithmSpec")
        if spec.alpha is None:
            raise UserInputError("the class oracle needs the learning rate alpha")
        if spec.definition.elastic:
            raise UserInputError(
                f"the class oracle does not cover {spec.kind!r}: its elastic mixing keeps a "
                "centre apart from the workers (covered: minibatch SGD, Local SGD, DiLoCo, "
                "PALSGD and the all-reduce base)"
            )
        if spec.sync_delay:
            raise UserInputError("the class oracle covers the blocking sync only (sync_delay 0)")
        vals = validate(K=self.K, T=self.T, L=self.L, zeta=self.zeta, F0=self.F0)
        set_ = object.__setattr__
        for name in ("K", "T"):
            set_(self, name, int(vals[name]))
        for name in ("L", "zeta", "F0"):
            set_(self, name, float(vals[name]))
        check_choice("measured", self.measured, MEASURED)
        if self.measured == "anchors":
            if not spec.definition.rounds:
                raise UserInputError(f"{spec.kind!r} has no rounds: measure 'iterates'")
            if spec.warmup_steps or self.T % spec.H:
                raise UserInputError(
                    f"measured='anchors' needs T a multiple of H = {spec.H} and no warm-up "
                    f"(T = {self.T}, T0 = {spec.warmup_steps})"
                )
        set_(self, "pulls", self._pattern())
        if self.pulls is None and self.paths > MAX_PATHS:
            raise UserInputError(
                f"{self.paths} coin paths (K = {self.K}, T = {self.T}, {spec.coins} coins): the "
                f"class oracle enumerates at most {MAX_PATHS}; shorten T or give a fixed pull "
                "pattern (--pulls)"
            )

    def _pattern(self) -> tuple[tuple[int, ...], ...] | None:
        if self.pulls is None or not self.spec.pulls:
            return None
        try:
            arr = np.asarray(self.pulls, dtype=int)
        except (TypeError, ValueError):
            raise UserInputError("pulls: a K x T table of 0/1") from None
        if arr.shape != (self.K, self.T) or not np.isin(arr, (0, 1)).all():
            raise UserInputError(
                f"pulls: a {self.K} x {self.T} table of 0/1 (K x T), got shape {arr.shape}"
            )
        if self.spec.shared_coins and not (arr == arr[0]).all():
            raise UserInputError("pulls: shared coins draw one coin per step (equal rows)")
        return tuple(tuple(int(v) for v in row) for row in arr)

    @property
    def paths(self) -> int:
        """The coin paths enumerated (1 with a fixed pattern or without pulls)."""
        return 1 if self.pulls is not None else path_count(self.spec, self.K, self.T)

    @property
    def R(self) -> int:
        """Rounds (``T // H``)."""
        return self.T // self.spec.H

    @property
    def unit(self) -> float:
        """``u = max(L F0, zeta^2)``: the worst case is ``u`` times the normalised one."""
        return max(self.L * self.F0, self.zeta**2)

    def normalised(self) -> tuple[AlgorithmSpec, float, float]:
        """``(spec, zeta, F0)`` of the normalised problem (``L = 1``, unit ``u = 1``)."""
        u = self.unit
        spec = self.spec.replace(alpha=self.spec.alpha * self.L, eta=self.spec.eta / self.L)
        return spec, self.zeta / np.sqrt(u), self.L * self.F0 / u

    def describe(self) -> dict[str, Any]:
        """The design, JSON-ready."""
        s = self.spec
        return {
            "algorithm": s.kind, "K": self.K, "T": self.T, "H": s.H, "R": self.R,
            "L": self.L, "alpha": s.alpha, "zeta": self.zeta, "F0": self.F0,
            "p": s.p, "eta": s.eta, "outer": s.outer, "gamma": s.gamma, "mu": s.mu,
            "T0": s.T0, "coins": s.coins, "measured": self.measured,
            "pulls": None if self.pulls is None else [list(r) for r in self.pulls],
            "paths": self.paths,
        }  # fmt: skip
