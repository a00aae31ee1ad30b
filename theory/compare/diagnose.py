"""Why a method wins or loses at its tuned point: progress per round, floors, consensus.

For one configuration the round map ``M`` of the anchor moments (:mod:`theory.compare.scan`)
says everything about the long run, exactly:

* ``rate``: the spectral radius of the map of the anchor's mean ``(E z, E buf)``: the mean
  error shrinks by this factor per round (``rate ** (1/H)`` per step). Pulls towards a stale
  anchor shorten a round's progress: the rate is closer to 1.
* the floor ``E||grad f(z_inf)||^2`` at the fixed point of ``M`` (when ``M`` contracts), split
  into the **bias** ``||grad f(E z_inf)||^2`` (the drift of heterogeneous local steps moves
  the mean's fixed point off ``x*``), the **coin variance** (the floor without gradient noise
  minus the bias) and the **noise** (the rest);
* ``consensus``: ``E (1/K) sum_k ||x_k - xbar||^2`` at the end of a round at the fixed point:
  how far the workers spread before they sync.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from theory.compare.exact import Quadratic
from theory.compare.methods import Method
from theory.compare.pairs import round_moments
from theory.compare.scan import anchor_map
from theory.moments.rounds import BUF1, ONE, Z1, Z2

__all__ = ["Diagnosis", "diagnose"]


@dataclass(frozen=True)
class Diagnosis:
    """The long-run picture of one configuration (see the module docstring): ``rate`` the
    contraction of the anchor's mean per round and ``rate_per_step`` per local step
    (dimensionless); ``floor``, ``bias``, ``coin_variance``, ``noise`` in ``E||grad f||^2``
    units and ``consensus`` in squared distance; ``None`` where the map does not contract
    (no fixed point)."""

    rate: float
    rate_per_step: float
    floor: float | None
    bias: float | None
    coin_variance: float | None
    noise: float | None
    consensus: float | None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _map(q: Quadratic, m: Method, H: int, eta: float, p: float, alpha: float, gamma, mu):
    if not m.local:  # a minibatch step: one local step, then the mean (outer SGD, gamma 1)
        H, p, eta, outer, gamma, mu = 1, 0.0, 0.0, "sgd", 1.0, 0.0
    else:
        outer = m.outer
        mu = m.outer_momentum(mu)
        if not m.pulls:
            p, eta = 0.0, 0.0
    one = np.ones(1)
    mom = round_moments(
        q.lam, q.delta, q.s2, alpha=alpha * one, eta=eta * one, p=p * one, H=np.array([H]),
        shared=m.shared,
    )  # fmt: skip
    return mom, anchor_map(mom, outer, gamma * one, (mu or 0.0) * one)[0], H


def _fixed_point(M: np.ndarray) -> np.ndarray | None:
    lin = M[:, :ONE, :ONE]
    if not np.isfinite(M).all() or np.max(np.abs(np.linalg.eigvals(lin))) >= 1.0:
        return None
    x = np.linalg.solve(np.eye(ONE) - lin, M[:, :ONE, ONE][..., None])[..., 0]
    return np.concatenate([x, np.ones((x.shape[0], 1))], axis=-1)


def diagnose(
    q: Quadratic,
    m: Method,
    *,
    H: int,
    eta: float,
    p: float,
    alpha: float,
    gamma: float | None,
    mu: float | None,
) -> Diagnosis:
    """:class:`Diagnosis` of ``m`` with these hyperparameters on ``q``."""
    gamma = 1.0 if gamma is None else gamma
    mom, M, H = _map(q, m, H, eta, p, alpha, gamma, mu)
    mean = M[:, [Z1, BUF1]][:, :, [Z1, BUF1]]
    rate = float(np.max(np.abs(np.linalg.eigvals(mean))))
    v = _fixed_point(M)
    if v is None or not np.all(np.isfinite(v)):
        return Diagnosis(rate, rate ** (1.0 / H), None, None, None, None, None)
    floor = float(np.sum(q.weight * v[:, Z2]))
    bias = float(np.sum(q.weight * v[:, Z1] ** 2))
    _, M0, _ = _map(replace(q, s2=0 * q.s2), m, H, eta, p, alpha, gamma, mu)
    v0 = _fixed_point(M0)
    no_noise = float(np.sum(q.weight * v0[:, Z2])) if v0 is not None else floor
    c2, c1, c0 = mom.consensus_rows()
    consensus = float(np.sum(c2[0] * v[:, Z2] + c1[0] * v[:, Z1] + c0[0]))
    return Diagnosis(
        rate=rate,
        rate_per_step=rate ** (1.0 / H),
        floor=floor,
        bias=bias,
        coin_variance=max(no_noise - bias, 0.0),
        noise=max(floor - no_noise, 0.0),
        consensus=consensus,
    )
