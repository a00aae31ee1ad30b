"""The wiring of the Theorem 1 chain: which lemma object each lemma is built from.

Each entry of :data:`WIRING` calls one lemma function with the objects of the lemmas whose
hypotheses it uses, so a lemma's hypotheses are computed from those objects.
:class:`Chain` builds the lemmas on demand and in reading order; ``mutate`` (a function of
a lemma) is applied to every lemma as it is built, so a changed lemma propagates to all of
its users (the mutation tests rely on this).

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

from collections.abc import Callable

from theory.proofs.lemmas import Lemma
from theory.proofs.palsgd import descent, drift, oracle, partial, rounds
from theory.proofs.palsgd.notation import coefficients

WIRING: dict[str, Callable[[Chain], Lemma]] = {
    "L1": lambda c: oracle.l1_oracle_mean(),
    "L2": lambda c: oracle.l2_oracle_second_moment(),
    "L3": lambda c: oracle.l3_oracle_variance(),
    "L4": lambda c: oracle.l4_variance_bound(),
    "L5": lambda c: oracle.l5_averaged_direction(c.coins),
    "L5c": lambda c: oracle.l5c_averaged_variance(c.co, c.coins, c["L4"]),
    "L6": lambda c: descent.l6_descent(),
    "L7": lambda c: descent.l7_polarisation(),
    "L8": lambda c: descent.l8_mean_square(),
    "L9": lambda c: descent.l9_gradient_gap(),
    "L10a": lambda c: descent.l10a_young(),
    "L10": lambda c: descent.l10_heterogeneity_split(c["L10a"]),
    "L10s": lambda c: descent.l10s_mean_gradient_split(c["L10a"]),
    "L11": lambda c: descent.l11_one_step(c.co, c["L5c"], c["L9"]),
    "L12": lambda c: drift.l12_unrolled_deviation(),
    "L13": lambda c: drift.l13_martingale(),
    "L14": lambda c: drift.l14_cauchy_schwarz(),
    "L15a": lambda c: drift.l15a_pull_contraction(),
    "L15": lambda c: drift.l15_anchor_distance(c["L4"], c["L14"]),
    "L16": lambda c: drift.l16_round_drift(c.co, c["L15"]),
    "L17": lambda c: rounds.l17_drift_feedback(c.co, c["L16"], c["L10"]),
    "L18": lambda c: rounds.l18_round_descent(
        c.co, c.coins, c["L11"], c["L10" if c.coins == "independent" else "L10s"], c["L17"]
    ),
    "L18b": lambda c: rounds.l18b_round_descent_c4(c.co, c["L18"]),
    "L19": lambda c: rounds.l19_telescoping(),
    "L20": lambda c: rounds.l20_theorem(c.co, c["L18b"]),
    "L20s": lambda c: rounds.l20s_sharp(c.co, c["L18"]),
    "L21a": lambda c: partial.l21a_conditions_at_shorter_rounds(c.co),
    "L21b": lambda c: partial.l21b_round_constant_share(c.co),
    "L21": lambda c: partial.l21_final_partial_round(c.co, c["L18b"], c["L21b"]),
}

#: the lemmas the statement is assembled from (conditions and bound)
CORE = ("L11", "L15a", "L17", "L18", "L18b", "L19", "L20", "L20s")


class Chain:
    """The lemmas of Theorem 1 for one coin model, built on demand from :data:`WIRING`."""

    def __init__(self, coins: str, mutate: Callable[[Lemma], Lemma] | None = None) -> None:
        self.coins = coins
        self.co = coefficients(coins)
        self.mutate = mutate
        self._built: dict[str, Lemma] = {}

    @property
    def keys(self) -> tuple[str, ...]:
        """The lemma keys in reading order (L10s only for shared coins)."""
        return tuple(k for k in WIRING if k != "L10s" or self.coins == "shared")

    def __getitem__(self, key: str) -> Lemma:
        if key not in self._built:
            lem = WIRING[key](self)
            self._built[key] = self.mutate(lem) if self.mutate is not None else lem
        return self._built[key]

    def lemmas(self, keys: tuple[str, ...] | None = None) -> list[Lemma]:
        """The lemmas with ``keys`` (default: all), in reading order."""
        return [self[k] for k in (self.keys if keys is None else keys)]
