"""The parameter table of the project's notation and its validation.

The API, the CLI and the distributed trainer all call :func:`validate` (or
:func:`canonical_name`), so a bad value gets the same message everywhere: the
parameter's name (and its authors'-code alias), the value, and the allowed range.

The project uses the authors' notation (see README): ``alpha`` inner learning rate
(code ``lr``), ``eta`` pull/mixing rate, ``p`` pull probability (``prob_no_grad``),
``H`` local steps between syncs (``sync_interval``), ``gamma`` outer learning rate
(``outer_lr``), ``mu`` outer momentum, ``T0`` warm-up steps (``local_sgd_start_iter``).

This file holds the parameter table (:data:`PARAMS`, :data:`ALIASES`) and the checks against
it (:func:`validate`, :func:`validate_one`, :func:`canonicalize`); the generic value checks
(:func:`core.validation.check_number`, :func:`~core.validation.check_int`,
:func:`~core.validation.check_choice`, :class:`~core.validation.ParameterError`, ...), the
file readers and output-path checks (:mod:`core.files`) and the error class
(:mod:`core.errors`) are the base layer's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from core.errors import UserInputError
from core.validation import ParamSpec, check_spec, register_aliases

__all__ = [
    "PARAMS",
    "ALIASES",
    "canonical_name",
    "canonicalize",
    "validate",
    "validate_one",
]


_INF = math.inf
PARAMS: dict[str, ParamSpec] = {
    s.name: s
    for s in [
        ParamSpec(
            "L", "smoothness constant of every f_k", 0, _INF, low_open=True, unit="1/length^2"
        ),
        ParamSpec("sigma", "std of the stochastic-gradient noise per worker", 0, _INF),
        ParamSpec("zeta", "heterogeneity: sqrt of mean ||grad f_k - grad f||^2", 0, _INF),
        ParamSpec("F0", "initial gap f(x0) - f_star", 0, _INF),
        ParamSpec("beta", "relative-variance coefficient (Cooperative SGD A4)", 0, _INF),
        ParamSpec("K", "number of workers", 1, _INF, integer=True),
        ParamSpec("H", "local steps between syncs (pull steps count)", 1, _INF, integer=True),
        ParamSpec("T", "total local steps", 1, _INF, integer=True),
        ParamSpec("T0", "DDP warm-up steps", 0, _INF, integer=True),
        ParamSpec("p", "probability of a pull step", 0, 1, high_open=True),
        ParamSpec("alpha", "inner learning rate", 0, _INF, low_open=True),
        ParamSpec("eta", "pull (mixing) rate", 0, _INF),
        ParamSpec("gamma", "outer learning rate", 0, _INF, low_open=True),
        ParamSpec("mu", "outer momentum", 0, 1, high_open=True),
        ParamSpec("eps", "target accuracy for (1/T) sum E||grad f||^2", 0, _INF, low_open=True),
        ParamSpec("A", "gradient-accumulation micro-batches per step", 1, _INF, integer=True),
        ParamSpec(
            "R",
            "a count: rounds (T = R*H) in bounds, Monte-Carlo replicas in verify",
            1,
            _INF,
            integer=True,
        ),
        ParamSpec("d", "problem dimension", 1, _INF, integer=True),
    ]
}

#: authors'-code flag names (and a few common synonyms) -> project names
ALIASES: dict[str, str] = {
    "lr": "alpha",
    "prob_no_grad": "p",
    "sync_interval": "H",
    "outer_lr": "gamma",
    "outer_momentum": "mu",
    "local_sgd_start_iter": "T0",
    "world_size": "K",
    "num_gpus": "K",
    "grad_accu_step": "A",
    "steps": "T",
}
_ALIAS_OF = {
    "alpha": "lr",
    "p": "prob_no_grad",
    "H": "sync_interval",
    "gamma": "outer_lr",
    "T0": "local_sgd_start_iter",
    "A": "grad_accu_step",
}


register_aliases(_ALIAS_OF)


def canonical_name(name: str) -> str:
    """Map an authors'-code alias (``lr``, ``prob_no_grad``, ...) to the project name."""
    if name in PARAMS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    raise UserInputError(
        f"unknown parameter '{name}': known parameters are {sorted(PARAMS)}; "
        f"aliases {sorted(ALIASES)}"
    )


def canonicalize(values: Mapping[str, Any], *, allow_unknown: bool = False) -> dict[str, Any]:
    """Rename aliases to project names; reject a parameter given twice under two names."""
    out: dict[str, Any] = {}
    for key, val in values.items():
        if allow_unknown and key not in PARAMS and key not in ALIASES:
            out[key] = val
            continue
        name = canonical_name(key)
        if name in out:
            raise UserInputError(f"parameter '{name}' given twice (as '{key}' and another alias)")
        out[name] = val
    return out


def validate_one(name: str, value: Any) -> Any:
    """Check one value (scalar or array) against its :class:`~core.validation.ParamSpec`;
    return it as given.

    Arrays are checked element-wise (all elements must be valid). NaN and inf are rejected,
    except ``+inf`` where the range allows it (never, for the parameters above).
    """
    return check_spec(PARAMS[canonical_name(name)], value)


def validate(values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, Any]:
    """Canonicalise aliases and validate every known parameter.

    Returns a new dict keyed by project names. Unknown names raise :class:`UserInputError`.
    Cross-parameter rules (e.g. ``p = 0`` with ``eta > 0`` is Local SGD, fine) are not
    checked here; stability conditions such as ``alpha*eta/p < 2`` are the algorithm spec's
    (:func:`theory.algorithm.pull_stability`), reported by the checker with margins and
    refused by ``palsgd train``, because they are properties of a configuration.
    """
    merged = dict(values or {})
    merged.update(kwargs)
    out = canonicalize(merged)
    for name, val in out.items():
        validate_one(name, val)
    return out
