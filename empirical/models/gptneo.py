"""GPT-Neo causal language models built from a :class:`transformers.GPTNeoConfig` (random
initialisation, no weights are downloaded), and their closed-form parameter count.

Layers alternate global / local attention (window 256), which is what the authors'
configs produce (reference-implementation.md, section 7). ``transformers`` is imported on
the first build (it takes seconds), so the ResNets and the registry load without it.

A training step copies nothing from the host to the device: the models are built without a
KV cache (``use_cache=False``: transformers' cache makes its tensors with ``torch.tensor``),
the model owns its attention mask (:func:`causal_padding_mask`, made by fills on the
device and handed to transformers as a prepared 4-D mask, so ``masking_utils`` builds none;
transformers 5.17's ``eager_mask`` made ``torch.tensor(0.0, device=...)`` in every forward)
and the self-attention makes its mask value without a host tensor. The outputs equal
transformers' own classes' (tests/test_host_copies.py).

``attention="sdpa"`` (a build option, not a config field) computes the same attention with
``torch.nn.functional.scaled_dot_product_attention`` (fused kernels on a GPU: no
``(batch, heads, n, n)`` scores in memory): unscaled scores in float32 (autocast off inside,
as GPT-Neo's own upcast), the layer's causal or local-window mask and the additive mask in
one float mask; equal to the eager attention within float32 rounding
(tests/test_gptneo_sdpa.py). Off by default until it is measured faster on a GPU
(``benchmarks/gpu_profile.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from core.errors import UserInputError
from core.validation import ParameterError, check_int

__all__ = [
    "GPTNEO_SIZES",
    "gptneo_config",
    "build_gptneo",
    "causal_padding_mask",
    "gptneo_parameter_count",
]

#: the size fields of a GPT-Neo spec, each a positive integer
GPTNEO_SIZES: tuple[str, ...] = (
    "vocab_size",
    "hidden_size",
    "num_heads",
    "num_layers",
    "max_position_embeddings",
)


def _transformers_gptneo() -> tuple[type, type]:
    """``(GPTNeoConfig, GPTNeoForCausalLM)`` from transformers."""
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    return GPTNeoConfig, GPTNeoForCausalLM


def causal_padding_mask(
    attention_mask: torch.Tensor | None,
    batch: int,
    length: int,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """The additive ``(batch, 1, length, length)`` mask that transformers' eager attention
    gets from ``masking_utils.create_causal_mask`` without a cache: 0 where query ``i`` may
    attend key ``j`` (``j <= i`` and key ``j`` not padding, ``attention_mask[b, j] != 0``),
    ``finfo(dtype).min`` elsewhere. Made by fills and element-wise operations on ``device``
    (no tensor from host data, so no host-to-device copy on a GPU)."""
    allowed = torch.ones(length, length, dtype=torch.bool, device=device).tril_()
    allowed = allowed.expand(batch, 1, length, length)
    if attention_mask is not None:
        keys = attention_mask.to(device=device, dtype=torch.bool, non_blocking=True)
        allowed = allowed & keys[:, None, None, :]
    mask = torch.zeros((batch, 1, length, length), dtype=dtype, device=device)
    # out of place: under torch.func.vmap (the probe's per-sample gradients) ``allowed`` is
    # batched and ``mask`` is not, and an in-place fill of an unbatched tensor is refused
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


def _host_free_classes() -> dict[str, type]:
    """transformers' GPT-Neo self-attention and model with masking that needs nothing from
    the host, by name (``HostFreeGPTNeoSelfAttention``, ``HostFreeGPTNeoModel``).

    transformers' ``GPTNeoSelfAttention._attn`` makes its mask value with
    ``torch.tensor(finfo.min, device=...)`` in every layer's forward: on a GPU that is a
    blocking host-to-device copy (a synchronisation) per layer and micro-batch. Here the
    same value is a kernel argument (``torch.where`` with a Python scalar); the rest is the
    same computation (GPT-Neo attention: unscaled scores in float32, the causal or local
    window mask of the ``bias`` buffer, the additive attention mask, softmax, dropout), so
    the outputs are identical (a test compares them with transformers' class).

    ``HostFreeGPTNeoModel`` hands its layers the mask of :func:`causal_padding_mask` (a
    prepared 4-D mask, which transformers' mask functions return as it is) when no cache
    of earlier tokens is given; with one (generation) it is transformers' model.
    """
    if not _HOST_FREE:
        from transformers.models.gpt_neo.modeling_gpt_neo import (
            GPTNeoModel,
            GPTNeoSelfAttention,
        )

        class HostFreeGPTNeoSelfAttention(GPTNeoSelfAttention):
            def _attn(self, query, key, value, attention_mask=None):
                q, k = query.to(torch.float32), key.to(torch.float32)
                scores = torch.matmul(q, k.transpose(-1, -2))
                n_q, n_k = q.size(-2), k.size(-2)
                allowed = self.bias[:, :, n_k - n_q : n_k, :n_k]
                scores = torch.where(allowed, scores, torch.finfo(scores.dtype).min)
                if attention_mask is not None:
                    scores = scores + attention_mask
                weights = nn.functional.softmax(scores, dim=-1).to(value.dtype)
                weights = self.attn_dropout(weights)
                return torch.matmul(weights, value), weights

        class HostFreeGPTNeoModel(GPTNeoModel):
            def forward(self, input_ids=None, *args, attention_mask=None, **kwargs):
                past = any(kwargs.get(k) is not None for k in ("cache", "past_key_values"))
                if not past and (attention_mask is None or attention_mask.dim() == 2):
                    embeds = kwargs.get("inputs_embeds")
                    shape = (input_ids if embeds is None else embeds).shape
                    weight = self.wte.weight
                    dtype = weight.dtype if embeds is None else embeds.dtype
                    attention_mask = causal_padding_mask(
                        attention_mask, shape[0], shape[1], dtype, weight.device
                    )
                return super().forward(input_ids, *args, attention_mask=attention_mask, **kwargs)

        class FusedGPTNeoSelfAttention(HostFreeGPTNeoSelfAttention):
            def _attn(self, query, key, value, attention_mask=None):
                n_q, n_k = query.size(-2), key.size(-2)
                allowed = self.bias[:, :, n_k - n_q : n_k, :n_k]
                mask = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)
                if attention_mask is not None:
                    mask = mask + attention_mask.to(torch.float32)
                p = self.attn_dropout.p if self.training else 0.0
                with torch.autocast(query.device.type, enabled=False):
                    out = nn.functional.scaled_dot_product_attention(
                        query.float(), key.float(), value.float(), attn_mask=mask,
                        dropout_p=p, scale=1.0,
                    )  # fmt: skip
                return out.to(value.dtype), None

        for cls in (HostFreeGPTNeoSelfAttention, HostFreeGPTNeoModel, FusedGPTNeoSelfAttention):
            cls.__qualname__ = cls.__name__
            _HOST_FREE[cls.__name__] = cls
    return _HOST_FREE


_HOST_FREE: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    """``HostFreeGPTNeoSelfAttention`` and ``HostFreeGPTNeoModel``, made on first use (so
    that pickling a model finds them by name without importing transformers before it is
    needed)."""
    if name in ("HostFreeGPTNeoSelfAttention", "HostFreeGPTNeoModel", "FusedGPTNeoSelfAttention"):
        return _host_free_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _attention_types(num_layers: int) -> list:
    """Alternating global/local attention in GPTNeoConfig's run-length format."""
    types: list = [[["global", "local"], num_layers // 2]] if num_layers >= 2 else []
    if num_layers % 2:
        types.append([["global"], 1])
    return types


def gptneo_config(spec: Mapping[str, Any]) -> Any:
    """The ``GPTNeoConfig`` of a spec (``GPTNeoConfig`` fields): alternating attention, no
    KV cache (``use_cache=False``, training builds none) and, unless given, BOS = EOS =
    GPT-2's ``<|endoftext|>`` (50256) or the vocabulary's last id."""
    config_class, _ = _transformers_gptneo()
    cfg = dict(spec)
    n_layers = int(cfg["num_layers"])
    cfg.setdefault("attention_types", _attention_types(n_layers))
    cfg.setdefault("use_cache", False)
    vocab = int(cfg["vocab_size"])
    # GPT-2 BPE's <|endoftext|> is 50256; smaller vocabularies use their last id (the byte
    # tokenizer's EOS is 256 = vocab_size - 1).
    eos = 50256 if vocab > 50256 else vocab - 1
    cfg.setdefault("bos_token_id", eos)
    cfg.setdefault("eos_token_id", eos)
    try:
        return config_class(**cfg)
    except (TypeError, ValueError) as exc:
        raise UserInputError(f"invalid GPT-Neo configuration {cfg}: {exc}") from None


#: the self-attention of ``build_gptneo``'s ``attention`` option
ATTENTIONS = {"eager": "HostFreeGPTNeoSelfAttention", "sdpa": "FusedGPTNeoSelfAttention"}


def build_gptneo(spec: Mapping[str, Any]) -> nn.Module:
    """A ``GPTNeoForCausalLM`` of a spec, its sizes checked (positive integers, ``num_heads``
    dividing ``hidden_size``); initialised by the caller's RNG on the current device. Its
    mask and self-attention layers compute transformers' attention without a host-to-device
    copy (:func:`_host_free_classes`); ``spec["attention"]``: ``"eager"`` (default) or
    ``"sdpa"`` (module docstring)."""
    spec = dict(spec)
    attention = spec.pop("attention", "eager")
    if attention not in ATTENTIONS:
        raise ParameterError("attention", attention, f"one of {sorted(ATTENTIONS)}")
    for key in GPTNEO_SIZES:
        check_int(key, spec[key], 1, integral_floats=True)
    if spec["hidden_size"] % spec["num_heads"]:
        raise ParameterError(
            "num_heads", spec["num_heads"], f"a divisor of hidden_size = {spec['hidden_size']}"
        )
    _, model_class = _transformers_gptneo()
    model = model_class(gptneo_config(spec))
    classes = _host_free_classes()
    model_cls, eager = classes["HostFreeGPTNeoModel"], classes[ATTENTIONS["eager"]]
    swap = {model_cls.__base__: model_cls, eager.__base__: classes[ATTENTIONS[attention]]}
    for module in model.modules():
        if type(module) in swap:
            module.__class__ = swap[type(module)]  # same parameters and buffers, no host copy
    return model


def gptneo_parameter_count(
    vocab_size: int,
    max_position_embeddings: int,
    hidden_size: int,
    num_layers: int,
    intermediate_size: int | None = None,
    **_: Any,
) -> int:
    """Closed-form parameter count of GPTNeoForCausalLM (tied input/output embeddings).

    With V vocabulary, P positions, h hidden, m = intermediate size (default 4h), L layers:
    ``V h + P h + L (4 h^2 + h + 2 h m + m + h + 4 h) + 2 h``: per layer q, k, v without bias
    and the output projection with bias (4h^2 + h), the MLP (h m + m + m h + h) and two
    LayerNorms (4h); the final LayerNorm (2h). For m = 4h a layer has 12 h^2 + 10 h.
    """
    h, m = int(hidden_size), int(intermediate_size or 4 * hidden_size)
    per_layer = 4 * h * h + h + 2 * h * m + m + h + 4 * h
    return int(vocab_size * h + max_position_embeddings * h + num_layers * per_layer + 2 * h)
