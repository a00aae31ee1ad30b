"""What every dataset module shares: the ignore label, split names, seeds, path checks."""

from __future__ import annotations

import os

import numpy as np

from core.errors import UserInputError
from core.files import missing_reason

IGNORE_INDEX = -100
_TRAIN, _VAL = "train", "val"


def _seed_sequence(parts: tuple[int, ...]) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(p) & 0xFFFFFFFFFFFFFFFF for p in parts])


def seed_of(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (numpy SeedSequence hashing)."""
    return int(_seed_sequence(parts).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def rng_of(*parts: int) -> np.random.Generator:
    """A numpy generator seeded by the integers ``parts`` (SeedSequence hashing)."""
    return np.random.default_rng(_seed_sequence(parts))


def _split(split: str) -> str:
    s = str(split).lower()
    if s == "train":
        return _TRAIN
    if s in ("val", "valid", "validation", "test", "eval"):
        return _VAL
    raise UserInputError(
        f"unknown split '{split}': use 'train' or 'val' (aliases: valid, validation, test)"
    )


def _require_path(path: str | os.PathLike | None, what: str) -> str:
    if path is None:
        raise UserInputError(f"this dataset needs path=...: expected {what}")
    p = os.fspath(path)
    if not os.path.exists(p):
        why = missing_reason(p)
        raise UserInputError(f"path '{p}' {why}: expected {what}")
    return p
