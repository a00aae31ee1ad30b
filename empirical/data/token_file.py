"""``tokens``: a user's own corpus as a flat binary file of token ids, memory-mapped.

The format many training repositories write: the token ids of the whole corpus back to
back, one fixed-width integer each, native (little-endian) byte order, no header (for
example nanoGPT's ``prepare.py`` writes GPT-2 BPE ids as ``uint16``, since the largest id,
50,256, is below 2**16). ``--data-path`` names

* one file: the training split is its first ``1 - val_fraction`` of the chunks, the
  validation split the last ``val_fraction`` (default 0.1), cut at a chunk boundary; or
* a directory holding ``train.bin`` and ``val.bin`` (the names nanoGPT uses), one file
  per split.

The dtype (``--token-dtype``) is one of :data:`TOKEN_DTYPES` or ``auto``: a dotted part of
the file name that names a dtype decides (``corpus.uint16.bin``, ``train.u32``; the short
names ``u16``, ``u32``, ``i32``, ``i64`` are accepted), otherwise the vocabulary size
does: ``uint16`` up to 65,536 ids, ``uint32`` above (the rule of
:func:`empirical.token_cache.token_dtype_for`).

Checks (each a :class:`~core.errors.UserInputError` naming the flag to change): the
file size is a whole number of ids; every id lies in ``[0, vocab_size)`` (the whole file is
scanned once, in blocks, when the dataset is built); a 16-bit read whose odd positions are
all zero while the even ones are not (32-bit ids read as 16-bit) is refused; the split
holds at least one chunk of ``seq_len`` tokens.

Items: chunk ``i`` is tokens ``[i*seq_len, (i+1)*seq_len)`` of the split, with
``labels = input_ids`` and an all-ones ``attention_mask`` (the items of
:class:`empirical.data.TokenChunkDataset`); the tail shorter than ``seq_len`` is dropped.
Nothing is loaded up front: every item reads its slice of the memory map (re-opened
after pickling, so DataLoader worker processes share the page cache).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from core.errors import UserInputError
from core.validation import ParameterError, check_fraction, check_int
from empirical.data.common import _VAL, _require_path
from empirical.token_cache import TOKEN_DTYPES, token_dtype_for

__all__ = ["TOKEN_DTYPES", "TokenFileDataset", "resolve_token_dtype", "scan_token_ids"]

_SHORT = {"u16": "uint16", "u32": "uint32", "i32": "int32", "i64": "int64"}
#: the two files of a directory ``--data-path`` (nanoGPT's names)
SPLIT_FILES = {"train": "train.bin", "val": "val.bin"}
#: ids per block of the range scan (32 MiB of uint16)
_SCAN_BLOCK = 1 << 24
#: ids inspected by the 32-read-as-16-bit check
_PROBE = 1 << 16


def resolve_token_dtype(path: str | os.PathLike, token_dtype: str, vocab_size: int) -> str:
    """The dtype of ``path``: ``token_dtype`` itself, or for ``auto`` the dtype a dotted
    part of the file name names, else :func:`empirical.token_cache.token_dtype_for`."""
    if token_dtype != "auto":
        if token_dtype not in TOKEN_DTYPES:
            raise ParameterError("token_dtype", token_dtype, "auto, " + ", ".join(TOKEN_DTYPES))
        return token_dtype
    parts = Path(path).name.lower().split(".")[1:]
    named = [_SHORT.get(p, p) for p in parts if _SHORT.get(p, p) in TOKEN_DTYPES]
    if len(set(named)) > 1:
        raise UserInputError(
            f"token file '{path}' names several dtypes ({', '.join(sorted(set(named)))}): "
            "give --token-dtype"
        )
    return named[0] if named else token_dtype_for(vocab_size)


def scan_token_ids(tokens: np.ndarray) -> tuple[int, int, int]:
    """``(smallest id, largest id, position of the first largest)`` of a 1-D id array,
    read in blocks of :data:`_SCAN_BLOCK` ids (a memory map is never loaded whole)."""
    lo, hi, where = None, None, 0
    for start in range(0, len(tokens), _SCAN_BLOCK):
        block = np.asarray(tokens[start : start + _SCAN_BLOCK])
        bmin, bmax = int(block.min()), int(block.max())
        lo = bmin if lo is None else min(lo, bmin)
        if hi is None or bmax > hi:
            hi, where = bmax, start + int(np.argmax(block))
    if lo is None or hi is None:
        raise UserInputError("the token file holds no ids")
    return lo, hi, where


def _check_not_wider(tokens: np.ndarray, path: str, dtype: str) -> None:
    """Refuse 32-bit little-endian ids read as 16-bit: their high halves land on every odd
    position as zeros."""
    if np.dtype(dtype).itemsize != 2 or len(tokens) < 1024:
        return
    probe = np.asarray(tokens[: min(len(tokens), _PROBE)])
    if not probe[1::2].any() and probe[0::2].any():
        raise UserInputError(
            f"token file '{path}' read as {dtype} has a zero at every odd position of its first "
            f"{len(probe)} ids: it looks like 32-bit ids; pass --token-dtype uint32 (or int32)"
        )


def _open(path: str, dtype: str) -> np.ndarray:
    """The ids of ``path`` as a read-only memory map (a plain ndarray view of it)."""
    size = os.path.getsize(path)
    width = np.dtype(dtype).itemsize
    if size % width:
        raise UserInputError(
            f"token file '{path}' has {size} bytes, not a whole number of {dtype} ids "
            f"({width} bytes each): check --token-dtype"
        )
    if size == 0:
        raise UserInputError(f"token file '{path}' is empty")
    # a plain ndarray over the map: slicing an np.memmap is several times slower
    return np.memmap(path, dtype=dtype, mode="r", shape=(size // width,)).view(np.ndarray)


class TokenFileDataset(Dataset):
    """Chunks of ``seq_len`` ids of ``path`` from id ``start`` on (``chunks`` of them).

    Build through :func:`empirical.data.build_dataset` (``name="tokens"``), which checks the
    file; the attributes ``task = "lm"`` and ``vocab_size`` are what the trainer reads.
    """

    task = "lm"

    def __init__(
        self, path: str, dtype: str, start: int, chunks: int, seq_len: int, vocab_size: int
    ):
        self.path, self.dtype = str(path), dtype
        self.start, self.chunks, self.seq_len = int(start), int(chunks), int(seq_len)
        self.vocab_size = int(vocab_size)
        self._tokens: np.ndarray | None = None

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            self._tokens = _open(self.path, self.dtype)
        return self._tokens

    def __len__(self) -> int:
        return self.chunks

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < self.chunks:
            raise IndexError(i)
        lo = self.start + i * self.seq_len
        ids = torch.from_numpy(self.tokens[lo : lo + self.seq_len].astype(np.int64))
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}


def _split_file(root: str, split: str) -> str:
    name = SPLIT_FILES["val" if split == _VAL else "train"]
    file = os.path.join(root, name)
    if not os.path.isfile(file):
        raise UserInputError(
            f"directory '{root}' has no '{name}': a directory --data-path of the 'tokens' "
            f"dataset holds {SPLIT_FILES['train']} and {SPLIT_FILES['val']}; or pass one file"
        )
    return file


def _token_file(
    path: str | os.PathLike | None,
    split: str,
    seq_len: int,
    vocab_size: int,
    token_dtype: str = "auto",
    val_fraction: float = 0.1,
) -> TokenFileDataset:
    """One split of a token file (module docstring); every check runs here, once."""
    p = _require_path(path, "a flat binary file of token ids, or a directory with train.bin "
                      "and val.bin")  # fmt: skip
    vocab_size = check_int("vocab_size", vocab_size, 1, integral_floats=True)
    one_file = not os.path.isdir(p)
    file = p if one_file else _split_file(p, split)
    dtype = resolve_token_dtype(file, token_dtype, vocab_size)
    tokens = _open(file, dtype)
    _check_not_wider(tokens, file, dtype)
    lo, hi, where = scan_token_ids(tokens)
    if lo < 0:
        raise UserInputError(
            f"token file '{file}' read as {dtype} holds the negative id {lo}: check --token-dtype"
        )
    if hi >= vocab_size:
        raise UserInputError(
            f"token file '{file}' holds id {hi} (position {where}), outside the model's "
            f"vocabulary of {vocab_size} ids: choose the --model (or --tokenizer) whose "
            "vocabulary wrote the file, or check --token-dtype"
        )
    total = len(tokens) // seq_len
    start, chunks = 0, total
    if one_file:
        f = check_fraction("val_fraction", val_fraction, allow_zero=False, allow_one=False)
        n_val = int(round(f * total))
        start, chunks = (total - n_val, n_val) if split == _VAL else (0, total - n_val)
        start *= seq_len
    if chunks < 1:
        raise UserInputError(
            f"the {'validation' if split == _VAL else 'training'} split of token file '{file}' "
            f"({len(tokens)} ids) holds no chunk of --seq-len {seq_len} tokens: use a longer "
            "file or a shorter --seq-len"
        )
    return TokenFileDataset(file, dtype, start, chunks, seq_len, vocab_size)
