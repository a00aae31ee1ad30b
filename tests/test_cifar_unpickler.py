"""No CIFAR-10 file runs code: the batches and ``batches.meta`` go through a restricted
unpickler (:mod:`empirical.data.safe_pickle`) that reads the real format (Python 2's
pickles of numpy arrays) and refuses every other global with a clean bad-input error."""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from core import exitcodes
from core.errors import UserInputError
from empirical.data.cifar import load_cifar10
from empirical.data.safe_pickle import RefusedGlobal, load_data_pickle


class _CreatesFile:
    """Unpickled by ``pickle.load``, this calls ``open(path, "w")``: the file appears."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


class _RunsCommand:
    """Unpickled by ``pickle.load``, this runs a shell command that creates a file."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch '{self.path}'",))


class _Py2Pickler(pickle._Pickler):  # type: ignore[name-defined]
    """Writes ``bytes`` as Python 2 strings (SHORT_BINSTRING / BINSTRING), as the cPickle of
    Python 2 wrote the released CIFAR-10 files."""

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _py2_batch(n: int, seed: int) -> tuple[bytes, dict]:
    """A batch in the released files' format: protocol 2, Python 2 strings, the array
    reconstructor named ``numpy.core.multiarray._reconstruct``."""
    rng = np.random.default_rng(seed)
    d = {
        b"batch_label": b"training batch 1 of 5",
        b"labels": [int(v) for v in rng.integers(0, 10, size=n)],
        b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
        b"filenames": [f"img_{i}.png".encode() for i in range(n)],
    }
    buf = __import__("io").BytesIO()
    _Py2Pickler(buf, protocol=2).dump(d)
    raw = buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert b"cnumpy.core.multiarray\n_reconstruct\n" in raw and b"_codecs" not in raw
    return raw, d


def _write_batches(root: Path, n: int = 3) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    raw, d = _py2_batch(n, 0)
    (root / "data_batch_1").write_bytes(raw)
    (root / "test_batch").write_bytes(_py2_batch(n, 1)[0])
    meta = {b"label_names": [f"c{i}".encode() for i in range(10)], b"num_vis": 3072}
    buf = __import__("io").BytesIO()
    _Py2Pickler(buf, protocol=2).dump(meta)
    (root / "batches.meta").write_bytes(buf.getvalue())
    return d


@pytest.mark.filterwarnings("ignore:.*of the 5 CIFAR-10 training batches")
def test_the_released_format_loads(tmp_path):
    d = _write_batches(tmp_path / "cifar-10-batches-py")
    images, labels, classes = load_cifar10(str(tmp_path), "train")
    assert images.shape == (3, 3, 32, 32)
    assert np.array_equal(images.numpy().reshape(3, 3072), d[b"data"])
    assert labels.tolist() == d[b"labels"] and classes[4] == "c4"


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_numpy_arrays_of_every_protocol_load(protocol):
    d = {b"data": np.arange(6, dtype=np.uint8).reshape(2, 3), b"labels": np.int64(7)}
    back = load_data_pickle(pickle.dumps(d, protocol=protocol))
    assert np.array_equal(back[b"data"], d[b"data"]) and back[b"labels"] == 7


@pytest.mark.parametrize("payload", [_CreatesFile, _RunsCommand])
@pytest.mark.filterwarnings("ignore:.*of the 5 CIFAR-10 training batches")
def test_a_crafted_batch_is_refused_and_nothing_runs(tmp_path, payload):
    marker = tmp_path / "ran"
    root = tmp_path / "cifar"
    root.mkdir()
    evil = {b"data": payload(marker), b"labels": [0]}
    (root / "data_batch_1").write_bytes(pickle.dumps(evil, protocol=2))
    with pytest.raises(UserInputError) as info:
        load_cifar10(str(root), "train")
    message = str(info.value)
    assert str(root / "data_batch_1") in message and "--data-path" in message
    assert "refused, nothing in it was run" in message
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore:.*of the 5 CIFAR-10 training batches")
def test_a_crafted_meta_file_is_refused(tmp_path):
    marker = tmp_path / "ran"
    root = tmp_path / "cifar"
    _write_batches(root)
    (root / "batches.meta").write_bytes(pickle.dumps({b"label_names": _CreatesFile(marker)}))
    with pytest.raises(UserInputError, match="batches.meta.*--data-path"):
        load_cifar10(str(root), "train")
    assert not marker.exists()


def test_refused_names_the_global_and_never_imports_it():
    raw = b"cos\nsystem\n(S'true'\ntR."  # protocol 0: os.system('true')
    with pytest.raises(RefusedGlobal, match="'os.system'"):
        load_data_pickle(raw)
    raw = b"c_codecs\nencode\n(X\x01\x00\x00\x00aX\x05\x00\x00\x00rot13tR."
    with pytest.raises(RefusedGlobal, match="rot13"):
        load_data_pickle(raw)


@pytest.mark.filterwarnings("ignore:.*of the 5 CIFAR-10 training batches")
def test_train_on_a_crafted_batch_exits_2_with_one_line(tmp_path, capsys):
    from palsgd.cli import main

    marker = tmp_path / "ran"
    root = tmp_path / "cifar"
    root.mkdir()
    (root / "data_batch_1").write_bytes(pickle.dumps({b"data": _CreatesFile(marker)}))
    (root / "test_batch").write_bytes(pickle.dumps({b"data": _CreatesFile(marker)}))
    code = main(
        [
            "train", "--nproc", "1", "--dataset", "cifar10", "--model", "resnet-tiny",
            "--data-path", str(root), "--T", "1", "--no-progress",
            "--output-dir", str(tmp_path / "run"),
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == exitcodes.BAD_INPUT, err
    assert "Traceback" not in err and "--data-path" in err and "data_batch_1" in err
    assert not marker.exists()
