import math

import numpy as np
import pytest

from core.errors import UserInputError
from core.validation import ParameterError
from theory.validation import PARAMS, canonical_name, validate


def test_aliases_map_to_project_names():
    out = validate(lr=0.1, prob_no_grad=0.2, sync_interval=32, outer_lr=0.7, local_sgd_start_iter=0)
    assert out == {"alpha": 0.1, "p": 0.2, "H": 32, "gamma": 0.7, "T0": 0}


@pytest.mark.parametrize(
    "name,value,fragment",
    [
        ("p", 1.0, "[0, 1)"),
        ("p", -0.1, "[0, 1)"),
        ("prob_no_grad", 1.5, "prob_no_grad"),
        ("L", 0.0, "(0, inf)"),
        ("alpha", -1.0, "alpha"),
        ("K", 2.5, "whole number"),
        ("H", 0, "integer in [1, inf)"),
        ("T", 3.2, "whole number"),
        ("sigma", -1.0, "sigma"),
        ("eta", -0.5, "eta"),
        ("zeta", float("nan"), "NaN"),
        ("L", float("inf"), "infinite"),
        ("mu", 1.0, "[0, 1)"),
    ],
)
def test_bad_values_name_parameter_value_and_range(name, value, fragment):
    with pytest.raises(ParameterError) as exc:
        validate({name: value})
    msg = str(exc.value)
    assert canonical_name(name) in msg
    assert fragment in msg
    assert repr(value) in msg or "nan" in msg or "inf" in msg


def test_arrays_checked_elementwise():
    validate(p=np.array([0.0, 0.5, 0.99]))
    with pytest.raises(ParameterError, match="'p'"):
        validate(p=np.array([0.1, 1.0]))


def test_unknown_and_duplicate_names():
    with pytest.raises(UserInputError, match="unknown parameter 'foo'"):
        validate(foo=1)
    with pytest.raises(UserInputError, match="given twice"):
        validate({"lr": 0.1, "alpha": 0.2})


def test_non_numbers_rejected():
    for bad in ("abc", None, True, [[1], [1, 2]]):
        with pytest.raises(ParameterError):
            validate(L=bad)


def test_every_spec_renders_its_range():
    for spec in PARAMS.values():
        assert spec.allowed.count(",") == 1
        assert not math.isnan(spec.low)


def test_check_int_accepts_integers_and_names_the_range():
    import numpy as np

    from core.validation import check_int

    assert check_int("n", 3, 1) == 3 and check_int("n", np.int64(4), 1) == 4
    assert check_int("n", 2.0, 0, integral_floats=True) == 2
    for bad, kw in [(2.0, {}), (2.5, {"integral_floats": True}), (True, {}), ("3", {}), (0, {})]:
        with pytest.raises(ParameterError, match=r"'n'.*integer in \[1, inf\)"):
            check_int("n", bad, 1, **kw)
    with pytest.raises(ParameterError, match=r"integer in \[0, 3\]"):
        check_int("rank", 4, 0, 3)


def test_check_fraction_open_and_closed_ends():
    from core.validation import check_fraction

    assert check_fraction("f", 1.0, allow_zero=False, allow_one=True) == 1.0
    for bad in (0.0, 1.5, float("nan"), "x"):
        with pytest.raises(ParameterError, match=r"'f'.*\(0, 1\]"):
            check_fraction("f", bad, allow_zero=False, allow_one=True)


def test_read_mapping_file(tmp_path):
    from core.files import read_mapping_file

    (tmp_path / "a.yaml").write_text("L: 2\nK: 4\n")
    assert read_mapping_file(tmp_path / "a.yaml", "config file") == {"L": 2, "K": 4}
    (tmp_path / "b.json").write_text('{"L": 1}')
    assert read_mapping_file(tmp_path / "b.json", "config file") == {"L": 1}
    (tmp_path / "empty.yaml").write_text("")
    assert read_mapping_file(tmp_path / "empty.yaml", "config file") == {}
    cases = [
        ("c.json", '{"L": 1,', "is malformed"),
        ("d.yaml", "- 1\n- 2\n", "must hold a mapping, not list"),
        ("absent.yaml", None, "cannot read config file .*it does not exist"),
    ]
    for name, text, msg in cases:
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(UserInputError, match=msg):
            read_mapping_file(tmp_path / name, "config file")


def test_check_number_ranges_and_non_numbers():
    from core.validation import check_number

    assert check_number("x", 2, 0, 3) == 2.0
    assert check_number("x", 0, 0, 3) == 0.0 and check_number("x", 3, 0, 3) == 3.0
    assert check_number("x", np.float32(0.5), 0, 1, low_open=True) == 0.5
    assert check_number("x", math.inf, 0, allow_inf=True) == math.inf
    cases = [
        (dict(low=0, high=3, low_open=True), 0, r"\(0, 3\]"),
        (dict(low=0, high=3, high_open=True), 3, r"\[0, 3\)"),
        (dict(low=0), math.inf, r"\[0, inf\)"),
        (dict(low=0), math.nan, r"\[0, inf\)"),
        (dict(low=0), True, "expected a number"),
        (dict(low=0), "1", "expected a number"),
        (dict(low=0), None, "expected a number"),
    ]
    for kw, bad, msg in cases:
        with pytest.raises(ParameterError, match=r"'x'.*" + msg):
            check_number("x", bad, **kw)
    with pytest.raises(ParameterError, match="expected a number"):
        check_number("x", "abc", 0)


def test_check_choice_names_the_options():
    from core.validation import check_choice

    assert check_choice("coins", "shared", ("independent", "shared")) == "shared"
    with pytest.raises(UserInputError, match=r"unknown coin rule 'x'; known coin rules: \["):
        check_choice("coin rule", "x", ("independent", "shared"))
    with pytest.raises(UserInputError, match=r"unknown bound 'x'; known bounds: \['a', 'b'\]"):
        check_choice("bound", "x", {"a": 1, "b": 2})
    with pytest.raises(UserInputError, match=r"known kinds of thing: \[1\]"):
        check_choice("kind", [1], (1,), plural="kinds of thing")
