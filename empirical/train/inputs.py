"""The inputs of ``palsgd train`` checked once by the command, before any rank starts:
the sequence length against its cap, and a token file (``--dataset tokens``) read whole
once (:mod:`empirical.data.token_scan`, with progress on stderr for a large file), so that
a bad id or a wrong dtype is refused with exit code 2 and one line naming the flag instead
of inside every rank after the launch. The ranks get the scan's result through the
environment and do not read the file again."""

from __future__ import annotations

from empirical import models
from empirical.config import TrainConfig
from empirical.train.prepare import _build_datasets, check_names, check_seq_len

__all__ = ["check_inputs_before_launch"]


def check_inputs_before_launch(cfg: TrainConfig) -> None:
    """Refuse a ``--seq-len`` above its cap and a bad token file before any rank starts
    (raises :class:`~core.errors.UserInputError` naming the flag)."""
    task = check_names(cfg)
    if task != "lm":
        return
    check_seq_len(cfg, models.model_spec(cfg.model))
    if cfg.dataset == "tokens":
        _build_datasets(cfg, task)
