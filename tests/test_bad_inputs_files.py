"""Writes touch only what the user asked for, and every file read is bounded.

Outputs: a FIFO, a socket, a directory, a character device (``/dev/null``, ``/dev/full``) or a
symbolic link to one is refused (exit 2, the flag named) before anything is written; a
symbolic link to a regular file is followed (the target replaced, the link kept). In these
tests nothing is ever written to a device: ``os.replace`` and the temp-file creation of
:mod:`core.io` fail the test if they are reached for a refused path.

Inputs: ``/dev/zero``, ``/dev/urandom``, a FIFO, a socket and a file over
:data:`core.files.MAX_INPUT_BYTES` are refused before reading, for every flag that
names an input file. Every case runs under an alarm, so a hang fails instead of waiting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
from pathlib import Path

import pytest

import core.io
from core import exitcodes
from core.errors import UserInputError
from core.files import MAX_INPUT_BYTES, check_output_file, read_mapping_file
from core.io import atomic_write_json, atomic_write_text, write_csv
from palsgd.cli import main


@contextlib.contextmanager
def no_hang(seconds: int = 20):
    """Fail (instead of waiting for ever) when the block takes longer than ``seconds``."""

    def alarm(signum, frame):
        raise TimeoutError(f"hung for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def make_kinds(tmp_path: Path) -> socket.socket:
    """Paths of every kind under ``tmp_path`` (a FIFO, a directory, links, a socket, an
    oversized sparse file); returns the bound socket (close it after use)."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "adir").mkdir()
    (tmp_path / "real.json").write_text("{}\n")
    os.symlink(tmp_path / "real.json", tmp_path / "link.json")
    os.symlink("/dev/null", tmp_path / "devlink")
    os.symlink(tmp_path / "fifo", tmp_path / "fifolink")
    os.symlink(tmp_path / "missing_dir" / "x.json", tmp_path / "dangling")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    with open(tmp_path / "big.yaml", "wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_INPUT_BYTES + 1)
    return sock


@pytest.fixture
def kinds(tmp_path, monkeypatch):
    """Paths of every kind in a fresh working directory, and guards that fail the test if
    a write reaches anything but a regular file under ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    sock = make_kinds(tmp_path)

    real_replace, real_temp = os.replace, core.io._new_temp_file

    def guarded_replace(src, dst, *a, **k):
        dst = Path(dst)
        assert dst.resolve().is_relative_to(tmp_path.resolve()), f"replace outside: {dst}"
        assert not dst.exists() or stat.S_ISREG(os.stat(dst).st_mode), f"replace of {dst}"
        return real_replace(src, dst, *a, **k)

    def guarded_temp(target):
        assert Path(target).resolve().is_relative_to(tmp_path.resolve()), target
        return real_temp(target)

    monkeypatch.setattr(os, "replace", guarded_replace)
    monkeypatch.setattr(core.io, "_new_temp_file", guarded_temp)
    yield tmp_path
    sock.close()


REFUSED_OUTPUTS = {
    "fifo": "FIFO",
    "sock": "socket",
    "adir": "directory",
    "/dev/null": "character device",
    "/dev/full": "character device",
    "devlink": "character device",
    "fifolink": "FIFO",
    "dangling": "does not exist",
    "loop": "symbolic links",
}


@pytest.mark.parametrize("name", sorted(REFUSED_OUTPUTS))
def test_writer_refuses_before_writing(name, kinds):
    before = os.lstat(name) if os.path.lexists(name) else None
    for write in (
        lambda: atomic_write_text(name, "x"),
        lambda: atomic_write_json(name, {"a": 1}),
        lambda: write_csv(name, [{"a": 1}]),
    ):
        with no_hang(), pytest.raises(UserInputError, match=REFUSED_OUTPUTS[name]):
            write()
    if before is not None:  # the path is what it was: same kind, same inode
        after = os.lstat(name)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)


@pytest.mark.parametrize("name", sorted(REFUSED_OUTPUTS))
def test_output_flag_refused_naming_it(name, kinds, capsys):
    with no_hang():
        code = main(["cost", "predict", "--setting", "resnet50-imagenet", "--output", name])
    err = capsys.readouterr().err
    assert code == exitcodes.BAD_INPUT and "--output" in err and "Traceback" not in err
    assert REFUSED_OUTPUTS[name] in err


def test_check_output_file_refuses_each_kind(kinds):
    for name, needle in REFUSED_OUTPUTS.items():
        with no_hang(), pytest.raises(UserInputError, match=needle):
            check_output_file(name, "--output")


def test_a_symlink_is_followed_never_replaced(kinds, capsys):
    with no_hang():
        code = main(["cost", "predict", "--setting", "resnet50-imagenet", "--output", "link.json"])
    assert code == 0, capsys.readouterr().err
    assert os.path.islink("link.json")  # the link stays a link
    assert '"setting": "resnet50-imagenet"' in Path("real.json").read_text()  # its target new


def test_a_directory_holding_a_link_to_a_device_is_refused_at_write(kinds):
    out = kinds / "out"
    out.mkdir()
    os.symlink("/dev/null", out / "summary.txt")
    with pytest.raises(UserInputError, match="character device"):
        atomic_write_text(out / "summary.txt", "x")
    assert os.path.islink(out / "summary.txt")


def test_output_dir_that_is_a_fifo_or_device_is_refused(kinds, capsys):
    for path, needle in (("fifo", "FIFO"), ("/dev/null", "character device")):
        for argv, flag in (
            (["probe", "--out", path], "--out"),
            (["train", "--nproc", "1", "--output-dir", path], "--output-dir"),
            (["figures", "--out", path, "--only", "paper_scale"], "--out"),
        ):
            with no_hang():
                code = main(argv)
            err = capsys.readouterr().err
            assert code == 2 and flag in err and needle in err, err


# ------------------------------------------------------------------------------- inputs
BAD_INPUTS = {
    "/dev/zero": "character device",
    "/dev/urandom": "character device",
    "fifo": "FIFO",
    "sock": "socket",
    "adir": "directory",
    "big.yaml": "MiB",
}

INPUT_FLAGS = [
    "check --config {}",
    "train --config {}",
    "train --coins-file {} --nproc 1",
    "verify --bound-file {}",
    "cost predict --profiles-file {}",
    "probe --train-config {}",
]


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_reader_refuses_before_reading(name, kinds):
    with no_hang(5), pytest.raises(UserInputError, match=BAD_INPUTS[name]):
        read_mapping_file(name, "config file")


@pytest.mark.parametrize("flags", INPUT_FLAGS)
@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_input_flag_refused_naming_the_file(flags, name, kinds, capsys):
    if "coins-file" in flags and name == "big.yaml":
        name = "huge.npy"  # more than T x K x 8 bytes
        with open(name, "wb") as fh:
            fh.truncate(10**8)
    with no_hang():
        code = main(flags.format(name).split())
    err = capsys.readouterr().err
    assert code == exitcodes.BAD_INPUT, err[-2000:]
    assert name in err and "Traceback" not in err


def test_a_report_directory_behind_a_link_is_replaced_the_link_kept(kinds):
    from theory.verify.report import AtomicDirectory

    (kinds / "real_out").mkdir()
    (kinds / "real_out" / "results.json").write_text("{}")
    os.symlink(kinds / "real_out", kinds / "out_link")
    with AtomicDirectory("out_link") as tmp:
        (tmp / "results.json").write_text('{"new": 1}')
    assert os.path.islink("out_link")
    assert (kinds / "real_out" / "results.json").read_text() == '{"new": 1}'


def test_a_trace_is_written_atomically(kinds):
    import numpy as np

    from theory.simulate.trace import Trace

    fields = {k: np.zeros(1) for k in Trace.__dataclass_fields__}
    tr = Trace(**fields)
    with pytest.raises(UserInputError, match="FIFO"):
        tr.save_json("fifo")


def test_emit_json_prints_writes_or_does_nothing(tmp_path, capsys):
    """A benchmark's ``--json``: ``-`` prints, a path is written atomically (keys in their
    order), nothing given writes nothing."""
    import json

    from core.io import emit_json

    obj = {"b": 1, "a": [1.5, "x"]}
    emit_json("-", obj)
    assert json.loads(capsys.readouterr().out) == obj
    target = tmp_path / "out.json"
    emit_json(str(target), obj)
    assert target.read_text() == json.dumps(obj, indent=2) + "\n"
    emit_json(None, obj)
    emit_json("", obj)
    assert capsys.readouterr().out == "" and [p.name for p in tmp_path.iterdir()] == ["out.json"]
