"""Which indices each rank reads per epoch (:func:`shard_indices`) and its DataLoader."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from core.errors import UserInputError
from core.validation import check_int
from empirical.data.common import rng_of
from theory.validation import validate_one


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
        tie = rng_of(seed, 0x7E7E).permutation(n)
        base = tie[np.argsort(keys[tie], kind="stable")]
    block = np.take(base, np.arange(r * per, (r + 1) * per), mode="wrap")
    if shuffle:
        block = block[rng_of(seed, epoch, r, 0xB10C).permutation(len(block))]
    return block.tolist()


def dataset_shard(dataset: Dataset, epoch: int = 0, **sharding: Any) -> list[int]:
    """:func:`shard_indices` of ``dataset`` in ``epoch``; ``sharding`` holds its other
    arguments (``rank``, ``world_size``, ``seed``, ``shuffle``, ``drop_last``, ``iid``).
    Non-i.i.d. blocks follow the dataset's labels (``labels`` or ``targets``) when it has
    them, its index order otherwise."""
    keys = None if sharding.get("iid", True) else _partition_keys(dataset)
    return shard_indices(len(dataset), epoch=epoch, keys=keys, **sharding)


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


def index_loader(
    dataset: Dataset, indices: list[int], *, persistent: bool = False, **loader_kw: Any
) -> DataLoader:
    """DataLoader reading ``indices`` in order (its sampler's ``indices`` can be replaced
    between epochs; ``persistent`` keeps the worker processes across them). ``loader_kw``:
    the DataLoader's ``batch_size``, ``drop_last``, ``num_workers``, ``pin_memory``,
    ``collate_fn``."""
    return DataLoader(
        dataset, sampler=_ListSampler(indices), persistent_workers=persistent, **loader_kw
    )


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
    sharding = {"rank": rank, "world_size": world_size, "seed": seed, "iid": iid}
    idx = dataset_shard(dataset, epoch, shuffle=shuffle, drop_last=drop_last, **sharding)
    start_index = check_int("start_index", start_index, low=0, high=len(idx))
    num_workers = check_int("num_workers", num_workers, low=0)
    ds = _EpochView(dataset, epoch, seed) if hasattr(dataset, "sample") else dataset
    return index_loader(
        ds,
        idx[start_index:],
        batch_size=batch_size,
        drop_last=drop_last,
        num_workers=num_workers,
        pin_memory=pin_memory,
        collate_fn=collate_fn,
    )
