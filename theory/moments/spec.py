"""An algorithm spec normalised for the exact recursions (:func:`as_algo`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from theory.algorithm import LOCAL_NAMES, check_sync_delay
from theory.validation import UserInputError, check_int, validate

_OUTER_AVG = ("avg", "average", "averaging", "mean")
_OUTER_SGD = ("sgd",)
_OUTER_NESTEROV = ("nesterov",)
_KIND_MINIBATCH = ("minibatch", "minibatch_sgd", "sgd", "ddp", "mbsgd")
_KIND_LOCAL = LOCAL_NAMES


@dataclass(frozen=True)
class MomentAlgo:
    alpha: float
    H: int
    p: float
    eta: float
    outer: str  # "sgd" (momentum mu) or "nesterov"
    gamma: float
    mu: float
    T0: float  # math.inf for minibatch SGD
    shared: bool
    sync_offset: int
    outer_steps: int = 1  # outer steps per sync (extra ones on a zero outer gradient)
    sync_delay: int = 0  # overlapped sync: the outer step lands this many steps later


def _spec_get(spec: Any, name: str, default: Any = None) -> Any:
    if isinstance(spec, Mapping):
        return spec.get(name, default)
    return getattr(spec, name, default)


def as_algo(spec: Any) -> MomentAlgo:
    """Normalise an algorithm spec (``theory.simulate.AlgorithmSpec``, a dict, or any object
    with the fields ``kind, alpha, H, p, eta, outer, gamma, mu, T0, coins, sync_offset``,
    and optionally ``outer_steps_per_sync``, ``sync_delay``)."""
    kind = str(_spec_get(spec, "kind", "palsgd") or "palsgd").lower().replace("-", "_")
    alpha = _spec_get(spec, "alpha")
    if alpha is None:
        alpha = _spec_get(spec, "lr")
    if alpha is None:
        raise UserInputError("algorithm spec lacks the inner learning rate 'alpha'")
    H = _spec_get(spec, "H", 1)
    p = _spec_get(spec, "p", 0.0) or 0.0
    eta = _spec_get(spec, "eta", 0.0) or 0.0
    T0 = _spec_get(spec, "T0", 0) or 0
    sync_offset = _spec_get(spec, "sync_offset", 0) or 0
    outer_steps = _spec_get(spec, "outer_steps_per_sync", 1) or 1
    sync_offset = check_int("sync_offset", sync_offset, 0, integral_floats=True)
    outer_steps = check_int("outer_steps_per_sync", outer_steps, 1, integral_floats=True)
    outer = str(_spec_get(spec, "outer", "avg") or "avg").lower()
    gamma = _spec_get(spec, "gamma", 1.0)
    mu = _spec_get(spec, "mu", 0.0) or 0.0
    coins = str(_spec_get(spec, "coins", "independent") or "independent").lower()
    fraction = _spec_get(spec, "pull_fraction", None)
    if fraction is not None and float(fraction) != 1.0:
        raise UserInputError(
            "pull_fraction != 1 is not supported by exact moments (a partial pull is not "
            "a per-eigendirection affine map)"
        )
    if coins not in ("independent", "shared"):
        raise UserInputError(f"coins must be 'independent' or 'shared', got {coins!r}")
    validate(alpha=alpha, H=H, p=p, eta=eta, T0=T0, mu=mu)
    if kind not in _KIND_MINIBATCH + _KIND_LOCAL:
        raise UserInputError(
            f"algorithm kind {kind!r} has no exact moment recursion here; known kinds: "
            f"{sorted(_KIND_MINIBATCH + _KIND_LOCAL)} (simulate EASGD with theory.simulate)"
        )
    sync_delay = _spec_get(spec, "sync_delay", 0) or 0
    if sync_delay:
        sync_delay = check_sync_delay(kind, sync_delay, H)
    if kind in _KIND_MINIBATCH:
        return MomentAlgo(float(alpha), 1, 0.0, 0.0, "sgd", 1.0, 0.0, math.inf, False, 0)
    if outer in _OUTER_AVG:
        outer, gamma, mu = "sgd", 1.0, 0.0
    elif outer in _OUTER_SGD:
        outer = "sgd"
    elif outer not in _OUTER_NESTEROV:
        raise UserInputError(
            f"outer optimizer {outer!r} has no exact moment recursion: use 'avg', 'sgd' or "
            "'nesterov' (Adam is nonlinear; simulate it)"
        )
    validate(gamma=gamma)
    return MomentAlgo(
        float(alpha),
        int(H),
        float(p),
        float(eta),
        outer,
        float(gamma),
        float(mu),
        float(T0),
        coins == "shared",
        int(sync_offset),
        int(outer_steps),
        int(sync_delay),
    )
