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
* ``tokens``: a user's corpus as a flat binary file of token ids (``uint16``, ``uint32``,
  ``int32`` or ``int64``, no header; one file, or a directory with ``train.bin`` and
  ``val.bin``), memory-mapped, cut into chunks of ``seq_len`` ids
  (:mod:`empirical.data.token_file`).
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

Files:

* ``common.py``: the ignore label, split names, seeded generators (:func:`seed_of`,
  :func:`rng_of`) and path checks shared by the datasets.
* ``text.py``: ``embedded-text`` (:func:`embedded_corpus`, :class:`TokenChunkDataset`).
* ``story_files.py``: TinyStories file formats, indexed for random access.
* ``stories.py``: ``tinystories`` (:class:`StoryDataset`, :class:`PretokenizedStoryDataset`).
* ``token_file.py``: ``tokens`` (:class:`TokenFileDataset`, :data:`TOKEN_DTYPES`).
* ``images.py``: :class:`TensorImageDataset`, augmentation and ``embedded-images``
  (:func:`render_shapes`).
* ``cifar.py``: ``cifar10`` (:func:`load_cifar10`).
* ``imagefolder.py``: ``imagefolder`` (:class:`ImageFolderDataset`).
* ``factory.py``: :data:`DATASET_NAMES` and :func:`build_dataset`.
* ``sharding.py``: :func:`shard_indices`, :func:`dataset_shard`, :func:`make_loader`.
* ``stream.py``: :class:`BatchStream`.
"""

__all__ = [
    "DATASET_NAMES",
    "IGNORE_INDEX",
    "build_dataset",
    "TokenChunkDataset",
    "TokenFileDataset",
    "TOKEN_DTYPES",
    "StoryDataset",
    "PretokenizedStoryDataset",
    "TensorImageDataset",
    "ImageFolderDataset",
    "EMBEDDED_IMAGE_CLASSES",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "embedded_corpus",
    "render_shapes",
    "random_crop_flip",
    "random_resized_crop_box",
    "load_cifar10",
    "seed_of",
    "rng_of",
    "shard_indices",
    "dataset_shard",
    "make_loader",
    "BatchStream",
]

from core.lazy import lazy_exports

# lazy (core.lazy): `palsgd train --help` reads DATASET_NAMES (empirical.data.names)
# without importing torch, which the loaders need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.data.cifar": (
            "CIFAR10_MEAN",
            "CIFAR10_STD",
            "load_cifar10",
        ),
        "empirical.data.common": (
            "IGNORE_INDEX",
            "rng_of",
            "seed_of",
        ),
        "empirical.data.factory": ("build_dataset",),
        "empirical.data.names": ("DATASET_NAMES",),
        "empirical.data.imagefolder": (
            "IMAGENET_MEAN",
            "IMAGENET_STD",
            "ImageFolderDataset",
            "random_resized_crop_box",
        ),
        "empirical.data.images": (
            "EMBEDDED_IMAGE_CLASSES",
            "TensorImageDataset",
            "random_crop_flip",
            "render_shapes",
        ),
        "empirical.data.sharding": (
            "dataset_shard",
            "make_loader",
            "shard_indices",
        ),
        "empirical.data.stories": (
            "PretokenizedStoryDataset",
            "StoryDataset",
        ),
        "empirical.data.stream": ("BatchStream",),
        "empirical.data.text": (
            "TokenChunkDataset",
            "embedded_corpus",
        ),
        "empirical.data.token_file": (
            "TOKEN_DTYPES",
            "TokenFileDataset",
        ),
    },
)
