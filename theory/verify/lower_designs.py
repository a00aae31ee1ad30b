"""Designs for verifying a lower bound (:mod:`theory.verify.lower`).

A design is one configuration, a dict of scalars: ``alpha, L, sigma, F0, zeta, K, H, T``
and ``p, eta, gamma, mu, outer, measured, coins``. Two families, after the instances a
lower bound is attained on (:mod:`theory.verify.lower_witness`):

* ``quadratic``: no heterogeneity, no pulls, outer averaging; ``alpha L`` from ``1e-3`` to
  1.95, ``T`` from 1 to ``2^14``, noise and initial gap each on or off, ``K`` up to 64,
  ``H`` up to 128. The plan starts with the tight designs of the descent lemma (no noise,
  ``alpha L = 1``, ``T = 1, 2, 10``) and the noise-only designs of short horizons;
* ``two_curvature``: ``sigma = F0 = 0``, ``zeta > 0``, ``K`` from 2 to 16, ``H`` up to 64,
  ``T`` from 8 to 2048, half without pulls; every outer optimiser (averaging, SGD with
  momentum, Nesterov), measured at the iterates or at the anchors, independent or shared
  coins. A share of the designs has ``H = 1`` and no pulls, or ``T = 1``, where the worst
  case over the class is known (0).

:func:`perturb` proposes designs around the worst ones (step, ``H``, ``T``, ``K``, the
sources).
"""

from __future__ import annotations

import numpy as np

from theory.verify.records import LowerDesign

__all__ = ["FAMILIES", "designs", "perturb"]

#: the instance families a lower bound may be attained on
FAMILIES = ("quadratic", "two_curvature")
_OUTERS = ("average", "sgd", "nesterov")


def _quadratic(rng: np.random.Generator, n: int) -> list[LowerDesign]:
    plan = [
        dict(al=1.0, T=10, sigma=0.0, F0=1.0, K=1, H=1, L=1.0),  # descent lemma: 2 L F0/T
        dict(al=1.0, T=1, sigma=0.0, F0=1.0, K=4, H=8, L=3.0),
        dict(al=1.0, T=2, sigma=0.0, F0=2.0, K=2, H=1, L=0.2),
        dict(al=0.5, T=10, sigma=0.0, F0=1.0, K=1, H=4, L=1.0),
        dict(al=1.0, T=1, sigma=1.0, F0=0.0, K=1, H=1, L=1.0),  # noise only, short
        dict(al=0.1, T=3, sigma=2.0, F0=0.0, K=4, H=16, L=1.0),
        dict(al=1.9, T=5, sigma=1.0, F0=0.0, K=2, H=1, L=10.0),
    ]
    out = [_quad_design(**d) for d in plan]
    for _ in range(max(0, n - len(out))):
        al = float(rng.choice([1.0, 0.5, 1.9, 10 ** rng.uniform(-3, np.log10(1.95))]))
        out.append(
            _quad_design(
                al=al,
                T=int(rng.choice([1, 2, 10, 100, round(2 ** rng.uniform(0, 14))])),
                sigma=0.0 if rng.random() < 0.4 else float(10 ** rng.uniform(-1, 1)),
                F0=0.0 if rng.random() < 0.3 else float(10 ** rng.uniform(-2, 2)),
                K=int(rng.choice([1, round(2 ** rng.uniform(0, 6))])),
                H=int(rng.choice([1, 4, round(2 ** rng.uniform(0, 7))])),
                L=float(10 ** rng.uniform(-1, 1)),
            )
        )
    return out


def _quad_design(*, al: float, T: int, sigma: float, F0: float, K: int, H: int, L: float):
    return dict(
        alpha=al / L, L=L, sigma=sigma, F0=F0, zeta=0.0, K=K, H=H, T=T,
        p=0.0, eta=0.0, gamma=1.0, mu=0.0, outer="average", measured="iterates",
        coins="independent",
    )  # fmt: skip


def _two_curvature(rng: np.random.Generator, n: int) -> list[LowerDesign]:
    out = []
    for i in range(n):
        p = 0.0 if i % 2 == 0 else float(rng.uniform(0.05, 0.8))
        L = float(np.exp(rng.uniform(-1, 1)))
        outer = str(rng.choice(_OUTERS))
        d = dict(
            L=L, sigma=0.0, F0=0.0, zeta=float(np.exp(rng.uniform(-1, 1))),
            K=int(rng.integers(2, 17)), H=int(round(2 ** rng.uniform(0, 6))),
            T=int(round(2 ** rng.uniform(3, 11))), p=p,
            eta=float(L * np.exp(rng.uniform(-2, 2))) if p else 0.0,
            gamma=float(rng.uniform(0.3, 1.5)) if outer != "average" else 1.0,
            mu=float(rng.uniform(0.0, 0.9)) if outer != "average" else 0.0,
            outer=outer, measured=str(rng.choice(["iterates", "anchors"])),
            coins=str(rng.choice(["independent", "shared"])) if p else "independent",
        )  # fmt: skip
        d["alpha"] = float(10 ** rng.uniform(-3, np.log10(1.2)) * (1 - p) / L)
        if i % 8 == 3:  # the worst case is known: H = 1 without pulls, or T = 1
            d.update(H=1, p=0.0, eta=0.0, coins="independent")
        elif i % 8 == 7:
            d["T"] = 1
        out.append(d)
    return out


def designs(family: str, rng: np.random.Generator, n: int) -> list[LowerDesign]:
    """``n`` designs of ``family`` (:data:`FAMILIES`), the plan's fixed designs first."""
    return _quadratic(rng, n) if family == "quadratic" else _two_curvature(rng, n)


def perturb(d: LowerDesign, rng: np.random.Generator, k: int) -> list[LowerDesign]:
    """``k`` designs near ``d``: the step, ``H``, ``T``, ``K`` and the sources moved."""
    out = []
    for _ in range(k):
        e = dict(d)
        grow = float(np.exp(rng.normal(0, 0.4)))
        e["alpha"] = min(e["alpha"] * grow, 1.95 * (1 - e["p"]) / e["L"])
        e["T"] = max(1, int(round(e["T"] * 2.0 ** rng.choice([-1, 0, 1]))))
        e["H"] = max(1, int(round(e["H"] * 2.0 ** rng.choice([-1, 0, 1]))))
        if e["zeta"] > 0:
            e["K"] = int(np.clip(e["K"] + rng.choice([-1, 0, 1]), 2, 16))
            e["T"] = min(e["T"], 2048)
        else:
            e["K"] = max(1, int(round(e["K"] * 2.0 ** rng.choice([-1, 0, 1]))))
            for key in ("sigma", "F0"):
                if e[key] > 0:
                    e[key] *= float(np.exp(rng.normal(0, 0.5)))
        out.append(e)
    return out
