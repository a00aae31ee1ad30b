"""The random-number states a checkpoint carries: Python's, numpy's, torch's (CPU and
CUDA) and any named generators, in a form ``torch.load(weights_only=True)`` accepts."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from core.errors import UserInputError

__all__ = ["capture_rng", "restore_rng"]


def capture_rng(
    generators: Mapping[str, np.random.Generator | torch.Generator] | None = None,
) -> dict[str, Any]:
    """States of the global RNGs (python, numpy legacy, torch CPU and every visible GPU's,
    with the index of this process's current GPU) and of named generators.

    The trainer draws no randomness from global state itself; the global states are
    saved because library code (dropout, for instance) draws from torch's default
    generator.
    """
    cuda = torch.cuda.is_available()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy_global": _plain(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if cuda else [],
        "cuda_device": torch.cuda.current_device() if cuda else None,
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
    _restore_cuda(state.get("cuda") or [], state.get("cuda_device"))
    saved = state.get("generators", {})
    for name, gen in (generators or {}).items():
        if name not in saved:
            raise UserInputError(f"checkpoint holds no state for the random generator {name!r}")
        kind, s = saved[name]
        if kind == "numpy":
            gen.bit_generator.state = _unplain(s)
        else:
            gen.set_state(s.cpu())


def _restore_cuda(saved: list[Any], device: int | None) -> None:
    """The GPUs' generator states, on as many GPUs as this process sees.

    The same number of visible GPUs as at capture: every state goes back to its GPU. A
    different number (a resume with fewer GPUs visible per process, e.g. one each): the
    current GPU, the one this process uses, gets the state of the GPU it used at capture
    (``device``); a checkpoint without that index restores the GPUs both runs see.
    """
    if not saved or not torch.cuda.is_available():
        return
    count = torch.cuda.device_count()
    if len(saved) == count:
        pairs = list(enumerate(saved))
    elif device is not None and 0 <= device < len(saved):
        pairs = [(torch.cuda.current_device(), saved[device])]
    else:
        pairs = list(enumerate(saved[:count]))
    for index, s in pairs:
        torch.cuda.set_rng_state(s.cpu(), index)


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
