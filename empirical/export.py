"""Run names and the export of the anchor (the global model) at the end of training."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import torch

from empirical.config import TrainConfig
from theory.algorithm import lookup

__all__ = ["run_name", "export_anchor"]


def run_name(cfg: TrainConfig, world_size: int) -> str:
    """Default run name: algorithm, workers and the hyperparameters that tell runs apart,
    e.g. ``palsgd-K4-H32-p0.2-eta1-a0.01-s0`` (W&B/TensorBoard naming, ``summary.json``)."""
    row = lookup(cfg.algorithm)
    parts = [cfg.algorithm, f"K{world_size}"]
    if row.local:
        parts.append(f"H{cfg.H}")
    if row.pulls:
        parts += [f"p{cfg.p:g}", f"eta{cfg.eta:g}"]
    if cfg.outer not in (None, "average") and row.local:
        parts.append(f"g{cfg.gamma:g}m{cfg.mu:g}")
    parts += [f"a{cfg.alpha:g}", f"s{cfg.seed}"]
    return "-".join(parts)


def export_anchor(
    model: Any, state: dict[str, Any], directory: str | os.PathLike, name: str
) -> Path:
    """Save the model with parameters ``state`` (the anchor) to ``directory``.

    A Hugging Face model (GPT-Neo) is written with ``save_pretrained`` (``config.json`` and
    ``model.safetensors``; ``GPTNeoForCausalLM.from_pretrained(directory)`` reads it). Other
    models (the ResNets) are written as ``anchor.pt`` (``torch.save`` of the state dict) and
    ``export.json`` naming the model, for ``empirical.models.build_model(name)`` +
    ``load_state_dict``. The exported copy is built fresh in host memory: the structure of
    ``model`` is copied with new, empty host tensors in place of its parameters and buffers
    (whose data is never read, so no copy of the model is made on its device), then
    ``state`` is loaded into it.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    fresh = _host_skeleton(model)
    fresh.load_state_dict({k: v.detach().cpu() for k, v in state.items()})
    if hasattr(fresh, "save_pretrained"):
        fresh.save_pretrained(str(out))
    else:
        torch.save(fresh.state_dict(), out / "anchor.pt")
        (out / "export.json").write_text(json.dumps({"model": name}, indent=2) + "\n")
    return out


def _host_skeleton(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``model`` whose parameters and buffers are new uninitialised host
    tensors of the same shapes and dtypes (tied parameters stay tied)."""
    memo: dict[int, Any] = {}
    for p in model.parameters():
        empty = torch.empty(p.shape, dtype=p.dtype, device="cpu")
        memo[id(p)] = torch.nn.Parameter(empty, requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = torch.empty(b.shape, dtype=b.dtype, device="cpu")
    return copy.deepcopy(model, memo)
