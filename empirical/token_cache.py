"""Pre-tokenised TinyStories: every story tokenised once into a memory-mapped token file.

Tokenising on the fly costs most of the data time of a GPT-Neo step (the authors' loaders
do it in the training process); :func:`token_cache` tokenises a story file once, with a
progress bar, into two files next to it::

    STORIES.tokens-KEY.bin    the tokens of every story, back to back (uint16, or uint32
                              for vocabularies above 65,536)
    STORIES.tokens-KEY.idx    int64 offsets, one per story plus the end (numpy .npy)

``KEY`` hashes what the tokens depend on: the story file (path, size, modification time),
the tokenizer (its description, vocabulary size and the ids of a fixed probe text) and
whether an end-of-story token is appended; any change makes a new cache. Both files are
written to temporary names and moved into place, so concurrent ranks or an interrupted
run never leave a partial cache. :class:`TokenCache` reads them with ``numpy.memmap``
(nothing loaded up front; DataLoader workers re-open the map after pickling).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserInputError

__all__ = ["TokenCache", "token_cache", "cache_key", "token_dtype_for", "TOKEN_DTYPES"]

#: the integer dtypes a file of token ids may hold (``palsgd train --token-dtype``)
TOKEN_DTYPES = ("uint16", "uint32", "int32", "int64")

_PROBE = 'Once upon a time, 12 cats <|endoftext|> said: "Hi!"\n\u00e9\u4e16'


def token_dtype_for(vocab_size: int) -> str:
    """The narrowest unsigned dtype for ids below ``vocab_size``: ``uint16`` up to 65,536
    ids, ``uint32`` above."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def cache_key(path: str | os.PathLike, tokenizer: Any, add_eos: bool) -> str:
    """12 hex digits identifying the tokens of ``path`` under ``tokenizer``."""
    st = os.stat(path)
    probe = tokenizer.encode(_PROBE)
    text = "|".join(
        [
            str(Path(path).resolve()),
            str(st.st_size),
            str(st.st_mtime_ns),
            repr(tokenizer),
            str(tokenizer.vocab_size),
            ",".join(map(str, probe)),
            str(bool(add_eos)),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class TokenCache:
    """Random access to the token ids of story ``i`` (a numpy view of the memory map)."""

    def __init__(self, bin_path: str | os.PathLike, idx_path: str | os.PathLike, dtype: str):
        self.bin_path, self.idx_path, self.dtype = str(bin_path), str(idx_path), dtype
        self.offsets = np.load(self.idx_path, allow_pickle=False)
        self._tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            n = int(self.offsets[-1])
            # a plain ndarray over the map: slicing an np.memmap is several times slower
            self._tokens = (
                np.memmap(self.bin_path, dtype=self.dtype, mode="r", shape=(n,)).view(np.ndarray)
                if n
                else np.zeros(0, dtype=self.dtype)
            )
        return self._tokens

    def ids(self, i: int) -> np.ndarray:
        """Tokens of story ``i`` (end-of-story token included when the cache has it)."""
        return self.tokens[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}


def token_cache(source: Any, path: str | os.PathLike, tokenizer: Any, add_eos: bool) -> TokenCache:
    """The cache of every story of ``source`` (read from file ``path``), built if absent.

    ``source`` has ``len()`` and ``get(i) -> str`` (the TinyStories readers of
    :mod:`empirical.data`). Raises :class:`UserInputError` when the directory of ``path``
    cannot hold the cache.
    """
    key = cache_key(path, tokenizer, add_eos)
    base = Path(path)
    bin_path = base.with_name(f"{base.name}.tokens-{key}.bin")
    idx_path = base.with_name(f"{base.name}.tokens-{key}.idx")
    dtype = token_dtype_for(tokenizer.vocab_size)
    if bin_path.is_file() and idx_path.is_file():
        return TokenCache(bin_path, idx_path, dtype)
    n = len(source)
    offsets = np.zeros(n + 1, dtype=np.int64)
    tmp_bin = bin_path.with_name(f".{bin_path.name}.tmp{os.getpid()}")
    tmp_idx = idx_path.with_name(f".{idx_path.name}.tmp{os.getpid()}.npy")
    eos = tokenizer.eos_token_id
    from tqdm.auto import tqdm  # lazy: ~0.1 s (asyncio), not for `palsgd train --help`

    try:
        with open(tmp_bin, "wb") as fh:
            for i in tqdm(
                range(n),
                desc=f"tokenising {base.name}",
                unit="story",
                leave=False,
                disable=n < 10_000,
            ):
                ids = tokenizer.encode(source.get(i))
                if add_eos:
                    ids.append(eos)
                fh.write(np.asarray(ids, dtype=dtype).tobytes())
                offsets[i + 1] = offsets[i] + len(ids)
        np.save(tmp_idx, offsets)
        os.replace(tmp_bin, bin_path)
        os.replace(tmp_idx, idx_path)
    except OSError as exc:
        for tmp in (tmp_bin, tmp_idx):
            tmp.unlink(missing_ok=True)
        raise UserInputError(
            f"cannot write the token cache next to '{path}' ({exc.strerror or exc}); "
            "make its directory writable or run without --pretokenize"
        ) from None
    return TokenCache(bin_path, idx_path, dtype)
