"""Datasets of the paper's experiments and deterministic, resumable per-rank batch streams.

Datasets (:func:`build_dataset`; nothing is downloaded, every file is local):

* ``embedded-text``: English text shipped with Python (``pydoc_data.topics``, about 0.46 M
  characters of the language reference; module docstrings of the standard library if that
  module is missing), byte-level tokens (:class:`empirical.tokenizer.ByteTokenizer`) or a local
  tokenizer, cut into fixed chunks of ``seq_len`` tokens.
* ``tinystories``: local TinyStories files: the released text files (stories separated by
  ``<|endoftext|>``, e.g. ``TinyStories-train.txt`` / ``TinyStories-valid.txt``), JSON lines
  with a ``text`` field, JSON arrays (the ``data00.json`` shards, field ``story``), or a
  dataset saved with ``datasets.save_to_disk`` (needs the optional ``datasets`` package).
* ``embedded-images``: a generated, deterministic 10-class 32x32 RGB task (shapes and
  textures with random position, size, colours and pixel noise).
* ``cifar10``: the CIFAR-10 python pickle batches (``data_batch_1..5``, ``test_batch``).
* ``imagefolder``: ImageNet-style ``root/{train,val}/<class>/<image>`` read with PIL.

Batches: language-model items are dicts of ``input_ids``, ``labels`` (aligned with the
inputs, -100 on ignored positions; :func:`empirical.models.compute_loss` shifts them) and
``attention_mask``, all of length ``seq_len``; image items are ``(x, y)`` with ``x`` a
normalised float tensor (3, S, S).

Sharding (:func:`shard_indices`, :func:`make_loader`, :class:`BatchStream`): with ``iid=True``
rank r of K reads the same indices as ``torch.utils.data.DistributedSampler`` with the same
``seed``, ``drop_last`` and ``set_epoch(epoch)``: a permutation of all indices drawn from
``torch.Generator().manual_seed(seed + epoch)``, cut (``drop_last``) or padded by wrap-around
to a multiple of K, and every K-th element from position r. With ``iid=False`` each rank owns
a fixed block of the data (heterogeneous workers): image datasets are sorted by label (ties
in a seeded random order), language-model datasets keep their text order, so a rank gets a
contiguous region of the corpus; the block is reshuffled each epoch with a seed that depends
on ``(seed, epoch, rank)``.

Random augmentations draw from a generator seeded by ``(dataset seed, loader seed, epoch,
sample index)``, so a batch depends only on the stream position, never on worker processes or
global RNG state: a stream resumed from :meth:`BatchStream.state_dict` yields exactly the
batches the uninterrupted stream would have.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import pickle
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

from empirical.tokenizer import Tokenizer, load_tokenizer
from theory.validation import (
    ParameterError,
    UserInputError,
    check_fraction,
    check_int,
    validate_one,
)

__all__ = [
    "DATASET_NAMES",
    "IGNORE_INDEX",
    "build_dataset",
    "TokenChunkDataset",
    "StoryDataset",
    "TensorImageDataset",
    "ImageFolderDataset",
    "embedded_corpus",
    "render_shapes",
    "load_cifar10",
    "shard_indices",
    "make_loader",
    "BatchStream",
]

DATASET_NAMES: tuple[str, ...] = (
    "embedded-text",
    "tinystories",
    "embedded-images",
    "cifar10",
    "imagefolder",
)

IGNORE_INDEX = -100
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)  # per-channel mean of the CIFAR-10 training images
CIFAR10_STD = (0.2470, 0.2435, 0.2616)  # per-channel std of the CIFAR-10 training images
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_TRAIN, _VAL = "train", "val"
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


# ----------------------------------------------------------------------------- helpers


def _seed_of(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (numpy SeedSequence hashing)."""
    state = np.random.SeedSequence([int(p) & 0xFFFFFFFFFFFFFFFF for p in parts])
    return int(state.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def _rng(*parts: int) -> np.random.Generator:
    return np.random.default_rng(
        np.random.SeedSequence([int(p) & 0xFFFFFFFFFFFFFFFF for p in parts])
    )


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
        raise UserInputError(f"path '{p}' does not exist: expected {what}")
    return p


# ----------------------------------------------------------------------------- text


def embedded_corpus() -> list[str]:
    """English documents shipped with Python, in a fixed order.

    ``pydoc_data.topics.topics`` (the language reference's help topics, sorted by topic name);
    if that module is absent, the docstrings of a fixed list of standard-library modules.
    """
    try:
        from pydoc_data.topics import topics

        docs = [topics[k].strip() for k in sorted(topics)]
    except ImportError:
        import importlib

        docs = []
        for mod in (
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
        ):
            try:
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


# ---- TinyStories sources: random access to the i-th story without loading every story


class _MappedFile:
    """Lazily memory-mapped file; re-opened after pickling (DataLoader worker processes)."""

    def __init__(self, path: str):
        self.path = path
        self._mm: mmap.mmap | None = None
        self._pid = -1

    def view(self) -> mmap.mmap:
        if self._mm is None or self._pid != os.getpid():
            with open(self.path, "rb") as fh:
                self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self._pid = os.getpid()
        return self._mm

    def __getstate__(self) -> dict:
        return {"path": self.path, "_mm": None, "_pid": -1}


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(
        total=total, desc=desc, unit="B", unit_scale=True, disable=total < (64 << 20), leave=False
    )


class _SeparatedStories:
    """The non-blank pieces of a memory-mapped file between separators ``SEP``.

    Indexing records each piece's byte offsets ``[starts[i], ends[i])`` (separator excluded);
    pieces of white space only are skipped. Subclasses set ``SEP`` and decode a piece.
    """

    SEP: bytes

    def __init__(self, path: str):
        self.path = path
        self.file = _MappedFile(path)
        size = os.path.getsize(path)
        sep = self.SEP
        starts, ends = [], []
        if size:
            mm = self.file.view()
            pos = 0
            with _progress(size, f"indexing {os.path.basename(path)}") as bar:
                while pos <= size:
                    cut = mm.find(sep, pos)
                    end = size if cut < 0 else cut
                    if mm[pos:end].strip():
                        starts.append(pos)
                        ends.append(end)
                    bar.update(min(end + len(sep), size) - pos)
                    if cut < 0:
                        break
                    pos = cut + len(sep)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def _raw(self, i: int) -> bytes:
        """The bytes of piece ``i`` (separator and nothing else stripped)."""
        return self.file.view()[int(self.starts[i]) : int(self.ends[i])]


class _TextStories(_SeparatedStories):
    """Stories separated by the literal ``<|endoftext|>`` (TinyStories ``*.txt`` release)."""

    SEP = b"<|endoftext|>"

    def get(self, i: int) -> str:
        return self._raw(i).decode("utf-8", errors="replace").strip()


class _JsonLinesStories(_SeparatedStories):
    """One JSON object per line with a text field."""

    SEP = b"\n"

    def __init__(self, path: str, field: str | None):
        super().__init__(path)
        self.field = field
        if len(self):
            self.field = _pick_field(self._record(0), field, path)

    def _record(self, i: int) -> Any:
        raw = self._raw(i)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise UserInputError(
                f"'{self.path}': line at byte {int(self.starts[i])} is not valid JSON ({exc}); "
                "expected one JSON object per line with a text field"
            ) from None

    def get(self, i: int) -> str:
        rec = self._record(i)
        if not isinstance(rec, dict) or not isinstance(rec.get(self.field), str):
            raise UserInputError(
                f"'{self.path}': record at byte {int(self.starts[i])} has no "
                f"string field '{self.field}'"
            )
        return rec[self.field].strip()


def _pick_field(record: Any, field: str | None, path: str) -> str:
    if not isinstance(record, dict):
        raise UserInputError(
            f"'{path}': expected JSON objects with a text field, found {type(record).__name__}"
        )
    for name in [field] if field else ["text", "story"]:
        if isinstance(record.get(name), str):
            return name
    raise UserInputError(
        f"'{path}': records have no string field "
        f"{repr(field) if field else 'text or story'}; fields present: {sorted(record)}"
    )


class _ListStories:
    """Stories held in memory (JSON arrays, saved HF datasets)."""

    def __init__(self, texts: Sequence[str]):
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def get(self, i: int) -> str:
        return str(self.texts[i]).strip()


def _json_array(path: str, field: str | None) -> _ListStories:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except ValueError as exc:
        raise UserInputError(
            f"'{path}' is not valid JSON ({exc}): expected a JSON array of "
            "objects with a text field, or JSON lines"
        ) from None
    if not isinstance(data, list):
        raise UserInputError(
            f"'{path}': expected a JSON array of objects, found {type(data).__name__}"
        )
    if not data:
        return _ListStories([])
    if all(isinstance(x, str) for x in data):
        return _ListStories(data)
    name = _pick_field(data[0], field, path)
    texts = []
    for k, rec in enumerate(data):
        if not isinstance(rec, dict) or not isinstance(rec.get(name), str):
            raise UserInputError(f"'{path}': element {k} has no string field '{name}'")
        texts.append(rec[name])
    return _ListStories(texts)


def _hf_saved(path: str, split: str, field: str | None) -> _ListStories:
    try:
        import datasets  # optional dependency
    except ImportError:
        raise UserInputError(
            f"'{path}' is a saved Hugging Face dataset, which needs the optional package "
            "'datasets' (pip install datasets); or export it to JSON lines"
        ) from None
    obj = datasets.load_from_disk(path)
    if isinstance(obj, datasets.DatasetDict):
        names = ["train"] if split == _TRAIN else ["validation", "valid", "val", "test"]
        found = [n for n in names if n in obj]
        if not found:
            raise UserInputError(f"'{path}' has splits {sorted(obj)}: none matches '{split}'")
        obj = obj[found[0]]
    name = field or ("text" if "text" in obj.column_names else "story")
    if name not in obj.column_names:
        raise UserInputError(f"'{path}': no column '{name}'; columns: {obj.column_names}")
    return _ListStories(obj[name])


def _open_stories(path: str, field: str | None, split: str):
    if os.path.isdir(path):
        return _hf_saved(path, split, field)
    low = path.lower()
    if low.endswith(".jsonl"):
        return _JsonLinesStories(path, field)
    if low.endswith(".json"):
        with open(path, "rb") as fh:
            head = fh.read(4096).lstrip()
        if head.startswith(b"["):
            return _json_array(path, field)
        return _JsonLinesStories(path, field)
    if low.endswith(".txt"):
        return _TextStories(path)
    raise UserInputError(
        f"'{path}': unsupported TinyStories file type; expected .txt (stories separated by "
        "<|endoftext|>), .jsonl/.json (objects with a text field) or a saved datasets directory"
    )


def _resolve_story_file(path: str, split: str) -> str:
    """A file path, or the split's file inside a directory (or the directory itself if saved
    with ``datasets``)."""
    if not os.path.isdir(path):
        return path
    marks = ("dataset_dict.json", "dataset_info.json", "state.json")
    if any(os.path.exists(os.path.join(path, m)) for m in marks):
        return path
    keys = ("train",) if split == _TRAIN else ("valid", "val", "test")
    files = sorted(
        f
        for f in os.listdir(path)
        if f.lower().endswith((".txt", ".jsonl", ".json"))
        and any(k in os.path.splitext(f)[0].lower() for k in keys)
        and os.path.isfile(os.path.join(path, f))
    )
    if len(files) == 1:
        return os.path.join(path, files[0])
    if not files:
        raise UserInputError(
            f"no {split} file in directory '{path}': expected e.g. TinyStories-"
            f"{'train' if split == _TRAIN else 'valid'}.txt, {split}.jsonl, or a directory "
            "saved with datasets.save_to_disk"
        )
    raise UserInputError(
        f"several {split} files in '{path}' ({', '.join(files)}): pass the file itself as path"
    )


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
        perm = _rng(seed, 0x401D).permutation(n)
        n_val = max(1, round(h * n))
        idx = np.sort(perm[:n_val] if split == _VAL else perm[n_val:])
    f = check_fraction("fraction", fraction, allow_zero=False, allow_one=True)
    if f < 1:
        keep = max(1, round(f * len(idx)))
        idx = np.sort(_rng(seed, 0xF4AC).choice(idx, size=keep, replace=False))
    eos = bool(add_eos) and not authors_padding
    if pretokenize:
        from empirical.token_cache import token_cache

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


# ----------------------------------------------------------------------------- images


def _normalise(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    m = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
    return (x.float().div(255.0) - m) / s


def random_crop_flip(x: torch.Tensor, rng: np.random.Generator, pad: int = 4) -> torch.Tensor:
    """Zero-pad by ``pad`` pixels, crop back to the original size at a random offset, and flip
    horizontally with probability 1/2 (the standard CIFAR augmentation, He et al. 2016 sec. 4.2).
    """
    _, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad))
    i, j = rng.integers(0, 2 * pad + 1, size=2)
    out = xp[:, i : i + h, j : j + w]
    if rng.random() < 0.5:
        out = out.flip(-1)
    return out


class TensorImageDataset(Dataset):
    """Images held in memory as uint8 ``(N, 3, H, W)`` with integer labels.

    ``sample(i, epoch, salt)`` applies the optional augmentation (random crop with 4-pixel
    zero padding + horizontal flip) with a generator seeded by ``(seed, salt, epoch, i)``,
    resizes to ``image_size`` (bilinear) if that differs from the stored size, scales to
    [0, 1] and normalises per channel. ``dataset[i]`` is ``sample(i, 0, 0)``.
    """

    task = "image"

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        *,
        mean: Sequence[float],
        std: Sequence[float],
        augment: bool = False,
        image_size: int | None = None,
        seed: int = 0,
        classes: Sequence[str] | None = None,
    ):
        if images.dtype != torch.uint8 or images.ndim != 4:
            raise UserInputError(
                f"images must be uint8 (N, C, H, W), got {images.dtype} {tuple(images.shape)}"
            )
        self.images = images
        self.labels = labels.to(torch.long)
        self.mean, self.std = tuple(mean), tuple(std)
        self.augment = bool(augment)
        self.image_size = image_size
        self.seed = seed
        self.num_classes = int(len(classes)) if classes is not None else int(self.labels.max()) + 1
        self.classes = (
            list(classes) if classes is not None else [str(c) for c in range(self.num_classes)]
        )

    def __len__(self) -> int:
        return self.images.shape[0]

    def sample(self, i: int, epoch: int = 0, salt: int = 0) -> tuple[torch.Tensor, int]:
        x = self.images[i]
        if self.augment:
            x = random_crop_flip(x, _rng(self.seed, salt, epoch, i))
        x = _normalise(x, self.mean, self.std)
        if self.image_size is not None and x.shape[-1] != self.image_size:
            x = F.interpolate(
                x[None],
                size=(self.image_size, self.image_size),
                mode="bilinear",
                align_corners=False,
            )[0]
        return x, int(self.labels[i])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.sample(i)


EMBEDDED_IMAGE_CLASSES = (
    "disk",
    "square",
    "ring",
    "horizontal-bars",
    "vertical-bars",
    "diagonal-stripes",
    "cross",
    "triangle",
    "checkerboard",
    "two-dots",
)


def _stripes(t: torch.Tensor, period: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
    return torch.sin(2 * math.pi * t / period + phase) > 0


def render_shapes(
    n: int, seed: int, *, size: int = 32, noise: float = 0.1, chunk: int = 512
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generate ``n`` labelled images of the 10-class shape task (uint8 (n, 3, size, size)).

    Class c draws the shape ``EMBEDDED_IMAGE_CLASSES[c]`` at a random centre (within 20% of
    the middle), random radius (20%-38% of the size), random stripe period/phase, in a random
    foreground colour on a random background colour (per-channel contrast of at least 0.3),
    plus Gaussian pixel noise of std ``noise``. Colour and position carry no label information;
    only shape and texture do. Labels are balanced (each class n/10 +- 1) and shuffled.
    Deterministic in ``seed``.
    """
    g = torch.Generator().manual_seed(_seed_of(seed, 0x5A9E5))
    labels = torch.arange(n) % 10
    labels = labels[torch.randperm(n, generator=g)]
    out = torch.empty((n, 3, size, size), dtype=torch.uint8)
    coords = torch.arange(size, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    for s in range(0, n, chunk):
        m = min(chunk, n - s)

        def u(lo: float, hi: float, m: int = m) -> torch.Tensor:
            return (lo + (hi - lo) * torch.rand(m, generator=g)).view(m, 1, 1)

        cx, cy = u(0.4, 0.6) * size, u(0.4, 0.6) * size
        r = u(0.2, 0.38) * size
        period = u(3.0, 6.0)
        phase = u(0.0, 2 * math.pi)
        dx, dy = xx - cx, yy - cy
        dist = torch.sqrt(dx * dx + dy * dy)
        box = (dx.abs() <= r) & (dy.abs() <= r)
        cell = torch.floor(dx / (period * 0.8)) + torch.floor(dy / (period * 0.8))
        masks = torch.stack(
            [
                dist <= r,
                (dx.abs() <= 0.8 * r) & (dy.abs() <= 0.8 * r),
                (dist <= r) & (dist >= 0.55 * r),
                box & _stripes(yy, period, phase),
                box & _stripes(xx, period, phase),
                box & _stripes((xx + yy) / math.sqrt(2), period, phase),
                ((dx.abs() <= r / 3.5) & (dy.abs() <= r))
                | ((dy.abs() <= r / 3.5) & (dx.abs() <= r)),
                (dy <= 0.8 * r) & (dy >= -r) & (dx.abs() <= 0.55 * (dy + r)),
                box & (torch.remainder(cell, 2) == 0),
                (torch.sqrt((dx - r / 2) ** 2 + dy**2) <= r / 2.5)
                | (torch.sqrt((dx + r / 2) ** 2 + dy**2) <= r / 2.5),
            ],
            dim=1,
        )  # (m, 10, size, size)
        lab = labels[s : s + m]
        mask = masks[torch.arange(m), lab].unsqueeze(1).float()  # (m, 1, size, size)
        bg = torch.rand(m, 3, 1, 1, generator=g)
        shift = 0.3 + 0.4 * torch.rand(m, 3, 1, 1, generator=g)
        fg = torch.remainder(bg + shift, 1.0)
        img = bg * (1 - mask) + fg * mask
        img = img + noise * torch.randn(m, 3, size, size, generator=g)
        out[s : s + m] = (img.clamp(0, 1) * 255).round().to(torch.uint8)
    return out, labels


def _embedded_images(
    split: str,
    seed: int,
    image_size: int | None,
    n: int | None = None,
    noise: float = 0.1,
    augment: bool = False,
) -> TensorImageDataset:
    n = check_int("n", n if n is not None else (10000 if split == _TRAIN else 2000), low=1)
    try:
        noise_v = float(noise)
    except (TypeError, ValueError):
        noise_v = math.nan
    if not (math.isfinite(noise_v) and noise_v >= 0):
        raise ParameterError("noise", noise, "[0, inf)")
    images, labels = render_shapes(n, _seed_of(seed, 0 if split == _TRAIN else 1), noise=noise_v)
    return TensorImageDataset(
        images,
        labels,
        mean=(0.5, 0.5, 0.5),
        std=(0.25, 0.25, 0.25),
        augment=augment,
        image_size=image_size,
        seed=seed,
        classes=EMBEDDED_IMAGE_CLASSES,
    )


def _read_cifar_batch(file: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(file, "rb") as fh:
            d = pickle.load(fh, encoding="bytes")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise UserInputError(
            f"'{file}' is not a CIFAR-10 python pickle batch ({exc}): expected "
            "a dict with b'data' (N, 3072) uint8 and b'labels'"
        ) from None
    if not isinstance(d, dict):
        raise UserInputError(
            f"'{file}': expected a dict with b'data' and b'labels', found {type(d).__name__}"
        )
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise UserInputError(
            f"'{file}': missing key b'data' or b'labels' (keys: {sorted(map(str, d))})"
        )
    data = np.asarray(data)
    labels = np.asarray(labels, dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise UserInputError(
            f"'{file}': b'data' must be uint8 of shape (N, 3072), got {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],) or (labels.size and (labels.min() < 0 or labels.max() > 9)):
        raise UserInputError(f"'{file}': b'labels' must be {data.shape[0]} integers in [0, 9]")
    return data, labels


def load_cifar10(path: str, split: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Read CIFAR-10 python batches from ``path`` (the ``cifar-10-batches-py`` folder or its
    parent): ``data_batch_1..5`` for train, ``test_batch`` for val.

    Returns uint8 images (N, 3, 32, 32), labels (N,) and the class names (from
    ``batches.meta`` if present).
    """
    root = path
    if not os.path.exists(os.path.join(root, "test_batch")) and not os.path.exists(
        os.path.join(root, "data_batch_1")
    ):
        sub = os.path.join(path, "cifar-10-batches-py")
        if os.path.isdir(sub):
            root = sub
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == _TRAIN else ["test_batch"]
    files = [os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n))]
    if not files:
        raise UserInputError(
            f"no CIFAR-10 {split} batch in '{path}': expected "
            f"{', '.join(names)} (python pickle format)"
        )
    if split == _TRAIN and len(files) < 5:
        warnings.warn(
            f"'{root}' holds only {len(files)} of the 5 CIFAR-10 training batches", stacklevel=3
        )
    parts = [_read_cifar_batch(f) for f in files]
    data = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    classes = [str(i) for i in range(10)]
    meta = os.path.join(root, "batches.meta")
    if os.path.isfile(meta):
        try:
            with open(meta, "rb") as fh:
                m = pickle.load(fh, encoding="bytes")
            names_ = m.get(b"label_names", m.get("label_names"))
            if names_ is not None and len(names_) == 10:
                classes = [n.decode() if isinstance(n, bytes) else str(n) for n in names_]
        except (pickle.UnpicklingError, EOFError, AttributeError, ValueError):
            pass
    images = torch.from_numpy(data.reshape(-1, 3, 32, 32).copy())
    return images, torch.from_numpy(labels), classes


def _cifar10(
    path: str | None,
    split: str,
    seed: int,
    image_size: int | None,
    augment: bool | None = None,
    mean: Sequence[float] = CIFAR10_MEAN,
    std: Sequence[float] = CIFAR10_STD,
) -> TensorImageDataset:
    p = _require_path(
        path,
        "the CIFAR-10 python folder (cifar-10-batches-py with data_batch_1"
        "..5 and test_batch) or its parent",
    )
    images, labels, classes = load_cifar10(p, split)
    aug = (split == _TRAIN) if augment is None else bool(augment)
    return TensorImageDataset(
        images,
        labels,
        mean=mean,
        std=std,
        augment=aug,
        image_size=image_size,
        seed=seed,
        classes=classes,
    )


def random_resized_crop_box(
    width: int,
    height: int,
    rng: np.random.Generator,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[int, int, int, int]:
    """Box (left, top, right, bottom) of the Inception-style random crop (Szegedy et al.
    2015): area fraction uniform in ``scale``, aspect ratio log-uniform in ``ratio``; up to
    10 tries, then the largest centred crop with a clamped aspect ratio."""
    area = width * height
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        ar = math.exp(rng.uniform(lo, hi))
        w = int(round(math.sqrt(target * ar)))
        h = int(round(math.sqrt(target / ar)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        w, h = int(round(height * ratio[1])), height
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


class ImageFolderDataset(Dataset):
    """ImageNet-style folder ``root/<split>/<class>/<image>`` read with PIL.

    Classes are the sorted sub-directory names of ``root/train`` (or of ``root/<split>`` if
    there is no train folder), so train and val labels agree. Train items (``augment``):
    random resized crop to ``image_size`` (scale 0.08-1, ratio 3/4-4/3) + horizontal flip;
    val items: resize the shorter side to ``resize_size`` (default ``image_size * 256/224``)
    and centre-crop ``image_size``. Normalised with the ImageNet mean/std.
    """

    task = "image"

    def __init__(
        self,
        root: str,
        split: str,
        *,
        image_size: int = 224,
        augment: bool | None = None,
        seed: int = 0,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        resize_size: int | None = None,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ):
        folder_name = (
            "train"
            if split == _TRAIN
            else next(
                (
                    n
                    for n in ("val", "validation", "valid", "test")
                    if os.path.isdir(os.path.join(root, n))
                ),
                "val",
            )
        )
        folder = os.path.join(root, folder_name)
        if not os.path.isdir(folder):
            raise UserInputError(
                f"'{folder}' is not a directory: expected "
                f"{root}/{{train,val}}/<class>/<image files>"
            )
        class_root = (
            os.path.join(root, "train") if os.path.isdir(os.path.join(root, "train")) else folder
        )
        self.classes = sorted(
            d for d in os.listdir(class_root) if os.path.isdir(os.path.join(class_root, d))
        )
        if not self.classes:
            raise UserInputError(
                f"no class sub-directories in '{class_root}': expected <class>/<image files>"
            )
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        files, labels = [], []
        for c in sorted(os.listdir(folder)):
            d = os.path.join(folder, c)
            if not os.path.isdir(d):
                continue
            if c not in self.class_to_idx:
                raise UserInputError(f"class '{c}' of '{folder}' is not a class of '{class_root}'")
            for dirpath, _, names in sorted(os.walk(d)):
                for f in sorted(names):
                    if f.lower().endswith(_IMAGE_SUFFIXES):
                        files.append(os.path.join(dirpath, f))
                        labels.append(self.class_to_idx[c])
        if not files:
            raise UserInputError(f"no image files ({', '.join(_IMAGE_SUFFIXES)}) under '{folder}'")
        self.files = files
        self.labels = torch.tensor(labels, dtype=torch.long)
        self.num_classes = len(self.classes)
        self.image_size = check_int("image_size", image_size, low=1)
        self.resize_size = (
            check_int("resize_size", resize_size, low=self.image_size)
            if resize_size is not None
            else int(round(self.image_size * 256 / 224))
        )
        self.augment = (split == _TRAIN) if augment is None else bool(augment)
        self.seed = seed
        self.scale, self.ratio = tuple(scale), tuple(ratio)
        self.mean, self.std = tuple(mean), tuple(std)

    def __len__(self) -> int:
        return len(self.files)

    def _open(self, file: str):
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(file) as im:
                return im.convert("RGB")
        except (UnidentifiedImageError, OSError) as exc:
            raise UserInputError(f"cannot read image '{file}': {exc}") from None

    def sample(self, i: int, epoch: int = 0, salt: int = 0) -> tuple[torch.Tensor, int]:
        from PIL import Image

        img = self._open(self.files[i])
        s = self.image_size
        if self.augment:
            rng = _rng(self.seed, salt, epoch, i)
            box = random_resized_crop_box(img.width, img.height, rng, self.scale, self.ratio)
            img = img.resize((s, s), Image.BILINEAR, box=box)
            if rng.random() < 0.5:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
        else:
            w, h = img.size
            r = self.resize_size
            nw, nh = (r, max(1, int(r * h / w))) if w <= h else (max(1, int(r * w / h)), r)
            img = img.resize((nw, nh), Image.BILINEAR)
            left, top = int(round((nw - s) / 2)), int(round((nh - s) / 2))
            img = img.crop((left, top, left + s, top + s))
        x = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1)
        return _normalise(x, self.mean, self.std), int(self.labels[i])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.sample(i)


# ----------------------------------------------------------------------------- factory

_KWARGS: dict[str, tuple[str, ...]] = {
    "embedded-text": ("val_fraction",),
    "tinystories": (
        "authors_padding",
        "holdout",
        "text_field",
        "fraction",
        "add_eos",
        "pretokenize",
    ),
    "embedded-images": ("n", "noise", "augment"),
    "cifar10": ("augment", "mean", "std"),
    "imagefolder": ("augment", "scale", "ratio", "resize_size", "mean", "std"),
}


def build_dataset(
    name: str,
    *,
    path: str | os.PathLike | None = None,
    split: str = "train",
    seq_len: int = 64,
    tokenizer: Any = None,
    image_size: int | None = None,
    seed: int = 0,
    **kw: Any,
) -> Dataset:
    """Build one split of a dataset (see the module docstring for the formats).

    Args:
        name: one of :data:`DATASET_NAMES`.
        path: local file or folder (``tinystories``, ``cifar10``, ``imagefolder``).
        split: ``"train"`` or ``"val"`` (``valid``, ``validation``, ``test`` are aliases).
        seq_len: tokens per language-model item (the model's context must be >= seq_len).
        tokenizer: ``None``/``"byte"`` (:class:`ByteTokenizer`), a local HF tokenizer
            directory, or a tokenizer object (language-model datasets).
        image_size: output side in pixels (default: 32 for the 32x32 datasets, 224 for
            ``imagefolder``).
        seed: data seed: generation of ``embedded-images``, the ``holdout``/``fraction``
            subsets of ``tinystories``, and the augmentation streams.
        kw: dataset options: ``embedded-text``: ``val_fraction`` (0.1, by document);
            ``tinystories``: ``authors_padding`` (False), ``holdout`` (None: use the split's
            file; 0.1: the authors' 90/10 split of the train file), ``text_field``
            (``text``/``story``), ``fraction`` (seeded subset, 1.0), ``add_eos`` (True),
            ``pretokenize`` (False: tokenise on access; True: once, into a memory-mapped
            cache next to the file, :mod:`empirical.token_cache`);
            ``embedded-images``: ``n`` (10000 train / 2000 val), ``noise`` (0.1),
            ``augment`` (False); ``cifar10``: ``augment`` (train only), ``mean``, ``std``;
            ``imagefolder``: ``augment``, ``scale``, ``ratio``, ``resize_size``, ``mean``,
            ``std``.

    The result has ``task`` ("lm" or "image") and ``vocab_size`` or ``num_classes``.
    """
    if name not in DATASET_NAMES:
        raise UserInputError(
            f"unknown dataset '{name}': known datasets are {', '.join(DATASET_NAMES)}"
        )
    unknown = sorted(set(kw) - set(_KWARGS[name]))
    if unknown:
        raise UserInputError(
            f"unknown option(s) {unknown} for dataset '{name}': allowed are {list(_KWARGS[name])}"
        )
    split = _split(split)
    seed = check_int("seed", seed, low=0)
    if name in ("embedded-text", "tinystories"):
        seq_len = check_int("seq_len", seq_len, low=2)
        tok = load_tokenizer(tokenizer)
        if name == "embedded-text":
            return _embedded_text(split, seq_len, tok, **kw)
        return _tinystories(path, split, seq_len, tok, seed, **kw)
    if image_size is not None:
        image_size = check_int("image_size", image_size, low=1)
    if name == "embedded-images":
        return _embedded_images(split, seed, image_size, **kw)
    if name == "cifar10":
        return _cifar10(path, split, seed, image_size, **kw)
    root = _require_path(path, "an ImageNet-style root with train/ and val/ class folders")
    return ImageFolderDataset(root, split, image_size=image_size or 224, seed=seed, **kw)


# ----------------------------------------------------------------------------- sharding


def _partition_keys(dataset: Dataset) -> np.ndarray | None:
    labels = getattr(dataset, "labels", None)
    if labels is None:
        labels = getattr(dataset, "targets", None)
    if labels is None:
        return None
    return np.asarray(labels.cpu() if torch.is_tensor(labels) else labels)


def shard_indices(
    num_samples: int,
    *,
    rank: int,
    world_size: int,
    seed: int,
    epoch: int = 0,
    shuffle: bool = True,
    drop_last: bool = True,
    iid: bool = True,
    keys: np.ndarray | None = None,
) -> list[int]:
    """Dataset indices read by ``rank`` in ``epoch``, in order.

    ``iid=True``: the ``DistributedSampler`` recipe (see module docstring): ranks get disjoint
    index sets that together cover ``K * floor(N/K)`` samples (``drop_last``) or all N
    samples with the first ``ceil(N/K) K - N`` of the permutation repeated.

    ``iid=False``: indices ordered by ``keys`` (stable; ties in a random order fixed by
    ``seed``), or in index order when ``keys`` is None; rank r owns the r-th contiguous block
    of ``floor(N/K)`` (``drop_last``) or ``ceil(N/K)`` (wrapping around) indices, the same in
    every epoch, visited in an order reshuffled per epoch (``shuffle``).
    """
    n = check_int("num_samples", num_samples, low=0)
    k = int(validate_one("world_size", world_size))
    r = check_int("rank", rank, low=0, high=k - 1)
    epoch = check_int("epoch", epoch, low=0)
    seed = check_int("seed", seed, low=0)
    if n == 0:
        return []
    per = n // k if drop_last else -(-n // k)
    if iid:
        if shuffle:
            g = torch.Generator().manual_seed(seed + epoch)
            order = torch.randperm(n, generator=g).tolist()
        else:
            order = list(range(n))
        total = per * k
        if total > n:
            order = (order * -(-total // n))[:total]
        return order[:total][r::k]
    if keys is None:
        base = np.arange(n)
    else:
        keys = np.asarray(keys)
        if keys.shape != (n,):
            raise UserInputError(f"partition keys have shape {keys.shape}, expected ({n},)")
        tie = _rng(seed, 0x7E7E).permutation(n)
        base = tie[np.argsort(keys[tie], kind="stable")]
    block = np.take(base, np.arange(r * per, (r + 1) * per), mode="wrap")
    if shuffle:
        block = block[_rng(seed, epoch, r, 0xB10C).permutation(len(block))]
    return block.tolist()


class _ListSampler(Sampler[int]):
    """Yields ``indices`` (replaceable between epochs: a persistent DataLoader keeps it)."""

    def __init__(self, indices: list[int]):
        self.indices = indices

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


class _EpochView(Dataset):
    """Passes (epoch, loader seed) to a dataset whose items use random augmentation."""

    def __init__(self, base: Any, epoch: int, salt: int):
        self.base, self.epoch, self.salt = base, epoch, salt

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> Any:
        return self.base.sample(i, self.epoch, self.salt)


def make_loader(
    dataset: Dataset,
    *,
    batch_size: int,
    rank: int,
    world_size: int,
    seed: int,
    epoch: int = 0,
    start_index: int = 0,
    shuffle: bool = True,
    drop_last: bool = True,
    iid: bool = True,
    num_workers: int = 0,
    pin_memory: bool = False,
    collate_fn: Callable | None = None,
) -> DataLoader:
    """DataLoader over ``rank``'s shard of ``dataset`` in ``epoch`` (see :func:`shard_indices`).

    ``start_index`` skips the first samples of the shard already consumed in this epoch, so a
    run resumed with the same arguments reads exactly the remaining batches. ``drop_last``
    both evens the shards (as in ``DistributedSampler``) and drops an incomplete last batch.
    Augmented datasets (with a ``sample(i, epoch, salt)`` method) receive ``epoch`` and
    ``seed``, so their random crops/flips are reproducible in any worker process.
    """
    batch_size = check_int("batch_size", batch_size, low=1)
    idx = shard_indices(
        len(dataset),
        rank=rank,
        world_size=world_size,
        seed=seed,
        epoch=epoch,
        shuffle=shuffle,
        drop_last=drop_last,
        iid=iid,
        keys=None if iid else _partition_keys(dataset),
    )
    start_index = check_int("start_index", start_index, low=0, high=len(idx))
    num_workers = check_int("num_workers", num_workers, low=0)
    ds = _EpochView(dataset, epoch, seed) if hasattr(dataset, "sample") else dataset
    return DataLoader(
        ds,
        batch_size=batch_size,
        sampler=_ListSampler(idx[start_index:]),
        drop_last=drop_last,
        num_workers=num_workers,
        pin_memory=pin_memory,
        collate_fn=collate_fn,
    )


class BatchStream:
    """Endless, resumable stream of ``rank``'s batches across epochs.

    ``next(stream)`` returns the next batch; at the end of an epoch the stream moves to the
    next epoch (new permutation / augmentation draws). ``state_dict()`` is
    ``{"epoch", "index"}`` (``index`` = samples of this rank's shard consumed in the epoch)
    plus the configuration it is valid for; ``load_state_dict`` restores the position so the
    following batches equal those of the uninterrupted stream. Loading a state saved with a
    different configuration (seed, rank, world size, batch size, dataset size, sharding mode)
    raises :class:`UserInputError`.
    """

    _CONFIG = (
        "seed",
        "rank",
        "world_size",
        "batch_size",
        "num_samples",
        "iid",
        "shuffle",
        "drop_last",
    )

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int,
        rank: int,
        world_size: int,
        seed: int,
        *,
        iid: bool = True,
        shuffle: bool = True,
        drop_last: bool = True,
        num_workers: int = 0,
        pin_memory: bool = False,
        collate_fn: Callable | None = None,
        epoch: int = 0,
    ):
        self.dataset = dataset
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.world_size = int(validate_one("world_size", world_size))
        self.rank = check_int("rank", rank, low=0, high=self.world_size - 1)
        self.seed = check_int("seed", seed, low=0)
        self.iid, self.shuffle, self.drop_last = bool(iid), bool(shuffle), bool(drop_last)
        self.num_workers, self.pin_memory, self.collate_fn = num_workers, pin_memory, collate_fn
        # worker processes kept across epochs when the items do not depend on the epoch
        self._persistent = num_workers > 0 and not hasattr(dataset, "sample")
        self._dl: DataLoader | None = None
        self.epoch = check_int("epoch", epoch, low=0)
        self.index = 0
        self._it: Iterator | None = None
        n = len(dataset)
        self.shard_size = (n // self.world_size) if drop_last else -(-n // self.world_size)
        if self.batches_per_epoch == 0:
            raise UserInputError(
                f"rank {self.rank}'s shard has {self.shard_size} samples ({n} samples over "
                f"{self.world_size} ranks): not one batch of batch_size = {self.batch_size}"
            )

    @property
    def batches_per_epoch(self) -> int:
        """Batches this rank reads per epoch."""
        full, rest = divmod(self.shard_size, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> BatchStream:
        return self

    def __next__(self) -> Any:
        while True:
            if self._it is None:
                self._it = iter(self._loader())
            try:
                batch = next(self._it)
            except StopIteration:
                # End of this rank's epoch: every epoch holds at least one batch (checked in
                # __init__), so the loop turns over at most once.
                self.epoch += 1
                self.index = 0
                self._it = None
                continue
            self.index += min(self.batch_size, self.shard_size - self.index)
            return batch

    next = __next__

    def _loader(self) -> DataLoader:
        if self._persistent:
            return self._persistent_loader()
        return make_loader(
            self.dataset,
            batch_size=self.batch_size,
            rank=self.rank,
            world_size=self.world_size,
            seed=self.seed,
            epoch=self.epoch,
            start_index=self.index,
            shuffle=self.shuffle,
            drop_last=self.drop_last,
            iid=self.iid,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            collate_fn=self.collate_fn,
        )

    def _persistent_loader(self) -> DataLoader:
        """One DataLoader with ``persistent_workers`` whose sampler gets this epoch's
        remaining indices (the same order as :func:`make_loader`'s)."""
        idx = shard_indices(
            len(self.dataset),
            rank=self.rank,
            world_size=self.world_size,
            seed=self.seed,
            epoch=self.epoch,
            shuffle=self.shuffle,
            drop_last=self.drop_last,
            iid=self.iid,
            keys=None if self.iid else _partition_keys(self.dataset),
        )
        rest = list(idx[self.index :])
        if self._dl is None:
            self._dl = DataLoader(
                self.dataset,
                batch_size=self.batch_size,
                sampler=_ListSampler(rest),
                drop_last=self.drop_last,
                num_workers=self.num_workers,
                pin_memory=self.pin_memory,
                collate_fn=self.collate_fn,
                persistent_workers=True,
            )
        else:
            self._dl.sampler.indices = rest
        return self._dl

    def _config(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "rank": self.rank,
            "world_size": self.world_size,
            "batch_size": self.batch_size,
            "num_samples": len(self.dataset),
            "iid": self.iid,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
        }

    def state_dict(self) -> dict[str, Any]:
        """Position (``epoch``, ``index``) and the configuration it refers to (JSON-safe)."""
        return {"epoch": self.epoch, "index": self.index, **self._config()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at a saved position; the configuration must match."""
        mine = self._config()
        for key in self._CONFIG:
            if key in state and state[key] != mine[key]:
                raise UserInputError(
                    f"batch-stream state has {key} = {state[key]!r} but this stream has "
                    f"{key} = {mine[key]!r}: the saved data order does not apply"
                )
        self.epoch = check_int("epoch", state.get("epoch"), low=0)
        self.index = check_int("index", state.get("index"), low=0, high=self.shard_size)
        self._it = None
