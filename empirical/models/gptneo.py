"""GPT-Neo causal language models built from a :class:`transformers.GPTNeoConfig` (random
initialisation, no weights are downloaded), and their closed-form parameter count.

Layers alternate global / local attention (window 256), which is what the authors'
configs produce (reference-implementation.md, section 7). ``transformers`` is imported on
the first build (it takes seconds), so the ResNets and the registry load without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from core.errors import UserInputError
from core.validation import ParameterError, check_int

__all__ = ["GPTNEO_SIZES", "gptneo_config", "build_gptneo", "gptneo_parameter_count"]

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


def _host_free_attention_class() -> type:
    """transformers' GPT-Neo self-attention with masking that needs nothing from the host.

    transformers' ``GPTNeoSelfAttention._attn`` makes its mask value with
    ``torch.tensor(finfo.min, device=...)`` in every layer's forward: on a GPU that is a
    blocking host-to-device copy (a synchronisation) per layer and micro-batch. Here the
    same value is a kernel argument (``torch.where`` with a Python scalar); the rest is the
    same computation (GPT-Neo attention: unscaled scores in float32, the causal or local
    window mask of the ``bias`` buffer, the additive attention mask, softmax, dropout), so
    the outputs are identical (a test compares them with transformers' class).
    """
    global _HOST_FREE_ATTENTION
    if _HOST_FREE_ATTENTION is None:
        import torch
        from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention

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

        HostFreeGPTNeoSelfAttention.__qualname__ = "HostFreeGPTNeoSelfAttention"
        _HOST_FREE_ATTENTION = HostFreeGPTNeoSelfAttention
    return _HOST_FREE_ATTENTION


_HOST_FREE_ATTENTION: type | None = None


def __getattr__(name: str) -> Any:
    """``HostFreeGPTNeoSelfAttention``, made on first use (so that pickling a model finds
    it by name without importing transformers before it is needed)."""
    if name == "HostFreeGPTNeoSelfAttention":
        return _host_free_attention_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _attention_types(num_layers: int) -> list:
    """Alternating global/local attention in GPTNeoConfig's run-length format."""
    types: list = [[["global", "local"], num_layers // 2]] if num_layers >= 2 else []
    if num_layers % 2:
        types.append([["global"], 1])
    return types


def gptneo_config(spec: Mapping[str, Any]) -> Any:
    """The ``GPTNeoConfig`` of a spec (``GPTNeoConfig`` fields): alternating attention and,
    unless given, BOS = EOS = GPT-2's ``<|endoftext|>`` (50256) or the vocabulary's last id."""
    config_class, _ = _transformers_gptneo()
    cfg = dict(spec)
    n_layers = int(cfg["num_layers"])
    cfg.setdefault("attention_types", _attention_types(n_layers))
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


def build_gptneo(spec: Mapping[str, Any]) -> nn.Module:
    """A ``GPTNeoForCausalLM`` of a spec, its sizes checked (positive integers, ``num_heads``
    dividing ``hidden_size``); initialised by the caller's RNG on the current device. Its
    self-attention layers compute transformers' attention without a host-to-device copy
    (:func:`_host_free_attention_class`)."""
    for key in GPTNEO_SIZES:
        check_int(key, spec[key], 1, integral_floats=True)
    if spec["hidden_size"] % spec["num_heads"]:
        raise ParameterError(
            "num_heads", spec["num_heads"], f"a divisor of hidden_size = {spec['hidden_size']}"
        )
    _, model_class = _transformers_gptneo()
    model = model_class(gptneo_config(spec))
    host_free = _host_free_attention_class()
    for module in model.modules():
        if type(module) is host_free.__base__:
            module.__class__ = host_free  # same parameters and buffers, no host copy
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
