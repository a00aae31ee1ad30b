"""Bad token files (``palsgd train --dataset tokens``): refused before any rank starts, a
file changed under a running job caught with one line and exit code 2 (the last checkpoint
intact, the summary written), 32-bit ids read as 16-bit in a short file, a FIFO, a device
and a symbolic-link loop named as what they are, and progress on a long scan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from train_cli_args import train_args

from core import exitcodes
from core.errors import InputChanged, UserInputError
from empirical.data import build_dataset, token_scan
from empirical.train.checkpoints import Checkpoints
from palsgd.cli import main

ROOT = Path(__file__).resolve().parents[1]
SEQ = 16


def _ids(path: Path, n: int = 4000, vocab: int = 257, dtype: str = "uint16") -> Path:
    np.random.default_rng(0).integers(0, vocab, n).astype(dtype).tofile(path)
    return path


def _dataset(path: Path, **kw):
    return build_dataset("tokens", path=path, seq_len=SEQ, vocab_size=257, **kw)


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def _train(tmp_path: Path, data: Path, *extra: str) -> list[str]:
    return train_args(
        tmp_path / "run", "--dataset", "tokens", "--data-path", str(data), "--T", "8",
        "--eval-interval", "0", *extra,
    )  # fmt: skip


def test_bad_ids_with_two_ranks_are_refused_before_launch(tmp_path):
    data = _ids(tmp_path / "c.bin")
    a = np.fromfile(data, dtype="uint16")
    a[3000] = 60000
    a.tofile(data)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "palsgd", "train", "--nproc", "2", "--dataset", "tokens",
         "--data-path", str(data), "--T", "2", "--no-progress", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == exitcodes.BAD_INPUT, proc.stderr[-3000:]
    line = _one_error_line(proc.stderr)
    assert "--data-path" in line and "id 60000 (position 3000)" in line
    assert "(rank " not in proc.stderr  # found by the command, not inside the ranks
    assert not (out / "launch_config.json").exists()


def _after_checkpoint(monkeypatch, step: int, change) -> None:
    """``change()`` right after the checkpoint of ``step`` is written."""
    real = Checkpoints.save

    def save(self, at):
        directory = real(self, at)
        if at == step:
            change()
        return directory

    monkeypatch.setattr(Checkpoints, "save", save)


def _check_stopped_cleanly(tmp_path: Path, err: str, words: str) -> None:
    line = _one_error_line(err)
    assert words in line and "--data-path" in line and "--resume auto" in line, line
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "input_changed" and words in summary["message"]
    assert summary["last_checkpoint"].endswith("step_00000002")
    assert (Path(summary["last_checkpoint"]) / "manifest.json").is_file()


def test_a_file_truncated_under_the_run_stops_it_with_2(tmp_path, monkeypatch, capsys):
    data = _ids(tmp_path / "c.bin")
    _after_checkpoint(monkeypatch, 2, lambda: os.truncate(data, 64))
    assert main(_train(tmp_path, data)) == exitcodes.BAD_INPUT
    _check_stopped_cleanly(tmp_path, capsys.readouterr().err, "truncated during the run")


def test_a_file_rewritten_with_ids_outside_the_vocabulary_stops_it_with_2(
    tmp_path, monkeypatch, capsys
):
    data = _ids(tmp_path / "c.bin")
    rewrite = lambda: np.full(4000, 60000, dtype="uint16").tofile(data)  # noqa: E731
    _after_checkpoint(monkeypatch, 2, rewrite)
    assert main(_train(tmp_path, data)) == exitcodes.BAD_INPUT
    err = capsys.readouterr().err
    _check_stopped_cleanly(tmp_path, err, "outside the vocabulary")
    assert "id 60000" in err


def test_a_size_change_is_found_at_the_next_checkpoint(tmp_path):
    data = _ids(tmp_path / "c.bin")
    ds = _dataset(data)
    assert ds.changed() is None
    with open(data, "ab") as fh:
        fh.write(b"\0\0")
    assert "changed size during the run" in ds.changed()
    os.truncate(data, 10)
    with pytest.raises(InputChanged, match="truncated during the run"):
        ds[len(ds) - 1]


def test_a_rewrite_of_the_same_size_is_noted_once(tmp_path, capsys):
    data = _ids(tmp_path / "c.bin")
    ds = _dataset(data)
    st = os.stat(data)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert ds.changed() is None and ds.changed() is None
    assert capsys.readouterr().err.count("was modified during the run") == 1


@pytest.mark.parametrize("n", [8, 300, 1023])
def test_short_32_bit_files_read_as_16_bit_are_refused(tmp_path, n):
    data = _ids(tmp_path / "c.bin", n=n, dtype="uint32")
    with pytest.raises(UserInputError, match="looks like 32-bit ids; pass --token-dtype uint32"):
        _dataset(data, token_dtype="uint16")
    if n >= 300:  # the right dtype reads it
        assert len(_dataset(data, token_dtype="uint32")) == n // SEQ - round(0.1 * (n // SEQ))


def test_a_fifo_a_device_and_a_link_loop_are_named(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserInputError, match=r"is a FIFO \(named pipe\), not a regular file"):
        _dataset(tmp_path / "fifo")
    with pytest.raises(UserInputError, match="is a character device, not a regular file"):
        _dataset("/dev/zero")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(UserInputError, match="symbolic-link loop"):
        _dataset(tmp_path / "a")
    (tmp_path / "d").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UserInputError, match="broken symbolic link"):
        _dataset(tmp_path / "d")


def test_the_cli_names_a_link_loop_and_a_fifo(tmp_path, capsys):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    os.mkfifo(tmp_path / "fifo")
    for path, words in ((tmp_path / "a", "symbolic-link loop"), (tmp_path / "fifo", "FIFO")):
        assert main(_train(tmp_path, path)) == exitcodes.BAD_INPUT
        line = _one_error_line(capsys.readouterr().err)
        assert words in line and "data_path" in line.replace("-", "_"), line


def test_a_long_scan_shows_progress_and_is_done_once(tmp_path, monkeypatch, capsys):
    data = _ids(tmp_path / "c.bin", n=40_000)
    monkeypatch.setattr(token_scan, "SCAN_BLOCK", 1000)
    monkeypatch.setattr(token_scan, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(token_scan, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(token_scan, "_SCANS", {})
    monkeypatch.delenv(token_scan.ENV_SCANS, raising=False)
    _dataset(data)
    err = capsys.readouterr().err
    assert "scanning token file" in err and "100% of" in err and "scanned token file" in err
    monkeypatch.setattr(token_scan, "_SCANS", {})  # the launched ranks: only the environment
    assert token_scan.ENV_SCANS in os.environ
    _dataset(data)
    assert "scanning token file" not in capsys.readouterr().err  # not scanned again
    os.utime(data, ns=(0, 10**9))  # another modification time: scanned again
    _dataset(data)
    assert "scanning token file" in capsys.readouterr().err
