"""GPT-Neo's attention through ``scaled_dot_product_attention`` (``build_model(...,
attention="sdpa")``) against the eager attention (transformers' computation), same weights,
float32 on the CPU.

With left padding, a padded query sees only padding keys, a row masked whole: there the
kernels differ (the eager softmax spreads over the padding, the fused CPU kernel does
not), so the test trains on no prediction made from such a row (the LM data here are
packed, never padded).

The model: 2 layers (one global, one local with a window of 4 tokens, shorter than the
16-token sequences, so the window masks scores), dropout 0. Logits, loss and every
gradient agree to float32 rounding (relative 1e-5), with and without left padding in the
attention mask. Negative controls: the same fused call with SDPA's default scale
``1/sqrt(head_dim)`` (GPT-Neo's scores are unscaled), and with the global mask in the local
layer, differ by far more than the tolerance.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from core.errors import UserInputError
from empirical.models import build_model

SPEC = dict(vocab_size=257, hidden_size=32, num_heads=4, num_layers=2, window_size=4)
B, N, RTOL = 3, 16, 1e-5


def _pair() -> tuple[nn.Module, nn.Module]:
    eager = build_model("gptneo-tiny", seed=0, **SPEC)
    fused = build_model("gptneo-tiny", seed=0, attention="sdpa", **SPEC)
    fused.load_state_dict(eager.state_dict())
    return eager, fused


def _batch(padded: bool) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 257, (B, N), generator=g)
    batch = {"input_ids": ids, "labels": ids.clone()}
    if padded:  # left padding of 0, 3 and 6 tokens
        mask = torch.ones(B, N, dtype=torch.long)
        for b, pad in enumerate((0, 3, 6)):
            mask[b, :pad] = 0
            # a padded query sees only padding (a row masked whole, where the kernels may
            # differ): the first real token, which it would predict, is not trained on
            batch["labels"][b, : pad + 1 if pad else 0] = -100
        batch["attention_mask"] = mask
    return batch


def _run(model: nn.Module, batch: dict) -> tuple[torch.Tensor, torch.Tensor, list]:
    model.zero_grad(set_to_none=True)
    out = model(**batch)
    out.loss.backward()
    return out.logits.detach(), out.loss.detach(), [p.grad.clone() for p in model.parameters()]


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("padded", [False, True], ids=["causal", "left-padded"])
def test_sdpa_equals_the_eager_attention(padded):
    eager, fused = _pair()
    kinds = {type(m).__name__ for m in fused.modules()}
    assert "FusedGPTNeoSelfAttention" in kinds and "HostFreeGPTNeoSelfAttention" not in kinds
    batch = _batch(padded)
    le, loss_e, ge = _run(eager, batch)
    lf, loss_f, gf = _run(fused, batch)
    keep = batch.get("attention_mask", torch.ones(B, N)) != 0  # rows that see a real token
    assert _gap(lf[keep], le[keep]) < RTOL
    assert float(loss_f) == pytest.approx(float(loss_e), rel=RTOL)
    assert max(_gap(a, b) for a, b in zip(gf, ge, strict=True)) < 10 * RTOL


def _scaled_attn(self, query, key, value, attention_mask=None):
    """The fused call with SDPA's default scale (the negative control)."""
    n_q, n_k = query.size(-2), key.size(-2)
    mask = torch.where(self.bias[:, :, n_k - n_q : n_k, :n_k], 0.0, torch.finfo(torch.float32).min)
    out = nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    return out, None


def test_a_wrong_scale_or_window_is_detected(monkeypatch):
    eager, fused = _pair()
    batch = _batch(False)
    le = _run(eager, batch)[0]
    attn = [m for m in fused.modules() if type(m).__name__ == "FusedGPTNeoSelfAttention"]
    monkeypatch.setattr(type(attn[0]), "_attn", _scaled_attn)
    assert _gap(_run(fused, batch)[0], le) > 1e-3
    monkeypatch.undo()
    local = next(m for m in attn if m.attention_type == "local")
    local.bias = torch.ones_like(local.bias).tril_()  # the global (causal) mask
    assert _gap(_run(fused, batch)[0], le) > 1e-3


def test_an_unknown_attention_is_refused():
    with pytest.raises(UserInputError, match="attention"):
        build_model("gptneo-tiny", attention="flash")
