"""Named assumptions (A1-A4 and variants) that bounds declare they need."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Assumption",
    "A1_SMOOTH",
    "A2_NOISE",
    "A2_RELATIVE_NOISE",
    "A3_HETEROGENEITY",
    "A3_IID",
    "A4_LOWER_BOUND",
    "INNER_SGD",
    "OUTER_AVERAGING",
    "INDEPENDENT_COINS",
    "SHARED_COINS",
    "COIN_ASSUMPTIONS",
    "ALL_ASSUMPTIONS",
]


@dataclass(frozen=True)
class Assumption:
    """A named hypothesis of a theorem, with the constants it introduces."""

    key: str
    name: str
    statement: str
    constants: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.key} ({self.name}): {self.statement}"


A1_SMOOTH = Assumption(
    "A1",
    "smoothness",
    "every f_k is L-smooth: ||grad f_k(x) - grad f_k(y)|| <= L ||x - y||",
    ("L",),
)
A2_NOISE = Assumption(
    "A2",
    "bounded noise",
    "E g_k(x) = grad f_k(x) and E||g_k(x) - grad f_k(x)||^2 <= sigma^2, independent across "
    "workers and steps",
    ("sigma",),
)
A2_RELATIVE_NOISE = Assumption(
    "A2r",
    "relative noise",
    "E g_k = grad f_k and E||g_k - grad f_k||^2 <= beta ||grad f||^2 + sigma^2 (Cooperative SGD A4)",
    ("beta", "sigma"),
)
A3_HETEROGENEITY = Assumption(
    "A3",
    "bounded heterogeneity",
    "(1/K) sum_k ||grad f_k(x) - grad f(x)||^2 <= zeta^2 for all x",
    ("zeta",),
)
A3_IID = Assumption("A3iid", "i.i.d. data", "every worker samples the same distribution (zeta = 0)")
A4_LOWER_BOUND = Assumption("A4", "lower bound", "f >= f_star and F0 = f(x0) - f_star", ("F0",))
INNER_SGD = Assumption(
    "S1", "inner SGD", "the inner optimizer is plain SGD (no momentum, no adaptive scaling)"
)
OUTER_AVERAGING = Assumption(
    "S2", "outer averaging", "the outer step is plain averaging z <- mean_k x_k (gamma = 1, mu = 0)"
)
INDEPENDENT_COINS = Assumption(
    "S3", "independent coins", "each worker draws its own Bernoulli(p) coin at every step"
)
SHARED_COINS = Assumption(
    "S3s",
    "shared coins",
    "one Bernoulli(p) coin per step, the same on every worker (the authors' code)",
)
#: the assumption that states each coin model of :data:`theory.algorithm.COINS` (a bound's
#: coin model is its algorithm spec's, :attr:`theory.bound.Bound.algorithm`)
COIN_ASSUMPTIONS = {"independent": INDEPENDENT_COINS, "shared": SHARED_COINS}

ALL_ASSUMPTIONS = (
    A1_SMOOTH,
    A2_NOISE,
    A2_RELATIVE_NOISE,
    A3_HETEROGENEITY,
    A3_IID,
    A4_LOWER_BOUND,
    INNER_SGD,
    OUTER_AVERAGING,
    INDEPENDENT_COINS,
    SHARED_COINS,
)
