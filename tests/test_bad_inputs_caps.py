"""Caps where a size had none and messages that name the flag: ``--seq-len`` above its cap,
``palsgd map --K``/``--d`` and a problem file above theirs, huge eigenvalues named by the
file's field, ``map --help``'s exit codes, ``--export-dir``, a full disk with no file
named, and ``palsgd train`` into a map's output directory or ``--resume auto`` with nothing
to resume."""

from __future__ import annotations

import errno
import json

import pytest

import theory.check.evaluate
from core import exitcodes
from palsgd.cli import main

TRAIN = ["train", "--nproc", "1", "--T", "2", "--no-progress"]


def _line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert len(lines) == 1 and "Traceback" not in err and "Warning" not in err, err
    return lines[0]


def test_seq_len_above_the_cap_is_refused_naming_the_flag(tmp_path, capsys):
    code = main([*TRAIN, "--seq-len", "100000", "--output-dir", str(tmp_path / "r")])
    assert code == exitcodes.BAD_INPUT
    line = _line(capsys)
    assert "--seq-len 100000 is above the cap of 4096" in line


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--K", "100000000"], "--K = 100000000 is above the cap of 4096"),
        (["--K", "1000", "--d", "1000"], "K x d = 1000 x 1000 = 1000000 is above the cap"),
        (["--d", "100000"], "--d = 100000 is above the cap of 65536"),
    ],
)
def test_map_sizes_above_the_caps_are_refused(capsys, argv, words):
    assert main(["map", *argv, "--no-progress"]) == exitcodes.BAD_INPUT
    assert words in _line(capsys)


def _problem(path, eigenvalues, minimisers):
    d = len(eigenvalues[0])
    path.write_text(
        json.dumps(
            {"eigenvalues": eigenvalues, "minimisers": minimisers, "x0": [0.0] * d, "sigma2": 1}
        )
    )
    return path


def test_a_100000_dimension_problem_file_is_refused(tmp_path, capsys):
    d = 100_000
    f = _problem(tmp_path / "p.json", [[1.0] * d, [2.0] * d], [[0.0] * d, [1.0] * d])
    assert main(["map", "--problem", str(f), "--no-progress"]) == exitcodes.BAD_INPUT
    assert "dimension = 100000 is above the cap of 65536" in _line(capsys)


def test_huge_eigenvalues_are_named_by_the_files_field(tmp_path, capsys):
    f = _problem(tmp_path / "p.json", [[1e200, 1.0], [1.0, 1e200]], [[1.0, 0.0], [0.0, 1.0]])
    assert main(["map", "--problem", str(f), "--no-progress"]) == exitcodes.BAD_INPUT
    line = _line(capsys)
    assert "'eigenvalues'" in line and "overflow" in line and "zeta2" not in line


def test_map_help_lists_every_exit_code(capsys):
    assert main(["map", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exit codes: 0 done, 2 bad input, 70 internal error" in out
    assert "71 out of memory or disk space, 130 interrupted" in out


def test_export_dir_errors_name_the_flag(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    argv = [*TRAIN, "--export-dir", str(tmp_path / "f" / "x"), "--output-dir", str(tmp_path)]
    assert main(argv) == exitcodes.BAD_INPUT
    assert "--export-dir" in _line(capsys)


def test_a_full_disk_without_a_file_name_says_so(monkeypatch, capsys):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(theory.check.evaluate, "check", full)
    argv = "check --L 1 --sigma 1 --zeta 0.5 --F0 1 --K 4 --H 8 --T 1000 --lr 0.01".split()
    assert main(argv) == exitcodes.OUT_OF_RESOURCES
    line = _line(capsys)
    assert line.endswith("out of disk space writing an output file (the system did not say which)")


def test_train_into_a_maps_directory_is_refused(tmp_path, capsys):
    (tmp_path / "map.json").write_text("{}")
    for extra in ([], ["--resume", "auto"]):
        assert main([*TRAIN, "--output-dir", str(tmp_path), *extra]) == exitcodes.BAD_INPUT
        assert "holds the output of palsgd map (map.json)" in _line(capsys)


def test_resume_auto_with_nothing_to_resume_says_it_starts_anew(tmp_path, capsys):
    out = tmp_path / "r"
    argv = [*TRAIN, "--seq-len", "16", "--batch-size", "2", "--eval-interval", "0"]
    assert main([*argv, "--output-dir", str(out), "--resume", "auto"]) == 0
    assert "--resume auto: no checkpoint in" in capsys.readouterr().err
