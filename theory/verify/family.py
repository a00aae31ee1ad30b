"""What a bound is verified as (:class:`Family`): the algorithm it states, the outer update of
its designs, which parameters vary, and what it measures; read from the bound's own spec
(:func:`family_of`), never guessed from its formula. The oracles
(:mod:`theory.verify.oracle_exact`, ...) and the designs (:mod:`theory.verify.oracle`) take
it."""

from __future__ import annotations

from dataclasses import dataclass

from theory.algorithm import ALGORITHMS, AlgorithmSpec
from theory.bound import Bound
from theory.verify.pinned import pinned_step
from theory.verify.sampling import bound_spec

__all__ = ["Family", "family_of", "EXACT_ALGORITHMS", "ALL_REDUCE_ALGORITHMS"]

#: algorithms a design measures exactly: an exact oracle in the table
#: (:attr:`theory.algorithm.Algorithm.exact`) and no warm-up required (a design has none)
EXACT_ALGORITHMS = tuple(a.name for a in ALGORITHMS.values() if a.exact and a.warmup != "required")

#: algorithms whose workers all-reduce their stochastic gradients at the common point on
#: every step and take a heavy-ball outer step every ``H`` steps: SlowMo over all-reduce SGD
#: (Wang, Tantia, Ballas, Rabbat, ICLR 2020, eqs. (2)-(3) with the AR-SGD base). The workers
#: stay identical and the heterogeneity cancels (the step is ``grad f`` plus noise of
#: variance ``sigma^2/K``), so the oracle measures them as Local SGD with one worker, noise
#: variance ``sigma^2/K``, no heterogeneity and the outer heavy-ball step ``buf <- mu buf +
#: (z - x)``, ``z <- z - gamma buf``, over full rounds only (``T`` a multiple of ``H``)
ALL_REDUCE_ALGORITHMS = tuple(a.name for a in ALGORITHMS.values() if a.exact == "all_reduce")


@dataclass(frozen=True)
class Family:
    """What a bound is verified as: its algorithm ``spec`` (:attr:`theory.bound.Bound.algorithm`:
    kind, coin model) and the outer update of the designs (``outer``: ``"average"``,
    ``"sgd"`` (outer rate, no momentum), ``"momentum"`` (heavy ball and PyTorch Nesterov,
    each design one of them), ``"nesterov"`` or ``"heavy_ball"`` alone: the bound's
    :attr:`~theory.bound.Bound.outers` with its momentum parameter), which of its
    parameters vary (``uses_gamma``, ``uses_mu``), ``iid`` data, and what it measures
    (``anchors``: the average of ``E||grad f(z_r)||^2`` over the anchors of the full rounds,
    for a bound whose ``measured`` attribute is ``"anchors"``; else the per-step average at
    ``xbar_t``). ``pinned``: the bound is stated at one step, its recommended one
    (:func:`pinned_step`), which every design takes."""

    spec: AlgorithmSpec
    outer: str
    uses_gamma: bool
    iid: bool
    uses_mu: bool = False
    anchors: bool = False
    pinned: bool = False

    @property
    def algorithm(self) -> str:
        """The algorithm's name in the table."""
        return self.spec.kind

    @property
    def coins(self) -> str:
        return self.spec.coins

    @property
    def uses_p(self) -> bool:
        """Whether the designs draw ``p`` and ``eta`` (an algorithm with pull steps)."""
        return self.spec.definition.pulls

    @property
    def minibatch(self) -> bool:
        """Whether a design is minibatch SGD (no rounds: ``H = 1``)."""
        return not self.spec.definition.rounds

    @property
    def all_reduce(self) -> bool:
        """An algorithm of :data:`ALL_REDUCE_ALGORITHMS` (outer heavy ball, full rounds,
        heterogeneity without effect)."""
        return self.algorithm in ALL_REDUCE_ALGORITHMS

    @property
    def exact(self) -> bool:
        return self.algorithm in EXACT_ALGORITHMS

    @property
    def heterogeneous(self) -> bool:
        """Whether the heterogeneity ``zeta^2`` is a source of the designs."""
        return not (self.iid or self.all_reduce)

    @property
    def full_rounds(self) -> bool:
        """Whether ``T`` is a multiple of ``H`` in every design."""
        return self.anchors or self.all_reduce


def _design_outer(outers: tuple[str, ...], uses_mu: bool) -> str:
    """The outer update of the designs for a bound covering ``outers`` (:class:`Family`)."""
    if set(outers) == {"sgd", "nesterov"}:
        return "momentum"
    if outers == ("sgd",):
        return "heavy_ball" if uses_mu else "sgd"
    return outers[0]


def family_of(bound: Bound) -> Family:
    """The :class:`Family` of ``bound``: the spec it states (:func:`bound_spec`), never
    guessed from its formula."""
    spec = bound_spec(bound)
    uses = set(bound.parameters)
    return Family(
        spec=spec,
        outer=_design_outer(tuple(bound.outers), "mu" in uses),
        uses_gamma="gamma" in uses or "mu" in uses,
        iid=any(a.key == "A3iid" for a in bound.assumptions),
        uses_mu="mu" in uses,
        anchors=getattr(bound, "measured", "iterates") == "anchors",
        pinned=pinned_step(bound),
    )
