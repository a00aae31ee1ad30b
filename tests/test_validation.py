import math

import numpy as np
import pytest

from theory.validation import (
    PARAMS,
    ParameterError,
    UserInputError,
    canonical_name,
    validate,
)


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
