"""Bound files say what they measure and may state lower bounds (issue 33, item 3).

``measured: anchors`` is compared on the anchors: the same formula passes at the iterates
and is flagged at the anchors. ``kind: lower`` is verified like a registered lower bound:
a false one (twice the initial-gap term of the quadratic lower bound) is refuted by the
known worst case of the class, a true one (the quadratic lower bound's closed form,
``attained_on: quadratic``) is not, and its reproduce command evaluates it again. Bad
fields exit 2 with one line naming the key.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from palsgd.cli import main
from theory import bounds as registry
from theory.lower.quadratic import quadratic_lower
from theory.verify.bound_file import load_bound_file
from theory.verify.bound_file_lower import FileLowerBound
from theory.verify.oracle import evaluate, family_of, parse_design
from theory.verify.untested import UNTESTED

QUICK = ["--quick", "--problems", "quadratic", "--controls", "--no-progress", "--no-plots"]

#: Wang and Joshi's i.i.d. Local SGD bound (the formula of local_sgd_iid)
IID = """name: iid_{m}
expression: 2*F0/(T*alpha) + L**2*alpha**2*sigma**2*(H - 1) + L*alpha*sigma**2/K
conditions: ["H*L**2*alpha**2*(H - 1) + L*alpha <= 1"]
algorithm: local_sgd
assumptions: [A1, A2, A3iid, A4]
measured: {m}
"""
#: the quadratic lower bound's closed form (local_sgd_quadratic_lower), r = (1 - alpha L)^2
R_ = "((1 - alpha*L)**2)"
AVG = f"(1 - {R_}**T)/(T*(1 - {R_}))"
TRUE_LOWER = f"""name: my_floor
kind: lower
expression: 2*L*F0*{AVG} + L**2*alpha**2*sigma**2/(K*(1 - {R_}))*(1 - {AVG})
conditions: ["alpha*L <= 1"]
algorithm: [sgd, local_sgd]
attained_on: quadratic
"""
#: twice its initial-gap term: above the descent lemma's worst case at alpha L = 1
FALSE_LOWER = f"""name: my_doubled_floor
kind: lower
expression: 4*L*F0*{AVG}
conditions: ["alpha*L <= 1"]
algorithm: sgd
"""


def _file(tmp_path, text: str, name: str = "b.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(tmp_path, path, capsys, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / f"r_{path.stem}"
    code = main(["verify", "--bound-file", str(path), *QUICK, *extra, "--out", str(out)])
    return code, json.loads((out / "results.json").read_text()), capsys.readouterr().out


# ----------------------------------------------------------------------- measured
def test_an_anchors_statement_from_a_file_is_compared_on_anchors(tmp_path):
    """A file's copy of local_sgd_outer with ``measured: anchors`` measures what the
    registered bound measures; with ``measured: iterates`` (Theorem 2's formula read at the
    iterates) the measured value differs."""
    ref = registry.get("local_sgd_outer")
    conds = ", ".join(f'"{c.relation}"' for c in ref.conditions)
    body = (
        f"expression: {ref.expression}\nconditions: [{conds}]\nalgorithm: diloco\n"
        "outer: [sgd, nesterov]\nassumptions: [A1, A2, A3, A4]\n"
    )
    (anch,) = load_bound_file(_file(tmp_path, f"name: a\nmeasured: anchors\n{body}", "a.yaml"))
    (iters,) = load_bound_file(_file(tmp_path, f"name: i\n{body}", "i.yaml"))
    assert anch.measured == "anchors" and family_of(anch).anchors
    assert iters.measured == "iterates" and not family_of(iters).anchors
    at = "L=1 lam_F=0.5 F0=1 sigma2=1 K=4 H=16 T=320 gamma=0.7 mu=0.9 heavy_ball=1 alpha=1e-3"
    d = parse_design(at)
    m_ref = float(evaluate(ref, family_of(ref), d).measured[0])
    assert float(evaluate(anch, family_of(anch), d).measured[0]) == m_ref
    assert abs(float(evaluate(iters, family_of(iters), d).measured[0]) / m_ref - 1) > 1e-3


def test_the_same_formula_passes_on_the_iterates_and_fails_on_the_anchors(tmp_path, capsys):
    code, rep, _ = _run(tmp_path, _file(tmp_path, IID.format(m="iterates"), "it.yaml"), capsys)
    assert code == 0 and rep["exact"][0]["verdict"] == "not shown false"
    code, rep, text = _run(tmp_path, _file(tmp_path, IID.format(m="anchors"), "an.yaml"), capsys)
    (row,) = rep["exact"]
    assert code == 1 and row["verdict"] == "violated" and row["worst_ratio"] > 1.05
    d = row["worst_design"]
    assert d["T"] % d["H"] == 0  # measured over full rounds
    assert "BOUND VIOLATED (exact): iid_anchors" in text


# ----------------------------------------------------------------------- lower bounds
def test_a_lower_bound_from_a_file_is_a_lower_bound(tmp_path):
    (lb,) = load_bound_file(_file(tmp_path, TRUE_LOWER))
    assert isinstance(lb, FileLowerBound) and lb.kind == "lower"
    assert lb.algorithms == ("sgd", "local_sgd") and lb.attained_on == "quadratic"
    v = dict(alpha=np.array([0.3, 0.5, 1.5]), L=1.0, sigma=0.7, K=3.0, T=20.0, F0=2.0)
    want = quadratic_lower(**v)
    got = lb.evaluate(**v)
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-12)
    assert np.isnan(got[2])  # alpha L > 1: outside its conditions, no claim


def test_a_false_lower_bound_from_a_file_is_refuted(tmp_path, capsys):
    path = _file(tmp_path, FALSE_LOWER)
    code, rep, text = _run(tmp_path, path, capsys)
    assert code == 1
    (row,) = rep["lower"]
    assert row["verdict"] == "violated" and row["worst_ratio"] == pytest.approx(2, rel=1e-6)
    assert row["refuted_by"] == "the known worst case of the class"
    assert "LOWER BOUND VIOLATED (exact): my_doubled_floor" in text
    assert rep["summary"]["new_violations"] == ["my_doubled_floor"]
    cmd = row["worst_command"]
    assert f"--bound-file {path}" in cmd
    at = cmd.split("--at ", 1)[1].strip("'")
    argv = ["verify", "--bound-file", str(path), "--bounds", "my_doubled_floor", "--at", at]
    assert main(argv) == 1
    assert "VIOLATED (refuted by the known worst case" in capsys.readouterr().out


def test_a_true_lower_bound_from_a_file_passes(tmp_path, capsys):
    code, rep, text = _run(tmp_path, _file(tmp_path, TRUE_LOWER), capsys)
    assert code == 0
    (row,) = rep["lower"]
    assert row["verdict"] == "not shown false" and row["inside"] > 50
    assert row["worst_ratio"] == pytest.approx(1, rel=1e-6)  # attained by its own instance
    assert {c["status"] for c in rep["controls"]} == {"rejected"}  # x 1.5 and x 2
    assert "result: no bound violated (exit code 0)" in text


def test_a_lower_bound_no_design_meets_is_untested(tmp_path, capsys):
    text = FALSE_LOWER.replace('["alpha*L <= 1"]', '["alpha*L <= 0.001", "1 <= alpha*L"]')
    code, rep, _ = _run(tmp_path, _file(tmp_path, text), capsys)
    assert code == 6 and rep["lower"][0]["verdict"] == UNTESTED
    assert rep["summary"]["untested"] == ["my_doubled_floor"]


# ----------------------------------------------------------------------- bad fields
_UP = "name: x\nexpression: 2*F0/(alpha*T)\nconditions: ['alpha*L <= 1']\n"
_LOW = _UP + "kind: lower\n"


@pytest.mark.parametrize(
    "text, named",
    [
        (_UP + "measured: anchor\nalgorithm: local_sgd\n", "'measured' must be one of"),
        (_UP + "measured: [anchors]\nalgorithm: local_sgd\n", "'measured' must be one of"),
        (_UP + "measured: anchors\nalgorithm: sgd\n", "'measured: anchors' needs an algorithm"),
        (_UP + "kind: sideways\nalgorithm: sgd\n", "'kind' must be one of"),
        (_UP + "attained_on: quadratic\nalgorithm: sgd\n", "'attained_on' is a field of a lower"),
        (_LOW + "coins: shared\n", "['coins'] do not apply to a lower bound"),
        (_LOW + "algorithm: palsgd\n", "'algorithm' 'palsgd'"),
        (_LOW + "algorithm: adam\n", "'algorithm'"),
        (_LOW + "measured: anchors\n", "'measured' of a lower bound must be 'iterates'"),
        (_LOW + "attained_on: cube\n", "'attained_on' must be one of"),
        (_LOW.replace("2*F0/(alpha*T)", "beta*F0"), "'expression' uses ['beta']"),
    ],
)
def test_bad_fields_exit_2_naming_the_key(tmp_path, capsys, text, named):
    f = _file(tmp_path, text)
    assert main(["verify", "--bound-file", str(f), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
