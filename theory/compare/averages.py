"""Exact time averages of one configuration over ``R`` rounds: what the bounds measure.

A bound's left-hand side is ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` over every step
(``measured = "iterates"``) or ``(1/R) sum_{r<R} E||grad f(z_r)||^2`` over the anchors
(``"anchors"``), with ``T = R H``. Within a round ``xbar_j = Abar_j z + Bbar_j + Nbar_j``, so the
round's sum over ``j < H`` is linear in the anchor moments ``v`` with the summed moments of
:func:`theory.compare.pairs.round_moments` (``sums=True``); the sum over rounds is one
accumulator on the anchor's round map, evaluated by a matrix power.

:func:`exact_parts` splits the value into the part from the start (``F0``: no heterogeneity,
no noise), from the noise (start at ``x*``, identical minimisers), from the heterogeneity
(start at ``x*``, no noise) and the cross term of start and heterogeneity (the rest): a
bound's terms are compared with these parts.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from theory.compare.exact import Quadratic
from theory.compare.methods import Method
from theory.compare.pairs import round_moments
from theory.compare.scan import anchor_map, start_vector
from theory.moments.batch import power_apply
from theory.moments.rounds import NV, ONE, Z1, Z2, with_accumulators

__all__ = ["exact_averages", "exact_parts"]


def exact_averages(
    q: Quadratic,
    m: Method,
    *,
    H: np.ndarray | int,
    eta: np.ndarray | float,
    p: np.ndarray | float,
    alpha: np.ndarray | float,
    gamma: np.ndarray | float | None,
    mu: np.ndarray | float | None,
    R: np.ndarray | int,
) -> dict[str, np.ndarray]:
    """``{"iterates": ..., "anchors": ...}``: the two time averages over ``R`` rounds, for
    one configuration (numbers) or ``N`` at once (arrays of shape ``(N,)``, broadcast).

    ``mu`` is the outer momentum of a Nesterov method, or of an outer-SGD method whose spec
    declares momentum (``m.spec.mu > 0``: heavy ball, ``buf <- mu buf + Delta``,
    ``z <- z - gamma buf``); the map's other methods take none."""
    H, eta, p, alpha, R = np.broadcast_arrays(*(np.atleast_1d(x) for x in (H, eta, p, alpha, R)))
    n = alpha.size
    gamma = np.ones(n) if gamma is None else np.broadcast_to(np.asarray(gamma, float), (n,))
    mu = np.zeros(n) if mu is None else np.broadcast_to(np.asarray(mu, float), (n,))
    H, R = H.astype(np.int64), R.astype(np.int64)
    eta, p, alpha = (x.astype(float) for x in (eta, p, alpha))
    if not m.local:  # a minibatch step: one local step, then the mean (outer SGD, gamma 1)
        H, p, eta, gamma, mu, outer = (
            np.ones(n, np.int64),
            0 * p,
            0 * eta,
            np.ones(n),
            0 * mu,
            "sgd",
        )
    else:
        outer = m.outer
        # momentum: Nesterov, or outer SGD whose spec declares it (heavy ball)
        mu = mu if (m.nesterov or m.spec.mu) else 0 * mu
        if not m.pulls:
            p, eta = 0 * p, 0 * eta
    end, acc = round_moments(
        q.lam, q.delta, q.s2, alpha=alpha, eta=eta, p=p, H=H, shared=m.shared, sums=True
    )
    M = anchor_map(end, outer, gamma, mu)  # (n, d, 6, 6)
    w = q.weight[None, :]
    anchor_row = np.zeros((n, q.lam.shape[0], NV))
    anchor_row[..., Z2] = w
    iter_row = np.zeros_like(anchor_row)
    iter_row[..., Z2] = w * acc.aa
    iter_row[..., Z1] = w * 2.0 * acc.ab
    iter_row[..., ONE] = w * (acc.bb + acc.nn)
    P = with_accumulators(M, [anchor_row, iter_row])
    v = np.concatenate([start_vector(q.y0, n), np.zeros((n, q.lam.shape[0], 2))], axis=-1)
    with np.errstate(all="ignore"):
        v = power_apply(P, R, v)
        anchors = np.sum(v[..., NV], axis=1) / R
        iterates = np.sum(v[..., NV + 1], axis=1) / (R * H)
    return {"iterates": iterates, "anchors": anchors}


def exact_parts(q: Quadratic, m: Method, **config) -> dict[str, dict[str, np.ndarray]]:
    """:func:`exact_averages` of the whole problem and of its parts (see the module
    docstring): ``{"total", "F0", "noise", "heterogeneity", "cross"}``, each a dict with
    ``iterates`` and ``anchors``."""
    zero_d, zero_s, zero_y = 0 * q.delta, 0 * q.s2, 0 * q.y0
    total = exact_averages(q, m, **config)
    parts = {
        "F0": exact_averages(replace(q, delta=zero_d, s2=zero_s), m, **config),
        "noise": exact_averages(replace(q, delta=zero_d, y0=zero_y), m, **config),
        "heterogeneity": exact_averages(replace(q, s2=zero_s, y0=zero_y), m, **config),
    }
    cross = {k: total[k] - sum(p[k] for p in parts.values()) for k in total}
    return {"total": total, **parts, "cross": cross}
