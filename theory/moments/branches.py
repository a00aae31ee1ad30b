"""One local step along an eigendirection (its two branches) and the closed forms of a round.

Pure arithmetic: the arguments may be numbers, numpy arrays or sympy symbols.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from theory.algorithm import pull_coefficient
from theory.validation import validate_one


@dataclass(frozen=True)
class Branch:
    """One branch of a local step on one eigendirection (scalars or sympy expressions).

    With probability ``prob`` a worker's shifted coordinate ``y = x - bbar`` becomes
    ``scale*y + pull*(z - bbar) + drift*delta_k + noise term``, where
    ``delta_k = b_k - bbar`` and the noise term has mean zero and variance ``noise``.
    """

    prob: Any
    scale: Any
    pull: Any
    drift: Any
    noise: Any


def local_step_branches(lam: Any, alpha: Any, eta: Any, p: Any, s2: Any) -> tuple[Branch, ...]:
    """The two branches of a PALSGD local step along an eigendirection with eigenvalue ``lam``.

    Gradient branch (probability ``1-p``): ``y <- y - (alpha/(1-p)) (lam (y - delta_k) + xi)``
    with ``Var xi = s2``. Pull branch (probability ``p``): ``y <- y - (alpha eta/p)(y - z)``.
    Pure arithmetic, so the arguments may be numbers, numpy arrays or sympy symbols. A
    numeric ``p == 0`` (Local SGD, DiLoCo) returns the gradient branch only; an array ``p``
    (one value per design) keeps both, the pull branch with probability 0 where ``p = 0``.
    """
    cg = alpha / (1 - p)
    grad = Branch(prob=1 - p, scale=1 - cg * lam, pull=0 * lam, drift=cg * lam, noise=cg**2 * s2)
    if isinstance(p, int | float) and p == 0:
        return (grad,)
    cp = pull_coefficient(alpha, eta, p)
    pull = Branch(prob=p, scale=1 - cp + 0 * lam, pull=cp + 0 * lam, drift=0 * lam, noise=0 * s2)
    return (grad, pull)


def within_round_moments(lam: Any, alpha: Any, eta: Any, p: Any, s2: Any, H: int):
    """Coefficients ``(A_H, B_H, C_H)`` of one worker's deviation ``e = x - z`` after ``H``
    local steps from ``x = z`` on a homogeneous quadratic (``delta_k = 0``, ``x* = 0``):
    ``E[e | z] = A_H z`` and ``E[e^2 | z] = B_H z^2 + C_H`` (the recursion of the theory
    notes, section 4.1), computed from :func:`local_step_branches`. Works with sympy."""
    validate_one("H", H)
    A, B, C = 0 * lam, 0 * lam, 0 * lam
    for _ in range(int(H)):
        nA, nB, nC = 0 * lam, 0 * lam, 0 * lam
        for br in local_step_branches(lam, alpha, eta, p, s2):
            # x = z + e; x' - z = scale*e + (scale + pull - 1) z + noise
            u = br.scale + br.pull - 1
            nA = nA + br.prob * (br.scale * A + u)
            nB = nB + br.prob * (br.scale**2 * B + 2 * br.scale * u * A + u**2)
            nC = nC + br.prob * (br.scale**2 * C + br.noise)
        A, B, C = nA, nB, nC
    return A, B, C


def within_round_closed_form(lam: Any, alpha: Any, eta: Any, p: Any, s2: Any, H: Any):
    """Closed forms ``(A_H, C_H, rho2)`` (identities I4, I5 of the theory notes):
    ``A_H = -(lam/(lam+eta)) (1 - c^H)`` with ``c = 1 - alpha (lam+eta)``;
    ``rho2 = c^2 + p(1-p) alpha^2 (eta/p - lam/(1-p))^2`` (per-step mean-square contraction);
    ``C_H = alpha^2 s2/(1-p) (1 - rho2^H)/(1 - rho2)`` (noise accumulated in a round).
    A numeric ``p == 0`` never pulls (Local SGD): ``eta`` is then taken as 0."""
    if isinstance(p, int | float) and p == 0:
        c = 1 - alpha * lam
        A = -(1 - c**H) + 0 * lam
        rho2 = c**2
        C = alpha**2 * s2 * (1 - rho2**H) / (1 - rho2)
        return A, C, rho2
    c = 1 - alpha * (lam + eta)
    A = -(lam / (lam + eta)) * (1 - c**H)
    rho2 = c**2 + p * (1 - p) * alpha**2 * (eta / p - lam / (1 - p)) ** 2
    C = alpha**2 * s2 / (1 - p) * (1 - rho2**H) / (1 - rho2)
    return A, C, rho2


def local_sgd_round_mean_factor(lam: Any, alpha: Any, gamma: Any, H: Any) -> Any:
    """Mean contraction of one Local SGD round with outer SGD(``gamma``) along eigenvalue
    ``lam``: ``(1 - gamma) + gamma (1 - alpha lam)^H`` (Khaled et al. 2025)."""
    return (1 - gamma) + gamma * (1 - alpha * lam) ** H
