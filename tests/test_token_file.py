"""The ``tokens`` dataset (empirical.data.token_file): a user's flat binary file of token
ids, memory-mapped, with its dtype and vocabulary checked; and its trainer flags."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from core.errors import UserInputError
from empirical.checkpoint import check_compatible
from empirical.config import MATCH_DEFAULTS, resolve_config
from empirical.data import BatchStream, build_dataset
from empirical.data.token_file import resolve_token_dtype
from palsgd.cli import main as cli_main

SEQ = 16


def _write(path, ids, dtype) -> np.ndarray:
    arr = np.asarray(ids, dtype=dtype)
    arr.tofile(path)
    return arr


def _ids(n: int, vocab: int = 257, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, n)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "int32", "int64"])
def test_items_are_the_files_chunks_and_the_splits_cover_it(tmp_path, dtype):
    ids = _write(tmp_path / "c.bin", _ids(1000 * SEQ + 7), dtype)
    kw = dict(path=tmp_path / "c.bin", seq_len=SEQ, vocab_size=257, token_dtype=dtype)
    train = build_dataset("tokens", split="train", **kw)
    val = build_dataset("tokens", split="val", **kw)
    assert (len(train), len(val)) == (900, 100)  # the last 10% of the chunks, tail dropped
    assert train.task == "lm" and train.vocab_size == 257
    for ds, i, pos in ((train, 0, 0), (train, 899, 899), (val, 0, 900), (val, 99, 999)):
        item = ds[i]
        want = torch.from_numpy(ids[pos * SEQ : (pos + 1) * SEQ].astype(np.int64))
        assert torch.equal(item["input_ids"], want)
        assert torch.equal(item["labels"], want) and item["input_ids"].dtype == torch.int64
        assert bool(item["attention_mask"].all())
    clone = pickle.loads(pickle.dumps(train))  # DataLoader workers re-open the map
    assert torch.equal(clone[5]["input_ids"], train[5]["input_ids"])


def test_a_directory_holds_train_and_val(tmp_path):
    tr = _write(tmp_path / "train.bin", _ids(40 * SEQ), "uint16")
    va = _write(tmp_path / "val.bin", _ids(5 * SEQ, seed=1), "uint16")
    kw = dict(path=tmp_path, seq_len=SEQ, vocab_size=257)
    train, val = (build_dataset("tokens", split=s, **kw) for s in ("train", "val"))
    assert (len(train), len(val)) == (40, 5)
    assert np.array_equal(val[4]["input_ids"].numpy(), va[4 * SEQ :])
    assert np.array_equal(train[0]["input_ids"].numpy(), tr[:SEQ])
    (tmp_path / "val.bin").unlink()
    with pytest.raises(UserInputError, match="no 'val.bin'"):
        build_dataset("tokens", split="val", **kw)


def test_auto_dtype_from_the_file_name_then_the_vocabulary(tmp_path):
    assert resolve_token_dtype("corpus.uint32.bin", "auto", 257) == "uint32"
    assert resolve_token_dtype("train.u32", "auto", 257) == "uint32"
    assert resolve_token_dtype("train.i64.bin", "auto", 50257) == "int64"
    assert resolve_token_dtype("train.bin", "auto", 50257) == "uint16"
    assert resolve_token_dtype("train.bin", "auto", 65537) == "uint32"
    assert resolve_token_dtype("train.uint32.bin", "uint16", 257) == "uint16"  # given wins
    with pytest.raises(UserInputError, match="several dtypes"):
        resolve_token_dtype("a.u16.u32", "auto", 257)
    ids = _write(tmp_path / "c.u32", _ids(30 * SEQ), "uint32")
    ds = build_dataset("tokens", path=tmp_path / "c.u32", seq_len=SEQ, vocab_size=257)
    assert ds.dtype == "uint32" and np.array_equal(ds[0]["input_ids"].numpy(), ids[:SEQ])


@pytest.mark.parametrize(
    "ids, dtype, flag, match",
    [
        (np.full(3000, 300), "uint16", None, "holds id 300"),  # outside the vocabulary
        (np.r_[np.zeros(2000), [-4]], "int32", "int32", "negative id -4"),
        (np.arange(4000) % 250, "uint32", None, "looks like 32-bit ids"),  # read as uint16
        (np.arange(3001) % 250, "uint16", "uint32", "not a whole number"),  # 6002 bytes
        (np.arange(15), "uint16", None, "no chunk of --seq-len"),
    ],
)
def test_bad_files_are_refused_naming_what_to_change(tmp_path, ids, dtype, flag, match):
    _write(tmp_path / "c.bin", ids, dtype)
    with pytest.raises(UserInputError, match=match):
        build_dataset(
            "tokens", path=tmp_path / "c.bin", seq_len=SEQ, vocab_size=257,
            token_dtype=flag or "auto",
        )  # fmt: skip


def test_the_right_dtype_reads_the_wide_file(tmp_path):
    """Negative control of the 32-bit check: the same file read as uint32 is accepted."""
    ids = _write(tmp_path / "c.bin", np.arange(4000) % 250, "uint32")
    ds = build_dataset(
        "tokens", path=tmp_path / "c.bin", seq_len=SEQ, vocab_size=257, token_dtype="uint32"
    )
    assert np.array_equal(ds[1]["input_ids"].numpy(), ids[SEQ : 2 * SEQ])


def test_batches_come_from_the_file(tmp_path):
    ids = _write(tmp_path / "c.bin", _ids(64 * SEQ), "uint16")
    ds = build_dataset("tokens", path=tmp_path / "c.bin", seq_len=SEQ, vocab_size=257)
    batch = BatchStream(ds, 4, rank=1, world_size=2, seed=3).next()
    chunks = ids[: len(ds) * SEQ].reshape(-1, SEQ)
    for row in batch["input_ids"].numpy():
        assert any(np.array_equal(row, c) for c in chunks)


def test_trainer_options(tmp_path, capsys):
    _write(tmp_path / "c.bin", _ids(400 * SEQ, vocab=300), "uint16")
    base = ["train", "--nproc", "1", "--dataset", "tokens", "--data-path", str(tmp_path / "c.bin")]
    base += ["--seq-len", str(SEQ), "--batch-size", "2", "--T", "2", "--eval-interval", "0"]
    base += ["--no-progress", "--output-dir", str(tmp_path / "out")]
    assert cli_main(base) == 2  # ids up to 299 do not fit gptneo-tiny's 257
    err = capsys.readouterr().err
    assert "--data-path" in err and "vocabulary of 257 ids" in err and "Traceback" not in err
    _write(tmp_path / "c.bin", _ids(400 * SEQ), "uint16")
    assert cli_main(base + ["--token-dtype", "uint16"]) == 0
    cfg = resolve_config(overrides={"dataset": "embedded-text", "token_dtype": "auto"})
    assert cfg.token_dtype == "auto"
    with pytest.raises(UserInputError, match="token_dtype"):
        resolve_config(overrides={"token_dtype": "uint16"})  # not the tokens dataset
    with pytest.raises(UserInputError, match="token_dtype"):
        resolve_config(overrides={"dataset": "tokens", "token_dtype": "float32"})


def test_manifests_from_before_the_field_resume_with_its_default():
    meta = {"dataset": "tokens", "token_dtype": "auto"}
    check_compatible({"dataset": "tokens"}, meta, "ck", MATCH_DEFAULTS)
    with pytest.raises(UserInputError, match="token_dtype"):
        check_compatible(
            {"dataset": "tokens"}, {**meta, "token_dtype": "uint32"}, "ck", MATCH_DEFAULTS
        )
    with pytest.raises(UserInputError, match="token_dtype"):
        check_compatible({"dataset": "tokens"}, meta, "ck")  # no default: missing differs
