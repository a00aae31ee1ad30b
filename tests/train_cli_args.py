"""Command lines of the tiny ``palsgd train`` runs shared by the trainer tests: GPT-Neo-tiny on
the embedded text, one process on the CPU (``--nproc 1``), six steps of two sequences of 16
tokens, a sync every two steps, no evaluation."""

from __future__ import annotations

from pathlib import Path

#: the tiny run's options (``palsgd train`` flags or ``resolve_config`` overrides)
TINY_OVERRIDES = {"T": 6, "eval_interval": 0, "seq_len": 16, "batch_size": 2, "H": 2}

TINY_RUN = ["train", "--nproc", "1", "--no-progress"] + [
    item for k, v in TINY_OVERRIDES.items() for item in (f"--{k.replace('_', '-')}", str(v))
]


def train_args(
    out: Path, *extra: str, log_interval: int = 2, checkpoint_interval: int = 2
) -> list[str]:
    """``palsgd train`` arguments of a tiny run writing to ``out`` (``extra`` flags last, so
    they override the shared ones)."""
    return [
        *TINY_RUN,
        "--log-interval",
        str(log_interval),
        "--checkpoint-interval",
        str(checkpoint_interval),
        "--output-dir",
        str(out),
        *extra,
    ]
