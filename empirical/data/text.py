"""``embedded-text``: English text shipped with Python, tokenised and cut into chunks."""

from __future__ import annotations

import importlib

import torch
from torch.utils.data import Dataset

from core.validation import ParameterError, check_fraction
from empirical.data.common import _VAL
from empirical.tokenizer import Tokenizer

#: standard-library modules whose docstrings stand in when ``pydoc_data`` is missing
_DOC_MODULES = (
    "abc",
    "argparse",
    "collections",
    "contextlib",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "functools",
    "heapq",
    "inspect",
    "itertools",
    "json",
    "logging",
    "os",
    "pathlib",
    "pickle",
    "random",
    "re",
    "shutil",
    "statistics",
    "string",
    "subprocess",
    "textwrap",
    "threading",
    "typing",
    "unittest",
)


def _pydoc_topics() -> list[str] | None:
    """The language reference's help topics sorted by name; None if ``pydoc_data`` is absent
    (some Python builds leave it out)."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        return None
    return [topics[k].strip() for k in sorted(topics)]


def _stdlib_docstrings() -> list[str]:
    """Docstrings longer than 200 characters of :data:`_DOC_MODULES` and their members."""
    docs = []
    for mod in _DOC_MODULES:
        try:  # the standard library's modules as data (their docstrings), named by a list
            m = importlib.import_module(mod)
        except ImportError:
            continue
        for obj in [m, *[getattr(m, a) for a in sorted(dir(m)) if not a.startswith("_")]]:
            doc = getattr(obj, "__doc__", None)
            if (
                isinstance(doc, str)
                and len(doc) > 200
                and getattr(obj, "__module__", mod) in (mod, None)
            ):
                docs.append(doc.strip())
    return docs


def embedded_corpus() -> list[str]:
    """English documents shipped with Python, in a fixed order.

    ``pydoc_data.topics.topics`` (the language reference's help topics, sorted by topic name);
    if that module is absent, the docstrings of a fixed list of standard-library modules.
    """
    docs = _pydoc_topics()
    if docs is None:
        docs = _stdlib_docstrings()
    return list(dict.fromkeys(d for d in docs if d))  # non-empty, duplicates removed


class TokenChunkDataset(Dataset):
    """A token stream cut into non-overlapping chunks of ``seq_len`` tokens.

    Item ``i`` is tokens ``[i*seq_len, (i+1)*seq_len)`` with ``labels = input_ids`` (every
    position after the first is a target) and an all-ones ``attention_mask``. The tail shorter
    than ``seq_len`` is dropped. Chunks are in text order.
    """

    task = "lm"

    def __init__(self, tokens: torch.Tensor, seq_len: int, tokenizer: Tokenizer):
        self.seq_len = seq_len
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        n = tokens.numel() // seq_len
        self.chunks = tokens[: n * seq_len].reshape(n, seq_len).to(torch.long)

    def __len__(self) -> int:
        return self.chunks.shape[0]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.chunks[i]
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}


def _embedded_text(
    split: str, seq_len: int, tokenizer: Tokenizer, val_fraction: float = 0.1
) -> TokenChunkDataset:
    docs = embedded_corpus()
    f = check_fraction("val_fraction", val_fraction, allow_zero=False, allow_one=False)
    # Deterministic, seed-free split by document: walking the documents in order, a document
    # goes to validation whenever the validation share of the characters seen so far is below
    # val_fraction. Both splits are spread over the whole corpus and validation holds about
    # val_fraction of the characters.
    chosen, seen, held = [], 0, 0
    for d in docs:
        to_val = held < f * seen
        if to_val == (split == _VAL):
            chosen.append(d)
        held += len(d) if to_val else 0
        seen += len(d)
    ids: list[int] = []
    for d in chosen:
        ids.extend(tokenizer.encode(d))
        ids.append(tokenizer.eos_token_id)
    ds = TokenChunkDataset(torch.tensor(ids, dtype=torch.long), seq_len, tokenizer)
    if len(ds) == 0:
        raise ParameterError("seq_len", seq_len, f"at most {len(ids)} tokens for this split")
    return ds
