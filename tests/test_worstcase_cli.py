"""palsgd worst-case: the value, the verdict, JSON, exit codes, bad input in one line."""

from __future__ import annotations

import json

import pytest

from palsgd.cli import main


def test_json_has_the_value_and_the_verdict(capsys):
    code = main(["worst-case", "--algorithm", "sgd", "--K", "1", "--T", "4", "--alpha", "1",
                 "--bound", "sgd", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["value"] == pytest.approx(0.5, rel=1e-5)
    assert out["verdict"] == "certified" and out["inside_conditions"] is True


def test_text_output_names_the_relaxation(capsys):
    code = main(["worst-case", "--algorithm", "local_sgd", "--K", "2", "--H", "2", "--R", "2",
                 "--alpha", "0.1", "--zeta", "1", "--measured", "anchors"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and "1.6597" in text and "full relaxation" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--algorithm", "foo", "--alpha", "1", "--T", "4"], "--algorithm"),
        (["--algorithm", "sgd", "--alpha", "-1", "--T", "4"], "--alpha/--lr: -1 is not in (0, inf)"),
        (["--algorithm", "local_sgd", "--H", "2", "--alpha", "0.1"], "--T (steps) or --R"),
        (["--algorithm", "local_sgd", "--H", "2", "--T", "4", "--alpha", "0.1", "--bound",
          "local_sgd_outer"], "not about --algorithm"),
        (["--algorithm", "palsgd", "--H", "2", "--T", "4", "--alpha", "0.1", "--p", "0.5",
          "--eta", "1", "--pulls", "01,1x"], "--pulls"),
        (["--algorithm", "easgd", "--H", "2", "--T", "4", "--alpha", "0.1"], "elastic"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        code = main(["worst-case", *argv])
        raise SystemExit(code)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2
    assert needle in err and "Traceback" not in err and len(err.splitlines()) == 1
