"""The algorithm spec the exact recursions take (:func:`moment_spec`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from core.errors import UserInputError
from theory.algorithm import ALGORITHMS, AlgorithmSpec

__all__ = ["moment_spec", "local_start", "MOMENT_KINDS"]

#: the kinds whose exact oracle is the moment recursion of this package
MOMENT_KINDS = tuple(a.name for a in ALGORITHMS.values() if a.exact == "moments")


def moment_spec(spec: AlgorithmSpec | Mapping[str, Any]) -> AlgorithmSpec:
    """``spec`` checked for the exact moment recursions.

    An :class:`~theory.algorithm.AlgorithmSpec`, or a mapping with its ``kind`` and fields
    (read by :meth:`AlgorithmSpec.of`, so the authors' aliases such as ``lr`` work), of a
    kind whose exact oracle is the moment recursion (:data:`MOMENT_KINDS`), with a learning
    rate and pulls on every coordinate."""
    if isinstance(spec, Mapping):
        values = {k: v for k, v in spec.items() if v is not None}  # None: not given
        if "kind" not in values:
            raise UserInputError(
                f"an algorithm given as a mapping needs its 'kind' (one of {list(MOMENT_KINDS)})"
            )
        spec = AlgorithmSpec.of(values.pop("kind"), **values)
    elif not isinstance(spec, AlgorithmSpec):
        raise UserInputError(
            f"spec must be a theory.algorithm.AlgorithmSpec or a mapping, got {type(spec).__name__}"
        )
    if spec.definition.exact != "moments":
        raise UserInputError(
            f"algorithm kind {spec.kind!r} has no exact moment recursion here; known kinds: "
            f"{list(MOMENT_KINDS)} (simulate EASGD with theory.simulate)"
        )
    if spec.alpha is None:
        raise UserInputError("algorithm spec lacks the inner learning rate 'alpha'")
    if spec.pull_fraction != 1.0:
        raise UserInputError(
            "pull_fraction != 1 is not supported by exact moments (a partial pull is not "
            "a per-eigendirection affine map)"
        )
    return spec


def local_start(spec: AlgorithmSpec) -> float:
    """The first local step: ``T0``, or ``inf`` for a kind without local steps (minibatch
    SGD: every step averages the workers' gradients)."""
    return float(spec.T0) if spec.local else math.inf
