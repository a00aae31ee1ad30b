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

Checks (each a :class:`~core.errors.UserInputError` naming the flag to change), all
made when the dataset is built, which ``palsgd train`` does once before any rank starts
(:mod:`empirical.data.token_scan`): the path is a regular file (a FIFO, a device, a
directory or a symbolic-link loop is named as such); the file size is a whole number of
ids; every id lies in ``[0, vocab_size)`` (the whole file is scanned once, in blocks, with
progress on stderr when that takes more than a couple of seconds); a 16-bit read whose odd
positions are all zero while the even ones are not (32-bit ids read as 16-bit) is refused
from eight ids on; the split holds at least one chunk of ``seq_len`` tokens.

Items: chunk ``i`` is tokens ``[i*seq_len, (i+1)*seq_len)`` of the split, with
``labels = input_ids`` and an all-ones ``attention_mask`` (the items of
:class:`empirical.data.TokenChunkDataset`); the tail shorter than ``seq_len`` is dropped.
Nothing is loaded up front: every item is read with ``os.pread`` (no memory map, so a file
truncated under a running job cannot end the process with SIGBUS). A file that changes
under a running job is found as it is read (a chunk past its new end, an id outside the
vocabulary) and by :meth:`TokenFileDataset.changed` (its size), each an
:class:`~core.errors.InputChanged`: the trainer ends the run with one line and exit code 2,
its last checkpoint intact and the summary written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from core.errors import InputChanged, UserInputError
from core.validation import ParameterError, check_fraction, check_int
from empirical.data.common import _VAL, _require_path
from empirical.data.token_scan import check_not_wider, scan_file, scan_token_ids, stat_token_file
from empirical.token_cache import TOKEN_DTYPES, token_dtype_for

__all__ = ["TOKEN_DTYPES", "TokenFileDataset", "resolve_token_dtype", "scan_token_ids"]

_SHORT = {"u16": "uint16", "u32": "uint32", "i32": "int32", "i64": "int64"}
#: the two files of a directory ``--data-path`` (nanoGPT's names)
SPLIT_FILES = {"train": "train.bin", "val": "val.bin"}
#: what the messages of a file changed under a running job advise
_RESTORE = "restore the file (or start a new run) and continue with --resume auto"


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


def _whole_ids(path: str, dtype: str, size: int) -> int:
    """The number of ids of a file of ``size`` bytes (refused if not whole, or empty)."""
    width = np.dtype(dtype).itemsize
    if size % width:
        raise UserInputError(
            f"token file '{path}' has {size} bytes, not a whole number of {dtype} ids "
            f"({width} bytes each): check --token-dtype"
        )
    if size == 0:
        raise UserInputError(f"token file '{path}' is empty (0 bytes)")
    return size // width


class TokenFileDataset(Dataset):
    """Chunks of ``seq_len`` ids of ``path`` from id ``start`` on (``chunks`` of them).

    Build through :func:`empirical.data.build_dataset` (``name="tokens"``), which checks the
    file; the attributes ``task = "lm"`` and ``vocab_size`` are what the trainer reads.
    ``size`` and ``mtime_ns``: the file's, when it was checked (0 and 0: read them now).
    """

    task = "lm"

    def __init__(
        self,
        path: str,
        dtype: str,
        start: int,
        chunks: int,
        seq_len: int,
        vocab_size: int,
        size: int = 0,
        mtime_ns: int = 0,
    ):
        self.path, self.dtype = str(path), dtype
        self.start, self.chunks, self.seq_len = int(start), int(chunks), int(seq_len)
        self.vocab_size = int(vocab_size)
        if not size:
            st = os.stat(self.path)
            size, mtime_ns = st.st_size, st.st_mtime_ns
        self.size, self.mtime_ns = int(size), int(mtime_ns)
        self.rewritten_noted = False
        self._fd: int | None = None

    def __len__(self) -> int:
        return self.chunks

    def _read(self, offset: int, nbytes: int) -> bytes:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                raise InputChanged(
                    f"token file '{self.path}' (--data-path) cannot be opened any more "
                    f"({exc.strerror}): it was removed or replaced during the run; {_RESTORE}"
                ) from None
        return os.pread(self._fd, nbytes, offset)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < self.chunks:
            raise IndexError(i)
        width = np.dtype(self.dtype).itemsize
        lo = (self.start + i * self.seq_len) * width
        buf = self._read(lo, self.seq_len * width)
        if len(buf) < self.seq_len * width:
            now = os.fstat(self._fd).st_size if self._fd is not None else 0
            raise InputChanged(
                f"token file '{self.path}' (--data-path) was truncated during the run: it had "
                f"{self.size} bytes when checked, now {now}; {_RESTORE}"
            )
        ids = np.frombuffer(buf, dtype=self.dtype).astype(np.int64)
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= self.vocab_size:
            bad = low if low < 0 else high
            where = lo // width + int(np.argmax(ids == bad))
            raise InputChanged(
                f"token file '{self.path}' (--data-path) now holds id {bad} (position "
                f"{where}), outside the vocabulary of {self.vocab_size} ids: it was rewritten "
                f"during the run (its ids were checked at the start); {_RESTORE}"
            )
        t = torch.from_numpy(ids)
        return {"input_ids": t, "labels": t.clone(), "attention_mask": torch.ones_like(t)}

    def changed(self) -> str | None:
        """Why the file no longer is the one checked at the start (its size differs, or it
        is gone), or None. A rewrite of the same size is noted once on stderr (the ids are
        still checked as they are read)."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            return (
                f"token file '{self.path}' (--data-path) is gone during the run "
                f"({exc.strerror}); {_RESTORE}"
            )
        if st.st_size != self.size:
            return (
                f"token file '{self.path}' (--data-path) changed size during the run: "
                f"{self.size} bytes when checked, now {st.st_size}; {_RESTORE}"
            )
        if st.st_mtime_ns != self.mtime_ns and not self.rewritten_noted:
            self.rewritten_noted = True
            if os.environ.get("RANK", "0") == "0":
                print(
                    f"warning: token file '{self.path}' (--data-path) was modified during the "
                    "run (same size); its ids are checked as they are read",
                    file=sys.stderr,
                )
        return None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fd": None}

    def __del__(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _split_file(root: str, split: str) -> str:
    name = SPLIT_FILES["val" if split == _VAL else "train"]
    file = os.path.join(root, name)
    if not os.path.lexists(file):
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
    st = stat_token_file(file)
    n_ids = _whole_ids(file, dtype, st.st_size)
    check_not_wider(file, dtype)
    lo, hi, where = scan_file(file, dtype, st)
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
    total = n_ids // seq_len
    start, chunks = 0, total
    if one_file:
        f = check_fraction("val_fraction", val_fraction, allow_zero=False, allow_one=False)
        n_val = int(round(f * total))
        start, chunks = (total - n_val, n_val) if split == _VAL else (0, total - n_val)
        start *= seq_len
    if chunks < 1:
        raise UserInputError(
            f"the {'validation' if split == _VAL else 'training'} split of token file '{file}' "
            f"({n_ids} ids) holds no chunk of --seq-len {seq_len} tokens: use a longer "
            "file or a shorter --seq-len"
        )
    return TokenFileDataset(
        file, dtype, start, chunks, seq_len, vocab_size, st.st_size, st.st_mtime_ns
    )
