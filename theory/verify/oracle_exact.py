"""The exact quadratic oracle (``"exact"``): a batch of eigen-designs on quadratics with one
Hessian measured exactly by the moment recursion (:func:`theory.moments.oracle_batch`;
the designs, their fields and why single-source designs lose nothing:
:mod:`theory.verify.oracle`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from theory.algorithm import AlgorithmSpec
from theory.moments import BatchResult, oracle_batch, oracle_batch_easgd
from theory.verify.family import family_of
from theory.verify.pipeline import Design, Measurement, register_oracle

if TYPE_CHECKING:
    from theory.verify.family import Family

__all__ = ["ExactQuadraticOracle", "measure_batch"]


@register_oracle
class ExactQuadraticOracle:
    """Exact expectation on the single-Hessian quadratics of :mod:`theory.verify.oracle`
    (``design.params``: its :data:`~theory.verify.oracle.FIELDS`; ``design.family``: the
    statement's :class:`~theory.verify.oracle.Family`, else that of ``design.bound``)."""

    name = "exact"

    def measure(self, design: Design) -> Measurement:
        fam = design.family
        if fam is None:
            fam = family_of(design.bound)
        res = measure_batch(fam, design.params)
        return Measurement(
            self.name,
            design,
            measured=np.where(res.diverged, np.inf, res.mean_grad_norm_sq),
            diverged=np.asarray(res.diverged, dtype=bool),
            companions={"initial": res.initial_grad_norm_sq},
        )


def measure_batch(fam: Family, d: Mapping[str, np.ndarray]) -> BatchResult:
    """Exact measured values of a batch (:func:`theory.moments.batch.oracle_batch`)."""
    if fam.all_reduce:
        return _measure_all_reduce(fam, d)
    L = d["L"]
    lam = np.stack([L, d["lam_F"], d["lam_s"], d["lam_z"]], axis=1)
    z = np.zeros_like(L)
    with np.errstate(divide="ignore", invalid="ignore"):
        y0 = np.where(d["F0"] > 0, np.sqrt(2 * d["F0"] / d["lam_F"]), 0.0)
        Q = np.where(d["zeta2"] > 0, d["zeta2"] / d["lam_z"] ** 2, 0.0)
    if fam.spec.definition.elastic:  # i.i.d. data only (its bound assumes A3iid)
        return oracle_batch_easgd(
            lam,
            np.stack([z, y0, z, z], axis=1),
            np.stack([z, z, d["sigma2"], z], axis=1),
            K=d["K"],
            alpha=d["alpha"],
            T=d["T"].astype(np.int64),
            H=d["H"].astype(np.int64),
        )
    args = (
        lam,
        np.stack([z, y0, z, z], axis=1),
        np.stack([z, z, d["sigma2"], z], axis=1),
        np.stack([z, z, z, Q], axis=1),
    )
    kw = dict(
        K=d["K"],
        alpha=d["alpha"],
        T=d["T"].astype(np.int64),
        H=d["H"].astype(np.int64),
        p=d["p"],
        eta=d["eta"],
        gamma=d["gamma"],
        mu=d.get("mu", z),
        minibatch=fam.minibatch,
        shared=fam.spec.shared_coins,
        at_anchors=fam.anchors,
    )
    if not fam.uses_mu:
        return oracle_batch(*args, **kw)
    if fam.outer == "heavy_ball":
        return oracle_batch(*args, **kw, heavy_ball=True)
    hb = d.get("heavy_ball", z) > 0.5  # outer momentum: heavy ball or PyTorch Nesterov
    nes = oracle_batch(*args, **kw, nesterov=True)
    heavy = oracle_batch(*args, **kw, heavy_ball=True)
    return BatchResult(
        *(
            np.where(hb, getattr(heavy, f), getattr(nes, f))
            for f in BatchResult.__dataclass_fields__
        )
    )


def _measure_all_reduce(fam: Family, d: Mapping[str, np.ndarray]) -> BatchResult:
    """An all-reduce algorithm (:data:`ALL_REDUCE_ALGORITHMS`) measured as Local SGD with
    one worker, noise variance ``sigma^2/K``, no heterogeneity and outer heavy ball: the
    ``K`` workers' averaged gradient at the common point is ``grad f`` plus the mean of
    ``K`` independent noises."""
    one = np.ones_like(np.asarray(d["L"], dtype=float))
    local = {**d, "K": one, "sigma2": d["sigma2"] / d["K"], "zeta2": 0 * one, "p": 0 * one}
    base = replace(fam, spec=AlgorithmSpec.of("local_sgd"), outer="heavy_ball", iid=True)
    return measure_batch(base, {**local, "eta": 0 * one, "heavy_ball": one})
