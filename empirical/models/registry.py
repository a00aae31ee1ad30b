"""The model registry: the names of :data:`MODEL_NAMES`, their architecture specs, and the
deterministic builders :func:`build_model` and :func:`count_parameters`."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from core.errors import UserInputError
from core.validation import ParameterError, check_int
from empirical.models.gptneo import build_gptneo
from empirical.models.names import _GPTNEO, _RESNET, MODEL_NAMES
from empirical.models.resnet import RESNET_OPTIONS, ResNet

__all__ = ["MODEL_NAMES", "model_task", "model_spec", "build_model", "count_parameters"]


def _check_name(name: str) -> str:
    if name not in MODEL_NAMES:
        raise UserInputError(f"unknown model '{name}': known models are {', '.join(MODEL_NAMES)}")
    return name


def model_task(name: str) -> str:
    """``"lm"`` for the GPT-Neo models, ``"image"`` for the ResNets."""
    return "lm" if _check_name(name) in _GPTNEO else "image"


def model_spec(name: str) -> dict[str, Any]:
    """A copy of the registry entry (architecture hyperparameters) of a model name."""
    _check_name(name)
    return dict(_GPTNEO.get(name) or _RESNET[name])


def _spec(
    name: str, vocab_size: int | None, num_classes: int | None, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """The registry spec of ``name`` with ``overrides`` and the output size the caller
    gives: ``vocab_size`` for a language model, ``num_classes`` for an image model."""
    lm = name in _GPTNEO
    size_key, other_key = ("vocab_size", "num_classes") if lm else ("num_classes", "vocab_size")
    size, other = (vocab_size, num_classes) if lm else (num_classes, vocab_size)
    if other is not None:
        kind = "language" if lm else "image"
        raise UserInputError(f"{other_key} does not apply to the {kind} model '{name}'")
    spec = dict(_GPTNEO[name] if lm else _RESNET[name])
    spec.update(overrides)
    if size is not None:
        spec[size_key] = check_int(size_key, size, 1, integral_floats=True)
    return spec


def _construct(
    name: str, vocab_size: int | None, num_classes: int | None, overrides: Mapping[str, Any]
) -> nn.Module:
    spec = _spec(name, vocab_size, num_classes, overrides)
    if name in _GPTNEO:
        return build_gptneo(spec)
    unknown = sorted(set(spec) - set(RESNET_OPTIONS))
    if unknown:
        raise UserInputError(
            f"unknown option(s) {unknown} for model '{name}': allowed are {sorted(RESNET_OPTIONS)}"
        )
    return ResNet(**spec)


def build_model(
    name: str,
    *,
    vocab_size: int | None = None,
    num_classes: int | None = None,
    seed: int = 0,
    **overrides: Any,
) -> nn.Module:
    """Build a freshly initialised model, deterministically from ``seed``.

    Args:
        name: one of :data:`MODEL_NAMES`.
        vocab_size: embedding size of a GPT-Neo model (default: the registry's, 50257 for
            the paper's models, 257 for ``gptneo-tiny``). Use the tokenizer's ``vocab_size``.
        num_classes: logits of a ResNet (default 10 for ``*-cifar``/``resnet-tiny``, 1000 for
            ``*-imagenet``).
        seed: initialisation seed. Initialisation runs on the CPU under
            :func:`torch.random.fork_rng`, so equal seeds give bitwise-equal weights on every
            machine and process, and the caller's global RNG state is untouched.
        overrides: architecture options: ``GPTNeoConfig`` fields for GPT-Neo (e.g.
            ``num_layers=4``, ``max_position_embeddings=512``, ``window_size=128``);
            ``widths``, ``layers``, ``stem``, ``zero_init_residual``, ``stride_in_1x1``,
            ``in_channels`` for ResNets.

    Returns:
        The module in training mode, on the CPU, float32.
    """
    _check_name(name)
    try:
        seed = operator.index(seed)
    except TypeError:
        raise ParameterError("seed", seed, "an integer") from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.device("cpu"):
            model = _construct(name, vocab_size, num_classes, overrides)
    return model.train()


def count_parameters(
    name: str, *, vocab_size: int | None = None, num_classes: int | None = None, **overrides: Any
) -> int:
    """Number of distinct parameters of a model, built on the meta device (no memory used).

    Tied tensors (GPT-Neo's input embedding and output head) count once.
    """
    _check_name(name)
    with torch.device("meta"):
        model = _construct(name, vocab_size, num_classes, overrides)
    return sum(p.numel() for p in model.parameters())
