"""The sympy symbols of the toolkit, in the authors' notation, with their assumptions.

``p`` is declared nonnegative; the constraint ``p < 1`` is not expressible as a sympy
assumption, so every expression that divides by ``1 - p`` is only used with ``p < 1``
(enforced by :mod:`theory.validation`).
"""

from __future__ import annotations

import sympy as sp

__all__ = [
    "L",
    "sigma",
    "zeta",
    "F0",
    "beta",
    "K",
    "H",
    "T",
    "R",
    "p",
    "alpha",
    "eta",
    "gamma",
    "mu",
    "eps",
    "ALL",
    "by_name",
]

L = sp.Symbol("L", positive=True)
sigma = sp.Symbol("sigma", nonnegative=True)
zeta = sp.Symbol("zeta", nonnegative=True)
F0 = sp.Symbol("F0", nonnegative=True)
beta = sp.Symbol("beta", nonnegative=True)
K = sp.Symbol("K", positive=True, integer=True)
H = sp.Symbol("H", positive=True, integer=True)
T = sp.Symbol("T", positive=True, integer=True)
R = sp.Symbol("R", positive=True, integer=True)
p = sp.Symbol("p", nonnegative=True)
alpha = sp.Symbol("alpha", positive=True)
eta = sp.Symbol("eta", nonnegative=True)
gamma = sp.Symbol("gamma", positive=True)
mu = sp.Symbol("mu", nonnegative=True)
eps = sp.Symbol("epsilon", positive=True)

ALL: tuple[sp.Symbol, ...] = (L, sigma, zeta, F0, beta, K, H, T, R, p, alpha, eta, gamma, mu, eps)

_BY_NAME = {s.name: s for s in ALL}
_BY_NAME["eps"] = eps


def by_name(name: str) -> sp.Symbol:
    """Return the project symbol called ``name`` (``eps`` and ``epsilon`` both work)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no symbol named {name!r}; known: {sorted(_BY_NAME)}") from None
