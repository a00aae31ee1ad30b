"""The values of ``palsgd train``'s options whose choices the configuration owns (not a
registry): the inner optimizers, the precisions and the process-group backends. Their
fields are declared in :mod:`empirical.config.fields`."""

from __future__ import annotations

__all__ = ["OPTIMIZERS", "PRECISIONS", "BACKENDS"]

#: inner optimizers the trainer builds (torch.optim): name -> description
OPTIMIZERS: dict[str, str] = {
    "sgd": "torch.optim.SGD, no momentum",
    "sgd_momentum": "torch.optim.SGD with heavy-ball momentum `momentum`",
    "adamw": "torch.optim.AdamW with betas (beta1, beta2), eps 1e-8",
}
#: forward-pass precisions (autocast; fp32 master weights)
PRECISIONS = ("fp32", "bf16", "fp16")
#: process-group backends (auto: NCCL on CUDA, gloo on the CPU)
BACKENDS = ("auto", "nccl", "gloo")
