"""The pre-tokenised TinyStories cache and the persistent-worker batch stream."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from empirical.data import BatchStream, PretokenizedStoryDataset, build_dataset

STORIES = [
    f"Story {i}: a cat named Tom{'!' * (i % 7)} went " + "far " * (i % 13) for i in range(60)
]


def _file(tmp_path):
    f = tmp_path / "TinyStories-train.txt"
    f.write_text("\n<|endoftext|>\n".join(STORIES) + "\n")
    return f


@pytest.mark.parametrize("authors_padding", [False, True])
def test_pretokenized_items_equal_the_tokenised_on_access_ones(tmp_path, authors_padding):
    f = _file(tmp_path)
    kw = dict(path=str(f), seq_len=24, authors_padding=authors_padding, fraction=0.5, seed=1)
    plain = build_dataset("tinystories", **kw)
    cached = build_dataset("tinystories", pretokenize=True, **kw)
    assert isinstance(cached, PretokenizedStoryDataset) and len(cached) == len(plain)
    for i in range(len(plain)):
        a, b = plain[i], cached[i]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len([n for n in files if ".tokens-" in n]) == 2 and not any(".tmp" in n for n in files)
    # a second build reuses the cache; a changed file gets a new one
    again = build_dataset("tinystories", pretokenize=True, **kw)
    assert again.cache.bin_path == cached.cache.bin_path
    f.write_text("\n<|endoftext|>\n".join(STORIES[::-1]) + "\n")
    other = build_dataset("tinystories", pretokenize=True, **kw)
    assert other.cache.bin_path != cached.cache.bin_path
    # picklable for DataLoader workers (the memory map is re-opened)
    clone = pickle.loads(pickle.dumps(other))
    assert torch.equal(clone[3]["input_ids"], other[3]["input_ids"])


def test_cache_dtype_and_offsets(tmp_path):
    ds = build_dataset("tinystories", path=str(_file(tmp_path)), seq_len=8, pretokenize=True)
    c = ds.cache
    assert c.tokens.dtype == np.uint16 and len(c) == len(STORIES)
    assert int(c.offsets[-1]) == c.tokens.shape[0]


def test_persistent_worker_stream_equals_the_in_process_stream(tmp_path):
    ds = build_dataset("tinystories", path=str(_file(tmp_path)), seq_len=8, pretokenize=True)
    a = BatchStream(ds, 4, rank=0, world_size=1, seed=2)
    b = BatchStream(ds, 4, rank=0, world_size=1, seed=2, num_workers=1)
    n = 2 * a.batches_per_epoch + 3  # across two epoch boundaries
    for _ in range(n):
        x, y = next(a), next(b)
        assert torch.equal(x["input_ids"], y["input_ids"])
    assert b._dl is not None and b._dl.persistent_workers
    state = b.state_dict()
    c = BatchStream(ds, 4, rank=0, world_size=1, seed=2, num_workers=1)
    c.load_state_dict(state)
    assert torch.equal(next(c)["input_ids"], next(a)["input_ids"])
