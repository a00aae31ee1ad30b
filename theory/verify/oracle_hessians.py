"""The exact oracles with per-worker Hessians: ``"hetero"``, the two-curvature instances of
:mod:`theory.lower.hetero` (heterogeneity alone, the exact value the known lower bound
attains there), and ``"joint"``, the joint instances of :mod:`theory.verify.joint` (initial
gap, heterogeneity and noise together, each worker its own Hessian)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from theory.lower import get_lower
from theory.verify.combined import _instance_args
from theory.verify.hetero import _KEYS, LOWER
from theory.verify.joint import joint_instance
from theory.verify.oracle import family_of
from theory.verify.pipeline import Design, Measurement, register_oracle

__all__ = ["HeteroOracle", "JointOracle"]


def _measurement(name: str, design: Design, out: np.ndarray, **companions) -> Measurement:
    return Measurement(name, design, out, ~np.isfinite(out) & ~np.isnan(out), True, companions)


@register_oracle
class HeteroOracle:
    """The exact value on the two-curvature instances at each active design
    (``design.params``: ``alpha``, ``L``, ``zeta``, ``K``, ``H``, ``T``, ``p``, ``eta``,
    ``gamma``, ``mu`` and optionally ``b``, the second curvature as a fraction of ``L``);
    the larger over the outer optimisers ``design.bound`` claims; ``nan`` elsewhere."""

    name = "hetero"

    def measure(self, design: Design) -> Measurement:
        bound, d, mask = design.bound, design.params, design.mask()
        lb = get_lower(LOWER)
        fam = family_of(bound)
        measured = getattr(bound, "measured", "iterates")
        out = np.full(mask.shape, np.nan)
        for i in np.flatnonzero(mask):
            args = {k: float(d[k][i]) for k in _KEYS}
            b = float(d["b"][i]) if "b" in d else math.nan
            one = replace(lb, b_grid=(b,)) if math.isfinite(b) else lb  # no b: the grid
            out[i] = max(
                one.evaluate(
                    alpha=float(d["alpha"][i]), **args, outer=o, measured=measured,
                    coins=fam.coins,
                )
                for o in bound.outers
            )  # fmt: skip
        return _measurement(self.name, design, out)


@register_oracle
class JointOracle:
    """The exact value on the joint instance of each active design (``design.params``: the
    columns of :mod:`theory.verify.combined`, ``start = x0/c`` and ``noise = s/c``);
    ``nan`` elsewhere, 0 where the run leaves every region. ``companions``: the instances'
    own ``F0`` and ``sigma`` (``nan`` where not measured)."""

    name = "joint"

    def measure(self, design: Design) -> Measurement:
        bound, d, mask = design.bound, design.params, design.mask()
        out = np.full(mask.shape, np.nan)
        F0, sigma = np.full(mask.shape, np.nan), np.full(mask.shape, np.nan)
        fam = family_of(bound)
        for i in np.flatnonzero(mask):
            ins = joint_instance(
                zeta=float(d["zeta"][i]),
                start=float(d["start"][i]),
                noise=float(d["noise"][i]),
                **_instance_args(bound, d, i, fam),
            )
            out[i], F0[i], sigma[i] = ins.value, ins.F0, ins.sigma
        return _measurement(self.name, design, out, F0=F0, sigma=sigma)
