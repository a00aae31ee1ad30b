"""Losses and evaluation of the models: next-token cross entropy for the language models
(labels aligned with the inputs, Hugging Face convention, shifted here; -100 ignored) and
cross entropy for the image models; token- or sample-weighted evaluation over a loader."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from core.errors import UserInputError
from core.validation import check_int

__all__ = ["IGNORE_INDEX", "next_token_logits", "compute_loss", "evaluate"]

#: the label of a position without a target (PyTorch's and Hugging Face's default)
IGNORE_INDEX = -100


def _device_of(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _to(x: Any, device: torch.device) -> Any:
    return x.to(device, non_blocking=True) if torch.is_tensor(x) else x


def next_token_logits(
    model: nn.Module, batch: Mapping[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of positions ``0..T-2`` (float32, ``(N, T-1, V)``) and their targets, the
    labels of positions ``1..T-1`` (``(N, T-1)``, -100 where ignored), on the model's device.

    ``batch`` maps ``input_ids`` (N, T), optional ``labels`` aligned with the inputs (Hugging
    Face convention) and optional ``attention_mask``; without ``labels`` the targets are the
    inputs with masked positions ignored.
    """
    if not isinstance(batch, Mapping) or "input_ids" not in batch:
        raise UserInputError(
            "a language-model batch must be a mapping with 'input_ids' (and optional 'labels', "
            f"'attention_mask'); got {type(batch).__name__}"
        )
    dev = _device_of(model)
    ids = _to(batch["input_ids"], dev)
    mask = _to(batch.get("attention_mask"), dev)
    labels = batch.get("labels")
    if labels is None:
        labels = ids if mask is None else ids.masked_fill(mask == 0, IGNORE_INDEX)
    labels = _to(labels, dev)
    out = model(input_ids=ids, attention_mask=mask)
    logits = out.logits if hasattr(out, "logits") else out
    # Causal LM: position t predicts token t+1 (labels are aligned with input_ids, as in HF).
    return logits[:, :-1, :].float(), labels[:, 1:]


def _lm_terms(
    model: nn.Module, batch: Mapping[str, Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed next-token cross entropy, number of target tokens, number of correct argmaxes."""
    logits, targets = next_token_logits(model, batch)
    total = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    valid = targets != IGNORE_INDEX
    correct = ((logits.argmax(-1) == targets) & valid).sum()
    return total, valid.sum(), correct


def _image_terms(model: nn.Module, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if isinstance(batch, Mapping):
        x = batch.get("pixel_values", batch.get("image"))
        y = batch.get("labels", batch.get("label"))
    elif isinstance(batch, list | tuple) and len(batch) == 2:
        x, y = batch
    else:
        x = y = None
    if x is None or y is None:
        raise UserInputError(
            "an image batch must be a pair (images, labels) or a mapping with 'pixel_values' "
            f"/'image' and 'labels'/'label'; got {type(batch).__name__}"
        )
    dev = _device_of(model)
    x, y = _to(x, dev), _to(y, dev)
    logits = model(x).float()
    total = F.cross_entropy(logits, y, reduction="sum")
    count = torch.full((), y.numel(), dtype=torch.long, device=dev)  # a fill, not a copy
    return total, count, (logits.argmax(-1) == y).sum()


def _terms(model: nn.Module, batch: Any, task: str):
    if task == "lm":
        return _lm_terms(model, batch)
    if task == "image":
        return _image_terms(model, batch)
    raise UserInputError(f"unknown task '{task}': use 'lm' or 'image'")


def compute_loss(
    model: nn.Module, batch: Any, task: str, *, reduction: str = "mean"
) -> torch.Tensor:
    """Training loss of one batch (moved to the model's device).

    * ``task="lm"``: ``batch`` maps ``input_ids`` (N, T), optional ``labels`` (N, T) aligned
      with the inputs (Hugging Face convention; the shift happens here) and optional
      ``attention_mask``. Without ``labels``, targets are the inputs with masked positions
      ignored. Loss: cross entropy of position t's logits against label t+1, averaged over
      targets that are not -100 (the same value as ``GPTNeoForCausalLM(..., labels=...)``).
    * ``task="image"``: ``batch`` is ``(x, y)``; loss: cross entropy averaged over the batch.

    ``reduction="sum"`` returns the summed loss instead (for exact token-weighted gradient
    accumulation); a batch without any target gives 0 (mean) rather than NaN.
    """
    total, count, _ = _terms(model, batch, task)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise UserInputError(f"unknown reduction '{reduction}': use 'mean' or 'sum'")
    return total / count.clamp_min(1)


@torch.no_grad()
def evaluate(
    model: nn.Module, loader: Iterable[Any], task: str, max_batches: int | None = None
) -> dict[str, float]:
    """Average loss over a loader (token-weighted for LM, sample-weighted for images).

    Returns ``{"loss", "loss_sum", "count", "batches"}`` plus ``"perplexity"`` = exp(loss)
    and ``"token_accuracy"`` for ``lm``, or ``"accuracy"`` (top-1) for ``image``. ``loss_sum``
    and ``count`` let a distributed caller all-reduce before dividing. The model is put in
    eval mode and its previous mode restored.
    """
    if max_batches is not None:
        max_batches = check_int("max_batches", max_batches, 1, integral_floats=True)
    was_training = model.training
    model.eval()
    loss_sum, count, correct, batches = 0.0, 0, 0, 0
    try:
        for batch in itertools.islice(loader, max_batches):
            total, n, c = _terms(model, batch, task)
            loss_sum += float(total)
            count += int(n)
            correct += int(c)
            batches += 1
    finally:
        model.train(was_training)
    loss = loss_sum / count if count else float("nan")
    out = {"loss": loss, "loss_sum": loss_sum, "count": count, "batches": batches}
    if task == "lm":
        out["perplexity"] = (math.exp(loss) if loss < 700 else math.inf) if count else math.nan
        out["token_accuracy"] = correct / count if count else float("nan")
    else:
        out["accuracy"] = correct / count if count else float("nan")
    return out
