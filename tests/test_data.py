"""Tests of empirical.data and empirical.tokenizer on small fixtures written to tmp_path."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

from core.errors import UserInputError
from core.validation import ParameterError
from empirical import data
from empirical.data import (
    DATASET_NAMES,
    BatchStream,
    build_dataset,
    make_loader,
    random_resized_crop_box,
    render_shapes,
    shard_indices,
)
from empirical.tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer

torch.set_num_threads(1)

# ----------------------------------------------------------------------------- tokenizer


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_byte_tokenizer_round_trips(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert all(0 <= i < 256 for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(ids + [tok.eos_token_id]) == text


def test_byte_tokenizer_specials_and_errors():
    tok = ByteTokenizer()
    assert tok.vocab_size == 257 and tok.eos_token_id == tok.pad_token_id == 256
    # the separator string in a text is data, not the special id
    assert 256 not in tok.encode("a<|endoftext|>b")
    assert tok.decode([104, 256, 105], skip_special_tokens=False) == "h<|endoftext|>i"
    with pytest.raises(UserInputError, match="257"):
        tok.decode([257])
    with pytest.raises(UserInputError, match="not a directory"):
        load_tokenizer("/nonexistent/tokenizer")
    with pytest.raises(UserInputError, match="not usable"):
        load_tokenizer(42)


def _save_word_tokenizer(path, words):
    """A local word-level HF tokenizer (no download): vocabulary = words + specials."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "<|endoftext|>": 1}
    for w in words:
        vocab.setdefault(w, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", eos_token="<|endoftext|>"
    )
    fast.save_pretrained(str(path))
    return vocab


def test_local_hf_tokenizer_directory(tmp_path):
    vocab = _save_word_tokenizer(tmp_path / "tok", ["once", "upon", "a", "time", "."])
    tok = load_tokenizer(str(tmp_path / "tok"))
    assert isinstance(tok, HFTokenizer)
    assert tok.vocab_size == len(vocab)
    assert tok.eos_token_id == tok.pad_token_id == vocab["<|endoftext|>"]
    assert tok.encode("once upon a time") == [vocab[w] for w in ("once", "upon", "a", "time")]
    # used by a dataset: stories tokenised with it, padded with its EOS
    f = tmp_path / "s.txt"
    f.write_text("once upon a time .\n<|endoftext|>\nupon a time\n")
    ds = build_dataset("tinystories", path=str(f), seq_len=8, tokenizer=str(tmp_path / "tok"))
    assert ds.vocab_size == len(vocab)
    item = ds[1]
    assert item["input_ids"][:4].tolist() == [
        vocab["upon"],
        vocab["a"],
        vocab["time"],
        vocab["<|endoftext|>"],
    ]
    assert item["labels"][4:].tolist() == [-100] * 4


# ----------------------------------------------------------------------------- text


def test_embedded_text_chunks_and_split():
    tr = build_dataset("embedded-text", seq_len=48)
    va = build_dataset("embedded-text", split="validation", seq_len=48)
    assert tr.task == "lm" and tr.vocab_size == 257
    item = tr[3]
    assert set(item) == {"input_ids", "labels", "attention_mask"}
    assert item["input_ids"].shape == (48,) and torch.equal(item["labels"], item["input_ids"])
    assert bool(item["attention_mask"].all())
    # deterministic, and about 10% of the text held out
    again = build_dataset("embedded-text", seq_len=48)
    assert torch.equal(tr.chunks, again.chunks)
    share = len(va) / (len(tr) + len(va))
    assert 0.07 < share < 0.13
    # the held-out documents are not in the training stream: the only chunks found in both
    # are repeated boilerplate (table borders, traceback headers), a small share
    train_rows = {tuple(r) for r in tr.chunks.tolist()}
    overlap = sum(tuple(r) in train_rows for r in va.chunks.tolist())
    assert overlap <= 0.03 * len(va)
    docs = data.embedded_corpus()
    assert len(docs) == len(set(docs))
    text = tr.tokenizer.decode(tr.chunks[:20].flatten().tolist())
    assert sum(c.isalpha() for c in text) > 0.5 * len(text)  # English, not noise
    with pytest.raises(ParameterError, match="val_fraction"):
        build_dataset("embedded-text", val_fraction=1.5)


# ----------------------------------------------------------------------------- tinystories

STORIES = [
    "Once upon a time there was a cat.\nIt liked milk.",
    "Tom saw a big dög. He ran!",
    ("The end of a very long story. " * 6).strip(),
    "Lily smiled.",
]


def _write_txt(path, stories):
    text = "\n".join(s + "\n<|endoftext|>" for s in stories)
    path.write_text("\n\n" + text + "\n   \n", encoding="utf-8")


def test_tinystories_text_release_format(tmp_path):
    f = tmp_path / "TinyStories-train.txt"
    _write_txt(f, STORIES)
    ds = build_dataset("tinystories", path=str(f), seq_len=40)
    assert len(ds) == len(STORIES)
    assert [ds.text(i) for i in range(len(ds))] == STORIES
    tok = ByteTokenizer()
    # short story: bytes + EOS, then EOS padding that is masked and ignored
    item = ds[3]
    n = len(tok.encode(STORIES[3])) + 1
    assert item["input_ids"][:n].tolist() == tok.encode(STORIES[3]) + [256]
    assert item["input_ids"][n:].tolist() == [256] * (40 - n)
    assert item["attention_mask"].tolist() == [1] * n + [0] * (40 - n)
    assert item["labels"][:n].tolist() == item["input_ids"][:n].tolist()
    assert item["labels"][n:].tolist() == [-100] * (40 - n)
    # long story: truncated, no padding
    long_item = ds[2]
    assert long_item["input_ids"].tolist() == tok.encode(STORIES[2])[:40]
    assert bool(long_item["attention_mask"].all())


def test_tinystories_authors_padding(tmp_path):
    f = tmp_path / "s.txt"
    _write_txt(f, STORIES)
    ds = build_dataset("tinystories", path=str(f), seq_len=40, authors_padding=True)
    item = ds[3]
    n = len(STORIES[3].encode())
    assert item["input_ids"][:n].tolist() == ByteTokenizer().encode(STORIES[3])  # no EOS added
    # labels = input_ids including the EOS padding (the authors' loss averages over pads)
    assert torch.equal(item["labels"], item["input_ids"])
    assert item["labels"][n:].tolist() == [256] * (40 - n)
    assert item["attention_mask"].sum().item() == n


def test_tinystories_directory_jsonl_json_and_holdout(tmp_path):
    _write_txt(tmp_path / "TinyStories-train.txt", STORIES[:3])
    _write_txt(tmp_path / "TinyStories-valid.txt", STORIES[3:])
    tr = build_dataset("tinystories", path=str(tmp_path), seq_len=16)
    va = build_dataset("tinystories", path=str(tmp_path), split="val", seq_len=16)
    assert [tr.text(i) for i in range(len(tr))] == STORIES[:3]
    assert [va.text(i) for i in range(len(va))] == STORIES[3:]

    jl = tmp_path / "stories.jsonl"
    jl.write_text(
        "\n".join(json.dumps({"text": s, "id": i}) for i, s in enumerate(STORIES)) + "\n\n",
        encoding="utf-8",
    )
    ds = build_dataset("tinystories", path=str(jl), seq_len=16)
    assert [ds.text(i) for i in range(len(ds))] == STORIES

    js = tmp_path / "data00.json"  # the released JSON shards use the field 'story'
    js.write_text(json.dumps([{"story": s, "summary": "x"} for s in STORIES]), encoding="utf-8")
    ds = build_dataset("tinystories", path=str(js), seq_len=16)
    assert [ds.text(i) for i in range(len(ds))] == STORIES

    many = [f"story number {i}" for i in range(50)]
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(json.dumps({"text": s}) for s in many), encoding="utf-8")
    h_tr = build_dataset("tinystories", path=str(big), holdout=0.1, seed=3)
    h_va = build_dataset("tinystories", path=str(big), split="val", holdout=0.1, seed=3)
    assert len(h_va) == 5 and len(h_tr) == 45
    assert set(h_tr.indices.tolist()).isdisjoint(h_va.indices.tolist())
    other = build_dataset("tinystories", path=str(big), split="val", holdout=0.1, seed=4)
    assert other.indices.tolist() != h_va.indices.tolist()
    sub = build_dataset("tinystories", path=str(big), fraction=0.2, seed=0)
    assert len(sub) == 10 and set(sub.indices.tolist()) <= set(range(50))


def test_tinystories_errors_name_the_path(tmp_path):
    with pytest.raises(UserInputError, match="path="):
        build_dataset("tinystories")
    missing = tmp_path / "nope.txt"
    with pytest.raises(UserInputError, match="nope.txt"):
        build_dataset("tinystories", path=str(missing))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{not json\n')
    ds = build_dataset("tinystories", path=str(bad))
    with pytest.raises(UserInputError, match="bad.jsonl"):
        ds[1]
    nofield = tmp_path / "nofield.jsonl"
    nofield.write_text('{"content": "x"}\n')
    with pytest.raises(UserInputError, match="content"):
        build_dataset("tinystories", path=str(nofield))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n<|endoftext|>\n  \n")
    with pytest.raises(UserInputError, match="no stories"):
        build_dataset("tinystories", path=str(empty))
    odd = tmp_path / "s.parquet"
    odd.write_bytes(b"PAR1")
    with pytest.raises(UserInputError, match="unsupported"):
        build_dataset("tinystories", path=str(odd))
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "dataset_dict.json").write_text('{"splits": ["train"]}')
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(UserInputError, match="datasets"):
            build_dataset("tinystories", path=str(saved))
    two = tmp_path / "two"
    two.mkdir()
    _write_txt(two / "TinyStories-train.txt", STORIES)
    _write_txt(two / "TinyStoriesV2-GPT4-train.txt", STORIES)
    with pytest.raises(UserInputError, match="several"):
        build_dataset("tinystories", path=str(two))
    with pytest.raises(UserInputError, match="no val file"):
        build_dataset("tinystories", path=str(two), split="val")
    with pytest.raises(UserInputError, match="authors_padding"):
        build_dataset("tinystories", path=str(two / "TinyStories-train.txt"), padding=True)


def test_tinystories_survives_pickling_for_worker_processes(tmp_path):
    f = tmp_path / "s.txt"
    _write_txt(f, STORIES)
    ds = build_dataset("tinystories", path=str(f), seq_len=12)
    _ = ds[0]  # opens the memory map
    clone = pickle.loads(pickle.dumps(ds))
    assert torch.equal(clone[2]["input_ids"], ds[2]["input_ids"])


# ----------------------------------------------------------------------------- images


def test_embedded_images_are_deterministic_balanced_and_not_trivial():
    a = build_dataset("embedded-images", n=600, seed=1)
    b = build_dataset("embedded-images", n=600, seed=1)
    c = build_dataset("embedded-images", n=600, seed=2)
    v = build_dataset("embedded-images", split="val", n=600, seed=1)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images) and not torch.equal(a.images, v.images)
    assert a.labels.bincount().tolist() == [60] * 10 and a.num_classes == 10
    x, y = a[0]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and isinstance(y, int)
    # colour and position carry no label information: a nearest-centroid classifier on the
    # mean colour, and one on raw pixels, stay near chance (0.1)
    px = a.images.float().flatten(1)
    pv = v.images.float().flatten(1)
    for feat in (lambda z: z.view(len(z), 3, -1).mean(-1), lambda z: z):
        cent = torch.stack([feat(px)[a.labels == k].mean(0) for k in range(10)])
        acc = (torch.cdist(feat(pv), cent).argmin(1) == v.labels).float().mean().item()
        assert acc < 0.2


def test_render_shapes_classes_differ_in_shape():
    imgs, labels = render_shapes(200, seed=0, noise=0.0)
    # without noise every image has exactly two colours: background and shape
    for k in range(5):
        flat = imgs[k].flatten(1).T
        assert len(torch.unique(flat, dim=0)) == 2
    assert labels.bincount().tolist() == [20] * 10


def _write_cifar(root, n_train=12, n_test=6, seed=0):
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    out = {}
    for name, n in (("data_batch_1", n_train), ("test_batch", n_test)):
        d = {
            b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
            b"labels": [int(v) for v in rng.integers(0, 10, size=n)],
            b"batch_label": name.encode(),
        }
        with open(root / name, "wb") as fh:
            pickle.dump(d, fh)
        out[name] = d
    with open(root / "batches.meta", "wb") as fh:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)]}, fh)
    return out


def _unnormalise(x, mean, std):
    m = torch.tensor(mean).view(3, 1, 1)
    s = torch.tensor(std).view(3, 1, 1)
    return ((x * s + m) * 255).round().to(torch.int64)


def test_cifar10_pickle_format_and_augmentation(tmp_path):
    raw = _write_cifar(tmp_path / "cifar-10-batches-py")
    with pytest.warns(UserWarning, match="1 of the 5"):
        tr = build_dataset("cifar10", path=str(tmp_path))  # parent folder accepted
    te = build_dataset("cifar10", path=str(tmp_path / "cifar-10-batches-py"), split="test")
    assert len(tr) == 12 and len(te) == 6 and tr.classes[3] == "c3"
    assert tr.augment and not te.augment
    x, y = te[2]
    orig = torch.from_numpy(raw["test_batch"][b"data"][2].reshape(3, 32, 32).astype(np.int64))
    assert y == raw["test_batch"][b"labels"][2]
    assert torch.equal(_unnormalise(x, data.CIFAR10_MEAN, data.CIFAR10_STD), orig)
    # train items: a shifted crop of the zero-padded image, possibly mirrored
    src = torch.from_numpy(raw["data_batch_1"][b"data"][5].reshape(3, 32, 32).astype(np.int64))
    padded = torch.nn.functional.pad(src, (4, 4, 4, 4))
    seen = set()
    for epoch in range(6):
        xa, _ = tr.sample(5, epoch=epoch, salt=0)
        got = _unnormalise(xa, data.CIFAR10_MEAN, data.CIFAR10_STD)
        matches = [
            (i, j, f)
            for i in range(9)
            for j in range(9)
            for f in (0, 1)
            if torch.equal(
                got,
                (
                    padded[:, i : i + 32, j : j + 32].flip(-1)
                    if f
                    else padded[:, i : i + 32, j : j + 32]
                ),
            )
        ]
        assert matches, "augmented image is not a crop/flip of the padded original"
        seen.add(matches[0])
        again, _ = tr.sample(5, epoch=epoch, salt=0)
        assert torch.equal(again, xa)  # reproducible from (seed, salt, epoch, index)
    assert len(seen) > 1  # and it varies with the epoch


@pytest.mark.filterwarnings("ignore:.*of the 5 CIFAR-10 training batches")
def test_cifar10_errors(tmp_path):
    with pytest.raises(UserInputError, match="no CIFAR-10 train batch"):
        build_dataset("cifar10", path=str(tmp_path))
    (tmp_path / "data_batch_1").write_bytes(b"not a pickle")
    with pytest.raises(UserInputError, match="data_batch_1"):
        build_dataset("cifar10", path=str(tmp_path))
    with open(tmp_path / "data_batch_1", "wb") as fh:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, fh)
    with pytest.raises(UserInputError, match=r"\(N, 3072\)"):
        build_dataset("cifar10", path=str(tmp_path))
    with open(tmp_path / "data_batch_1", "wb") as fh:
        pickle.dump({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 12]}, fh)
    with pytest.raises(UserInputError, match="labels"):
        build_dataset("cifar10", path=str(tmp_path))
    with pytest.raises(UserInputError, match="does not exist"):
        build_dataset("cifar10", path=str(tmp_path / "missing"))


def _write_folder(root, sizes, fmt="PNG"):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, classes in sizes.items():
        for cls, n in classes.items():
            d = root / split / cls
            d.mkdir(parents=True)
            for i in range(n):
                arr = rng.integers(0, 256, size=(20 + 3 * i, 30, 3), dtype=np.uint8)
                ext = "png" if fmt == "PNG" else "JPEG"
                Image.fromarray(arr).save(d / f"img{i}.{ext}", format=fmt)


def test_imagefolder_train_and_val(tmp_path):
    from PIL import Image

    _write_folder(tmp_path, {"train": {"cat": 3, "dog": 2}, "val": {"dog": 2}}, fmt="JPEG")
    tr = build_dataset("imagefolder", path=str(tmp_path), image_size=16)
    va = build_dataset("imagefolder", path=str(tmp_path), split="val", image_size=16)
    assert tr.classes == ["cat", "dog"] and len(tr) == 5 and tr.labels.tolist() == [0, 0, 0, 1, 1]
    assert va.labels.tolist() == [1, 1]  # labels follow the train folder's classes
    x, y = tr.sample(4, epoch=0, salt=0)
    assert x.shape == (3, 16, 16) and y == 1
    assert torch.equal(tr.sample(4, epoch=1, salt=0)[0], tr.sample(4, epoch=1, salt=0)[0])
    # val: resize the shorter side, then take the centre crop
    img = np.arange(8 * 16 * 3, dtype=np.uint8).reshape(8, 16, 3)
    (tmp_path / "exact" / "train" / "k").mkdir(parents=True)
    Image.fromarray(img).save(tmp_path / "exact" / "train" / "k" / "a.png")
    ex = build_dataset(
        "imagefolder", path=str(tmp_path / "exact"), image_size=8, augment=False, resize_size=8
    )
    xv, _ = ex[0]
    got = _unnormalise(xv, data.IMAGENET_MEAN, data.IMAGENET_STD)
    want = torch.from_numpy(img[:, 4:12].astype(np.int64)).permute(2, 0, 1)
    assert torch.equal(got, want)
    # defaults: 224 crops, resize 256
    full = build_dataset("imagefolder", path=str(tmp_path), split="val")
    assert full.resize_size == 256 and full[0][0].shape == (3, 224, 224)


def test_imagefolder_errors(tmp_path):
    with pytest.raises(UserInputError, match="train"):
        build_dataset("imagefolder", path=str(tmp_path))
    _write_folder(tmp_path, {"train": {"a": 1}, "val": {"zebra": 1}})
    with pytest.raises(UserInputError, match="zebra"):
        build_dataset("imagefolder", path=str(tmp_path), split="val")
    (tmp_path / "train" / "a" / "broken.png").write_bytes(b"no image here")
    ds = build_dataset("imagefolder", path=str(tmp_path), image_size=8)
    with pytest.raises(UserInputError, match="broken.png"):
        ds[0]
    (tmp_path / "e" / "train" / "a").mkdir(parents=True)
    with pytest.raises(UserInputError, match="no image files"):
        build_dataset("imagefolder", path=str(tmp_path / "e"))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 400), st.integers(1, 400), st.integers(0, 2**32 - 1))
def test_random_resized_crop_box_is_inside_and_respects_scale(w, h, seed):
    rng = np.random.default_rng(seed)
    left, top, right, bottom = random_resized_crop_box(w, h, rng)
    assert 0 <= left < right <= w and 0 <= top < bottom <= h
    bw, bh = right - left, bottom - top
    # for images big enough that rounding to whole pixels matters little: the aspect ratio
    # lies in [3/4, 4/3] (or the fallback uses a full side) and the area fraction >= 0.08
    if min(w, h) >= 50:
        assert 0.72 <= bw / bh <= 1.39 or bw == w or bh == h
        assert bw * bh >= 0.07 * w * h


def test_build_dataset_rejects_bad_names_and_values():
    with pytest.raises(UserInputError, match="embedded-text"):
        build_dataset("mnist")
    assert set(DATASET_NAMES) == {
        "embedded-text",
        "tinystories",
        "tokens",
        "embedded-images",
        "cifar10",
        "imagefolder",
    }
    with pytest.raises(UserInputError, match="split"):
        build_dataset("embedded-images", split="dev")
    with pytest.raises(ParameterError, match="seq_len"):
        build_dataset("embedded-text", seq_len=1)
    with pytest.raises(ParameterError, match="'n'"):
        build_dataset("embedded-images", n=0)
    with pytest.raises(UserInputError, match="allowed are"):
        build_dataset("embedded-images", colour=True)


# ----------------------------------------------------------------------------- sharding


@pytest.mark.parametrize(
    "n,k,drop", [(103, 4, True), (103, 4, False), (8, 3, False), (100, 1, True), (2, 3, False)]
)
def test_iid_shards_match_distributed_sampler(n, k, drop):
    for epoch in (0, 3):
        for r in range(k):
            ref = DistributedSampler(
                range(n), num_replicas=k, rank=r, shuffle=True, seed=7, drop_last=drop
            )
            ref.set_epoch(epoch)
            got = shard_indices(n, rank=r, world_size=k, seed=7, epoch=epoch, drop_last=drop)
            assert got == list(ref)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 8), st.booleans(), st.integers(0, 5), st.booleans())
def test_shards_are_disjoint_and_cover(n, k, iid, epoch, with_keys):
    keys = np.arange(n) % 7 if with_keys else None
    shards = [
        shard_indices(n, rank=r, world_size=k, seed=1, epoch=epoch, iid=iid, keys=keys)
        for r in range(k)
    ]
    flat = [i for s in shards for i in s]
    assert len(flat) == len(set(flat)) == (n // k) * k
    assert all(len(s) == n // k for s in shards)
    padded = [
        shard_indices(
            n, rank=r, world_size=k, seed=1, epoch=epoch, iid=iid, drop_last=False, keys=keys
        )
        for r in range(k)
    ]
    assert set(i for s in padded for i in s) == set(range(n))
    assert all(len(s) == math.ceil(n / k) for s in padded)


def test_non_iid_shards_split_labels_and_text_regions():
    ds = build_dataset("embedded-images", n=400, seed=0)
    got = []
    for r in range(2):
        idx = shard_indices(
            len(ds), rank=r, world_size=2, seed=0, iid=False, keys=ds.labels.numpy()
        )
        got.append(set(ds.labels[idx].tolist()))
        # a fixed set of samples in every epoch, in a new order
        again = shard_indices(
            len(ds), rank=r, world_size=2, seed=0, epoch=1, iid=False, keys=ds.labels.numpy()
        )
        assert set(again) == set(idx) and again != idx
    assert got == [{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}]
    # through make_loader the dataset's labels are used automatically
    loader = make_loader(ds, batch_size=50, rank=1, world_size=2, seed=0, iid=False)
    assert set(torch.cat([y for _, y in loader]).tolist()) == {5, 6, 7, 8, 9}
    # language-model data: each rank owns a contiguous region of the text
    text = build_dataset("embedded-text", seq_len=64)
    for r in range(3):
        idx = sorted(shard_indices(len(text), rank=r, world_size=3, seed=0, iid=False))
        per = len(text) // 3
        assert idx == list(range(r * per, (r + 1) * per))


def test_make_loader_start_index_resumes_the_epoch():
    ds = build_dataset("embedded-images", n=96, seed=0, augment=True)
    kw = dict(batch_size=8, rank=1, world_size=2, seed=5, epoch=2)
    full = [x for x, _ in make_loader(ds, **kw)]
    assert len(full) == 6
    tail = [x for x, _ in make_loader(ds, start_index=24, **kw)]
    assert len(tail) == 3
    assert all(torch.equal(a, b) for a, b in zip(full[3:], tail, strict=True))
    other_epoch = [x for x, _ in make_loader(ds, **{**kw, "epoch": 3})]
    assert not torch.equal(other_epoch[0], full[0])
    with pytest.raises(ParameterError, match="start_index"):
        make_loader(ds, start_index=49, **kw)
    with pytest.raises(ParameterError, match="rank"):
        make_loader(ds, batch_size=8, rank=2, world_size=2, seed=0)


def _same(a, b):
    if isinstance(a, dict):
        return all(torch.equal(a[k], b[k]) for k in a)
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", ["embedded-images", "embedded-text"])
def test_batch_stream_is_endless_and_resumes_exactly(name):
    kw = {"n": 90, "augment": True} if name == "embedded-images" else {"seq_len": 8}
    ds = build_dataset(name, **kw)
    if name == "embedded-text":
        ds.chunks = ds.chunks[:90]  # a small corpus: several epochs in a few batches
    stream = BatchStream(ds, 10, rank=0, world_size=2, seed=3)
    assert stream.batches_per_epoch == 4  # 45 samples per rank, incomplete batch dropped
    reference = [next(stream) for _ in range(11)]
    assert stream.state_dict()["epoch"] == 2 and stream.state_dict()["index"] == 30
    for cut in (0, 3, 4, 7):
        s = BatchStream(ds, 10, rank=0, world_size=2, seed=3)
        for _ in range(cut):
            next(s)
        state = json.loads(json.dumps(s.state_dict()))  # survives a JSON checkpoint
        resumed = BatchStream(ds, 10, rank=0, world_size=2, seed=3)
        resumed.load_state_dict(state)
        rest = [next(resumed) for _ in range(11 - cut)]
        assert all(_same(a, b) for a, b in zip(reference[cut:], rest, strict=True))
    # the two epochs differ in order
    assert not _same(reference[0], reference[4])


def test_batch_stream_ranks_cover_an_epoch_and_check_their_state():
    ds = build_dataset("embedded-text", seq_len=8)
    ds.chunks = ds.chunks[:64]
    seen = []
    for r in range(4):
        s = BatchStream(ds, 4, rank=r, world_size=4, seed=0)
        for _ in range(s.batches_per_epoch):
            seen.extend(tuple(row) for row in next(s)["input_ids"].tolist())
    assert sorted(seen) == sorted(tuple(row) for row in ds.chunks.tolist())
    a = BatchStream(ds, 4, rank=0, world_size=4, seed=0)
    b = BatchStream(ds, 4, rank=1, world_size=4, seed=0)
    with pytest.raises(UserInputError, match="rank"):
        b.load_state_dict(a.state_dict())
    with pytest.raises(UserInputError, match="batch_size"):
        BatchStream(ds, 8, rank=0, world_size=4, seed=0).load_state_dict(a.state_dict())
    with pytest.raises(UserInputError, match="not one batch"):
        BatchStream(ds, 17, rank=0, world_size=4, seed=0)


def test_batch_stream_keeps_partial_batches_without_drop_last():
    ds = build_dataset("embedded-images", n=23)
    s = BatchStream(ds, 5, rank=0, world_size=2, seed=0, drop_last=False)
    sizes = [len(next(s)[1]) for _ in range(6)]
    assert sizes == [5, 5, 2, 5, 5, 2]  # 12 samples per rank (one repeated to even shards)


def test_worker_processes_give_the_same_batches():
    ds = build_dataset("embedded-images", n=64, augment=True)
    kw = dict(batch_size=8, rank=0, world_size=1, seed=1, epoch=1)
    plain = [x for x, _ in make_loader(ds, **kw)]
    workers = [x for x, _ in make_loader(ds, num_workers=2, **kw)]
    assert all(torch.equal(a, b) for a, b in zip(plain, workers, strict=True))
