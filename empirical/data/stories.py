"""``tinystories``: one story per item, tokenised on access or from a token cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from core.errors import UserInputError
from core.validation import check_fraction
from empirical.data.common import _TRAIN, _VAL, IGNORE_INDEX, _require_path, rng_of
from empirical.data.story_files import _open_stories, _resolve_story_file
from empirical.token_cache import token_cache
from empirical.tokenizer import Tokenizer


class StoryDataset(Dataset):
    """One document (story) per item, tokenised on access, truncated/padded to ``seq_len``.

    Default: ``input_ids`` = tokens of the story followed by EOS, truncated to ``seq_len``,
    then padded with the tokenizer's pad id (EOS for the byte tokenizer and GPT-2 BPE);
    ``attention_mask`` 1 on real tokens; ``labels`` = ``input_ids`` with -100 on padding, so
    the loss covers every real token and the end-of-story token but no padding.

    ``authors_padding=True`` reproduces the authors' data module (reference Q13): no EOS is
    appended, padding is EOS, and ``labels = input_ids`` including the padding, so the loss
    also averages over pad positions.
    """

    task = "lm"

    def __init__(
        self,
        source: Any,
        indices: np.ndarray,
        seq_len: int,
        tokenizer: Tokenizer,
        *,
        authors_padding: bool = False,
        add_eos: bool = True,
    ):
        self.source = source
        self.indices = np.asarray(indices, dtype=np.int64)
        self.seq_len = seq_len
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.authors_padding = bool(authors_padding)
        self.add_eos = bool(add_eos) and not self.authors_padding

    def __len__(self) -> int:
        return len(self.indices)

    def text(self, i: int) -> str:
        return self.source.get(int(self.indices[i]))

    def _ids(self, i: int) -> list[int]:
        """Token ids of item ``i`` (end-of-story token appended when ``add_eos``)."""
        ids = self.tokenizer.encode(self.text(i))
        if self.add_eos:
            ids.append(self.tokenizer.eos_token_id)
        return ids

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        tok = self.tokenizer
        ids = self._ids(i)[: self.seq_len]
        n = len(ids)
        pad = tok.eos_token_id if self.authors_padding else tok.pad_token_id
        # built in numpy and wrapped once: a few microseconds per item instead of several
        # torch calls (the item construction dominated the data time of a step)
        input_ids = np.full(self.seq_len, pad, dtype=np.int64)
        input_ids[:n] = ids
        mask = np.zeros(self.seq_len, dtype=np.int64)
        mask[:n] = 1
        labels = input_ids.copy()
        if not self.authors_padding:
            labels[n:] = IGNORE_INDEX
        return {
            "input_ids": torch.from_numpy(input_ids),
            "labels": torch.from_numpy(labels),
            "attention_mask": torch.from_numpy(mask),
        }


class PretokenizedStoryDataset(StoryDataset):
    """:class:`StoryDataset` whose token ids come from a :class:`~empirical.token_cache.
    TokenCache` (the same items, tokenised once instead of at every access)."""

    def __init__(
        self,
        source: Any,
        cache: Any,
        indices: np.ndarray,
        seq_len: int,
        tokenizer: Tokenizer,
        **kw: Any,
    ):
        super().__init__(source, indices, seq_len, tokenizer, **kw)
        self.cache = cache

    def _ids(self, i: int) -> Any:
        return self.cache.ids(int(self.indices[i]))


def _tinystories(
    path: str | None,
    split: str,
    seq_len: int,
    tokenizer: Tokenizer,
    seed: int,
    authors_padding: bool = False,
    holdout: float | None = None,
    text_field: str | None = None,
    fraction: float = 1.0,
    add_eos: bool = True,
    pretokenize: bool = False,
) -> StoryDataset:
    p = _require_path(
        path,
        "a TinyStories file (.txt with <|endoftext|> separators, .jsonl "
        "with a text field) or a directory holding the split files",
    )
    src_split = _TRAIN if holdout is not None else split
    file = _resolve_story_file(p, src_split)
    source = _open_stories(file, text_field, src_split)
    n = len(source)
    if n == 0:
        raise UserInputError(
            f"no stories found in '{file}': expected non-empty stories "
            "separated by <|endoftext|> lines or JSON records with text"
        )
    idx = np.arange(n, dtype=np.int64)
    if holdout is not None:
        # The authors' protocol: shuffle the train split with a seed, hold out a fraction as
        # validation (datasets' train_test_split(test_size=0.1)); kept in file order here.
        h = check_fraction("holdout", holdout, allow_zero=False, allow_one=False)
        perm = rng_of(seed, 0x401D).permutation(n)
        n_val = max(1, round(h * n))
        idx = np.sort(perm[:n_val] if split == _VAL else perm[n_val:])
    f = check_fraction("fraction", fraction, allow_zero=False, allow_one=True)
    if f < 1:
        keep = max(1, round(f * len(idx)))
        idx = np.sort(rng_of(seed, 0xF4AC).choice(idx, size=keep, replace=False))
    eos = bool(add_eos) and not authors_padding
    if pretokenize:
        cache = token_cache(source, file, tokenizer, add_eos=eos)
        return PretokenizedStoryDataset(
            source,
            cache,
            idx,
            seq_len,
            tokenizer,
            authors_padding=authors_padding,
            add_eos=add_eos,
        )
    return StoryDataset(
        source, idx, seq_len, tokenizer, authors_padding=authors_padding, add_eos=add_eos
    )
