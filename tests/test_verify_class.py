"""The class stage of palsgd verify: verdicts at the worst case of the whole class, with
negative controls it must reject and true statements it must certify."""

from __future__ import annotations

import numpy as np
import pytest

from palsgd.cli import main
from theory import bounds
from theory.lower import lower_bounds
from theory.verify.bound_file import load_bound_file
from theory.verify.classstage import class_coverage, verify_class
from theory.worstcase import design_of
from theory.worstcase.judge import CERTIFIED, EXCEEDED, REFUTED, judge_upper
from theory.worstcase.pep import solve

#: the isotropic quadratic's exact value under gradient descent: the class worst case of
#: gradient descent (with both A4 inequalities) at every design
QUAD = "2*L*F0*(1 - (1 - alpha*L)**(2*T))/(T*(1 - (1 - alpha*L)**2))"


def _file(tmp_path, name: str, expression: str, algorithm: str = "sgd", extra: str = "") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nexpression: {expression}\nconditions: ['L*alpha <= 1'{extra}]\n"
        f"algorithm: {algorithm}\nassumptions: [A1, A2, A3, A4]\n"
    )
    return str(path)


def test_every_registered_bound_is_covered_or_says_why():
    for b in [*bounds.all_bounds(), *lower_bounds()]:
        why = class_coverage(b)
        assert why == "" or "elastic" in why, (b.name, why)


@pytest.mark.parametrize("name", ["sgd", "local_sgd_noniid", "palsgd_shared_coins"])
def test_registered_bounds_are_certified_with_a_class_tightness(name):
    res, rows = verify_class(bounds.get(name), n=2, seed=3)
    assert res.verdict == CERTIFIED and res.designs >= 2
    assert 0 < res.class_tightness <= 1 + 1e-4
    assert all(r["verdict"] == CERTIFIED for r in rows)


def test_a_true_statement_is_certified_and_a_false_one_refuted(tmp_path):
    """1.03 x the class worst case of gradient descent holds; 0.97 x it does not, and an
    explicit instance shows it."""
    true = load_bound_file(_file(tmp_path, "plus3", f"1.03*{QUAD}"))[0]
    false = load_bound_file(_file(tmp_path, "minus3", f"0.97*{QUAD}"))[0]
    res, _ = verify_class(true, n=3, seed=0)
    assert res.verdict == CERTIFIED
    assert res.class_tightness == pytest.approx(1 / 1.03, rel=1e-4)
    res, rows = verify_class(false, n=3, seed=0)
    assert res.verdict == REFUTED
    worst = [r for r in rows if r["verdict"] == REFUTED][0]
    assert worst["lifted"] > worst["bound_value"]


def test_gap_and_heterogeneity_together_are_caught(tmp_path):
    """Local SGD: the one-Hessian worst case plus a small heterogeneity term holds at
    F0 = 0 and at zeta = 0 separately, not together (H = 3, T = 6, alpha L = 0.2,
    zeta = 3: the class reaches 1.09, the statement 0.97)."""
    b = load_bound_file(_file(tmp_path, "split", f"{QUAD} + 0.05*H*(H - 1)*L**2*alpha**2*zeta**2",
                              algorithm="local_sgd"))[0]  # fmt: skip
    d = design_of("local_sgd", K=2, H=3, T=6, L=1.0, alpha=0.2, zeta=3.0, F0=1.0)
    assert judge_upper(b, design_of("local_sgd", K=2, H=3, T=6, L=1.0, alpha=0.2, zeta=0.0,
                                    F0=1.0)).verdict == CERTIFIED  # fmt: skip
    v = judge_upper(b, d)
    assert v.verdict == REFUTED and v.lifted > v.bound_value


def test_exceeding_the_relaxation_only_is_never_called_false():
    d = design_of("local_sgd", K=2, H=2, T=4, L=1.0, alpha=0.3, zeta=1.0, F0=1.0)
    w = solve(d).value

    class Between:  # a statement just below the relaxed class, above every instance found
        name, kind, algorithms, parameters = "between", "upper", ("local_sgd",), ("alpha",)

        def evaluate(self, **kw):
            return np.asarray(w * (1 - 1e-3))

    v = judge_upper(Between(), d, lift_starts=2)
    assert v.verdict in (EXCEEDED, REFUTED)
    if v.verdict == REFUTED:
        assert v.lifted > v.bound_value  # only with an explicit instance above it
    else:
        assert v.lifted is None or v.lifted <= v.bound_value


def test_verify_reports_the_class_stage(tmp_path):
    out = tmp_path / "r"
    path = _file(tmp_path, "minus3", f"0.97*{QUAD}")
    code = main(["verify", "--bound-file", path, "--quick", "--problems", "quadratic",
                 "--no-progress", "--no-plots", "--out", str(out)])  # fmt: skip
    assert code == 1
    text = (out / "class.csv").read_text()
    assert "minus3,upper,refuted" in text
    assert "class_tightness" in (out / "tightness.csv").read_text().splitlines()[0]
    assert "class stage" in (out / "summary.txt").read_text()
