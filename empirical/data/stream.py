""":class:`BatchStream`: an endless, resumable per-rank stream of batches across epochs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import DataLoader, Dataset

from core.errors import UserInputError
from core.validation import check_int
from empirical.data.sharding import dataset_shard, index_loader, make_loader
from theory.validation import validate_one


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
    #: the attributes passed on to :func:`dataset_shard` (all but the epoch)
    _SHARDING = ("rank", "world_size", "seed", "shuffle", "drop_last", "iid")
    #: the attributes passed on to the DataLoader's workers
    _WORKERS = ("num_workers", "pin_memory", "collate_fn")

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

    def _sharding(self) -> dict[str, Any]:
        """The arguments of :func:`dataset_shard` other than the epoch."""
        return {k: getattr(self, k) for k in self._SHARDING}

    def _workers(self) -> dict[str, Any]:
        """The DataLoader's worker arguments."""
        return {k: getattr(self, k) for k in self._WORKERS}

    def _loader(self) -> DataLoader:
        if self._persistent:
            return self._persistent_loader()
        return make_loader(
            self.dataset,
            batch_size=self.batch_size,
            epoch=self.epoch,
            start_index=self.index,
            **self._sharding(),
            **self._workers(),
        )

    def _persistent_loader(self) -> DataLoader:
        """One DataLoader with ``persistent_workers`` whose sampler gets this epoch's
        remaining indices (the same order as :func:`make_loader`'s)."""
        rest = list(dataset_shard(self.dataset, epoch=self.epoch, **self._sharding())[self.index :])
        if self._dl is None:
            self._dl = index_loader(
                self.dataset,
                rest,
                batch_size=self.batch_size,
                drop_last=self.drop_last,
                persistent=True,
                **self._workers(),
            )
        else:
            self._dl.sampler.indices = rest
        return self._dl

    def _config(self) -> dict[str, Any]:
        return {
            **self._sharding(),
            "batch_size": self.batch_size,
            "num_samples": len(self.dataset),
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
