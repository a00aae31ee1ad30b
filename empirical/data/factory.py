""":func:`build_dataset`: one split of a dataset by name, with its options checked."""

from __future__ import annotations

import os
from typing import Any

from torch.utils.data import Dataset

from core.errors import UserInputError
from core.validation import check_int
from empirical.data.cifar import _cifar10
from empirical.data.common import _require_path, _split
from empirical.data.imagefolder import ImageFolderDataset
from empirical.data.images import _embedded_images
from empirical.data.names import DATASET_NAMES
from empirical.data.stories import _tinystories
from empirical.data.text import _embedded_text
from empirical.data.token_file import _token_file
from empirical.tokenizer import load_tokenizer

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
    "tokens": ("token_dtype", "vocab_size", "val_fraction"),
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
        path: local file or folder (``tinystories``, ``tokens``, ``cifar10``,
            ``imagefolder``).
        split: ``"train"`` or ``"val"`` (``valid``, ``validation``, ``test`` are aliases).
        seq_len: tokens per language-model item (the model's context must be >= seq_len).
        tokenizer: ``None``/``"byte"`` (:class:`ByteTokenizer`), a local HF tokenizer
            directory, or a tokenizer object (language-model datasets). ``tokens`` reads
            only its ``vocab_size``, and only when no ``vocab_size`` is given.
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
            ``tokens`` (:mod:`empirical.data.token_file`): ``token_dtype`` (``"auto"``),
            ``vocab_size`` (the model's vocabulary the ids must fit; default: the
            tokenizer's), ``val_fraction`` (0.1, one-file data paths only);
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
    if name in ("embedded-text", "tinystories", "tokens"):
        seq_len = check_int("seq_len", seq_len, low=2)
        if name == "tokens":
            vocab = kw.pop("vocab_size", None)
            if vocab is None:
                vocab = load_tokenizer(tokenizer).vocab_size
            return _token_file(path, split, seq_len, vocab, **kw)
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
