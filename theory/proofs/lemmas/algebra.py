"""Symbolic vectors and finite expectations (branch sums) for the proof lemmas."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy as sp


def vector(name: str, dim: int = 2) -> sp.Matrix:
    """A column vector of ``dim`` real symbols ``name_0, ..., name_{dim-1}``."""
    return sp.Matrix([sp.Symbol(f"{name}_{i}", real=True) for i in range(dim)])


def dot(u: sp.Matrix, v: sp.Matrix) -> sp.Expr:
    """Euclidean inner product of two column vectors."""
    return sp.Add(*(a * b for a, b in zip(u, v, strict=True)))


def sqnorm(u: sp.Matrix) -> sp.Expr:
    """Squared Euclidean norm ``||u||^2``."""
    return dot(u, u)


# ----------------------------------------------------------------------------- expectations
@dataclass(frozen=True)
class Branches:
    """A finite probability distribution: ``(probability, value)`` pairs.

    Probabilities are sympy expressions (for example ``p`` and ``1 - p`` for a Bernoulli
    coin); values are anything the function passed to :func:`expect` accepts.
    """

    outcomes: tuple[tuple[sp.Expr, Any], ...]

    @classmethod
    def of(cls, *pairs: tuple[Any, Any]) -> Branches:
        return cls(tuple((sp.sympify(pr), v) for pr, v in pairs))

    def total_probability(self) -> sp.Expr:
        return sp.Add(*(pr for pr, _ in self.outcomes))


def expect(fn: Callable[..., Any], *dists: Branches) -> Any:
    """``E fn(X_1, ..., X_n)`` for independent ``X_i ~ dists[i]``: the weighted branch sum."""
    total: Any = None
    for combo in itertools.product(*(d.outcomes for d in dists)):
        weight = sp.Mul(*(pr for pr, _ in combo))
        term = weight * fn(*(v for _, v in combo))
        total = term if total is None else total + term
    return sp.S.Zero if total is None else total


def mean_zero_two_point(name: str, dim: int = 2) -> tuple[Branches, sp.Symbol]:
    """A general two-point mean-zero random vector.

    Value ``v`` with probability ``pi`` and ``-pi v / (1 - pi)`` with probability
    ``1 - pi`` (``v`` a symbolic vector, ``pi`` a symbol in ``(0, 1)``). Returns the
    distribution and ``pi``.
    """
    pi = sp.Symbol(f"pi_{name}", positive=True)
    v = vector(name, dim)
    return Branches.of((pi, v), (1 - pi, -pi * v / (1 - pi))), pi
