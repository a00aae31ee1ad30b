"""The random-number states a checkpoint carries: Python's, numpy's, torch's (CPU and
CUDA) and any named generators, in a form ``torch.load(weights_only=True)`` accepts."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from theory.validation import UserInputError

__all__ = ["capture_rng", "restore_rng"]


def capture_rng(
    generators: Mapping[str, np.random.Generator | torch.Generator] | None = None,
) -> dict[str, Any]:
    """States of the global RNGs (python, numpy legacy, torch CPU and CUDA) and of named
    generators.

    The trainer draws no randomness from global state itself; the global states are
    saved because library code (dropout, for instance) draws from torch's default
    generator.
    """
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy_global": _plain(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "generators": {},
    }
    for name, gen in (generators or {}).items():
        if isinstance(gen, np.random.Generator):
            state["generators"][name] = ("numpy", _plain(gen.bit_generator.state))
        elif isinstance(gen, torch.Generator):
            state["generators"][name] = ("torch", gen.get_state())
        else:
            raise TypeError(f"generator {name!r} is neither numpy nor torch: {type(gen)}")
    return state


def restore_rng(
    state: Mapping[str, Any],
    generators: Mapping[str, np.random.Generator | torch.Generator] | None = None,
) -> None:
    """Inverse of :func:`capture_rng` (the same named generators must be passed)."""
    random.setstate(_as_tuple(state["python"]))
    np.random.set_state(_unplain(state["numpy_global"]))
    torch.set_rng_state(state["torch"].cpu())
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    saved = state.get("generators", {})
    for name, gen in (generators or {}).items():
        if name not in saved:
            raise UserInputError(f"checkpoint holds no state for the random generator {name!r}")
        kind, s = saved[name]
        if kind == "numpy":
            gen.bit_generator.state = _unplain(s)
        else:
            gen.set_state(s.cpu())


def _plain(x: Any) -> Any:
    """numpy arrays inside an RNG state -> tagged lists (loadable with ``weights_only``)."""
    if isinstance(x, np.ndarray):
        return {"__ndarray__": x.tolist(), "dtype": str(x.dtype)}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _unplain(x: Any) -> Any:
    if isinstance(x, dict) and "__ndarray__" in x:
        return np.asarray(x["__ndarray__"], dtype=x["dtype"])
    if isinstance(x, dict):
        return {k: _unplain(v) for k, v in x.items()}
    return x


def _as_tuple(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_as_tuple(v) for v in x)
    return x
