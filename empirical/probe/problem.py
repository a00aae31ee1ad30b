"""The probe's problem: per-sample losses of a task, the model's flat parameter vector and
:class:`ProbeProblem` (model, data set, the run's shards)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import default_collate

from core.errors import UserInputError
from empirical.data import IGNORE_INDEX

SampleLoss = Callable[[nn.Module, Any], torch.Tensor]


def _to_device(x: Any, device: torch.device) -> Any:
    if torch.is_tensor(x):
        return x.to(device)
    if isinstance(x, Mapping):
        return {k: _to_device(v, device) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_to_device(v, device) for v in x)
    return x


def lm_sample_losses(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Per-sequence mean next-token cross entropy, shape ``(N,)``.

    Same conventions as :func:`empirical.models.compute_loss` (labels aligned with the
    inputs and shifted here, -100 ignored, labels default to the inputs with masked positions
    ignored); for sequences with equal target counts the mean of this vector equals
    ``compute_loss``. A sequence without targets has loss 0.
    """
    ids = batch["input_ids"]
    mask = batch.get("attention_mask")
    labels = batch.get("labels")
    if labels is None:
        labels = ids if mask is None else ids.masked_fill(mask == 0, IGNORE_INDEX)
    out = model(input_ids=ids, attention_mask=mask)
    logits = (out.logits if hasattr(out, "logits") else out)[:, :-1, :].float()
    targets = labels[:, 1:]
    tok = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="none",
    ).view(targets.shape)
    valid = (targets != IGNORE_INDEX).to(tok.dtype)
    return (tok * valid).sum(1) / valid.sum(1).clamp_min(1)


def image_sample_losses(model: nn.Module, batch: Any) -> torch.Tensor:
    """Per-image cross entropy, shape ``(N,)``; ``batch`` is ``(images, labels)``."""
    x, y = batch[0], batch[1]
    return F.cross_entropy(model(x).float(), y, reduction="none")


def sample_loss_for_task(task: str) -> SampleLoss:
    """The per-sample loss of a task of :func:`empirical.models.model_task`."""
    if task == "lm":
        return lm_sample_losses
    if task == "image":
        return image_sample_losses
    raise UserInputError(f"unknown task '{task}': use 'lm' or 'image'")


# ----------------------------------------------------------------------------- parameters
def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the probe differentiates (``requires_grad``; tied tensors once)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise UserInputError("the model has no trainable parameters")
    return params


def get_flat(model: nn.Module) -> torch.Tensor:
    """The trainable parameters as one detached 1-D tensor (model order)."""
    return torch.cat([p.detach().reshape(-1) for p in trainable_parameters(model)])


@torch.no_grad()
def set_flat(model: nn.Module, vec: torch.Tensor) -> None:
    """Copy a 1-D tensor (as from :func:`get_flat`) into the trainable parameters."""
    params = trainable_parameters(model)
    n = sum(p.numel() for p in params)
    if vec.numel() != n:
        raise UserInputError(f"parameter vector has {vec.numel()} values, the model {n}")
    pos = 0
    for p in params:
        k = p.numel()
        p.copy_(vec[pos : pos + k].view_as(p).to(p.dtype))
        pos += k


def _flat_grad(loss: torch.Tensor, params: Sequence[torch.Tensor], **kw: Any) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, allow_unused=True, **kw)
    return torch.cat(
        [
            (torch.zeros_like(p) if g is None else g).reshape(-1)
            for p, g in zip(params, grads, strict=True)
        ]
    )


# ----------------------------------------------------------------------------- problem
@dataclass
class ProbeProblem:
    """A model, a data set and the run's shards.

    ``dataset[i]`` gives one sample; ``collate`` (default
    :func:`torch.utils.data.default_collate`) makes a batch; ``sample_loss(model, batch)``
    returns the per-sample losses ``(N,)``. ``shards`` are index arrays of the K workers
    (the objective weighs them equally). The model is moved to ``device`` and put in eval
    mode.
    """

    model: nn.Module
    dataset: Any
    sample_loss: SampleLoss
    shards: list[np.ndarray]
    collate: Callable[[list[Any]], Any] = default_collate
    device: str | torch.device = "cpu"

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)
        self.model = self.model.to(self.device).eval()
        self.params = trainable_parameters(self.model)
        self.dim = sum(p.numel() for p in self.params)
        self.shards = [np.asarray(s, dtype=np.int64).reshape(-1) for s in self.shards]
        if not self.shards:
            raise UserInputError("the probe needs at least one shard")
        n = len(self.dataset)
        for k, s in enumerate(self.shards):
            if len(s) == 0:
                raise UserInputError(f"shard {k} is empty")
            if s.min() < 0 or s.max() >= n:
                raise UserInputError(f"shard {k} holds indices outside [0, {n})")
        self._cache: dict[tuple[int, ...], Any] = {}
        #: None: untried; True/False: per-sample gradients by torch.func.vmap work / do not
        self.vmap_ok: bool | None = None

    @property
    def K(self) -> int:
        return len(self.shards)

    def batch(self, indices: Sequence[int] | np.ndarray, cache: bool = True) -> Any:
        """The collated batch of ``indices`` on the device (cached when ``cache``)."""
        key = tuple(int(i) for i in indices)
        if cache and key in self._cache:
            return self._cache[key]
        b = _to_device(self.collate([self.dataset[i] for i in key]), self.device)
        if cache:
            self._cache[key] = b
        return b
