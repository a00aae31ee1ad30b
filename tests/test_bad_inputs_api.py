"""Bad input to the public API: a :class:`~core.errors.UserInputError` (the CLI's exit
2) whose message names the parameter, never a bare numpy/torch/YAML exception."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserInputError


def _api_cases(tmp_path):
    from core import files
    from core import validation as checks
    from empirical import cost as costmodel
    from empirical.algorithms import AlgorithmConfig
    from empirical.config import resolve_config
    from theory import bounds, problems, simulate, validation
    from theory.check import check

    base = dict(L=1, sigma=1, zeta=0.5, F0=1, K=4, H=8, T=1000, lr=0.01)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)))
    dup = tmp_path / "dup.yaml"
    dup.write_text("a: 1\na: 2\n")
    dupjson = tmp_path / "dup.json"
    dupjson.write_text('{"a": 1, "a": 2}')
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    import torch

    from empirical.algorithms import build_algorithm
    from theory.safe_parse import parse_formula
    from theory.verify.bound_file import load_bound_file

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    quad = problems.make_problem("quadratic", K=2, d=3)
    spec = simulate.AlgorithmSpec("local_sgd", alpha=0.1, H=2)
    b = bounds.get("palsgd")
    return [
        (lambda: validation.validate(L=-1), "'L'"),
        (lambda: validation.validate(K=0.5), "'K'"),
        (lambda: validation.validate(foo=1), "'foo'"),
        (lambda: validation.validate({"lr": 0.1, "alpha": 0.1}), "'alpha'"),
        (lambda: validation.validate(p=np.array([0.1, 2.0])), "'p'"),
        (lambda: validation.validate(T=True), "'T'"),
        (lambda: validation.validate(T=None), "'T'"),
        (lambda: validation.validate(L="abc"), "'L'"),
        (lambda: validation.validate(L=[]), "'L'"),
        (lambda: validation.validate(mu=float("nan")), "'mu'"),
        (lambda: checks.check_int("seed", -1), "'seed'"),
        (lambda: checks.check_int("seed", 1.5), "'seed'"),
        (
            lambda: checks.check_fraction("confidence", 1.5, allow_zero=False, allow_one=False),
            "'confidence'",
        ),
        (lambda: files.read_mapping_file(binary, "config file"), "not a text file"),
        (lambda: files.read_mapping_file(dup, "config file"), "'a' appears twice"),
        (lambda: files.read_mapping_file(dupjson, "config file"), "'a' appears twice"),
        (lambda: files.read_mapping_file(tmp_path, "config file"), "directory"),
        (lambda: files.check_output_dir(plain, "--out"), "--out"),
        (lambda: files.check_output_file(tmp_path, "--output"), "--output"),
        (lambda: files.check_output_file(plain / "x.json", "--output"), "--output"),
        (lambda: files.check_memory(1e30, "K = 10^29 workers"), "K = 10^29 workers"),
        (lambda: files.check_memory(float("inf"), "R = inf"), "R = inf"),
        (lambda: check({**base, "L": -1}), "'L'"),
        (lambda: check(base, bounds=["nope"]), "nope"),
        (lambda: check(base, algorithm="nope"), "nope"),
        (lambda: check({**base, "L": [1, 2]}), "'L'"),
        (lambda: check(base, preset="nope"), "nope"),
        (lambda: bounds.get("nope"), "nope"),
        (lambda: b.max_H(step="nope", **base), "step"),
        (lambda: b.evaluate(**{**base, "p": 1.5, "eta": 1}), "'p'"),
        (lambda: problems.make_problem("nope", K=2), "nope"),
        (lambda: problems.make_problem("quadratic", K=0), "'K'"),
        (lambda: problems.make_problem("quadratic", K=2, d=0), "'d'"),
        (lambda: problems.make_problem("quadratic", K=2, zeta=-1), "'zeta'"),
        (lambda: problems.make_problem("quadratic", K=2, noise="nope"), "nope"),
        (lambda: problems.make_problem("quadratic", K=10**9, d=10**9), "K = 1000000000"),
        (lambda: problems.make_problem("logistic", K=2, d=10**9), "d = 1000000000"),
        (lambda: simulate.simulate(quad, spec, T=0, R=1, seed=0), "'T'"),
        (lambda: simulate.simulate(quad, spec, T=1, R=0, seed=0), "'R'"),
        (lambda: simulate.simulate(quad, spec, T=1, R=1, seed=-1), "'seed'"),
        (lambda: simulate.simulate("quad", spec, T=1, R=1, seed=0), "problem"),
        (lambda: simulate.simulate(quad, spec, T=10, R=10**12, seed=0), "R = 1000000000000"),
        (lambda: simulate.simulate(quad, spec, T=10**13, R=1, seed=0), "T = 10000000000000"),
        (lambda: AlgorithmConfig(name="nope"), "nope"),
        (lambda: AlgorithmConfig(name="diloco", p=0.2), "'p'"),
        (lambda: AlgorithmConfig(name="palsgd", H=0), "'H'"),
        (lambda: AlgorithmConfig(name="palsgd", coins="nope"), "coins"),
        (lambda: resolve_config(preset="nope"), "nope"),
        (lambda: resolve_config(overrides={"nproc": 0}), "'nproc'"),
        (lambda: resolve_config(overrides={"bogus": 1}), "bogus"),
        (lambda: resolve_config(file=binary), "not a text file"),
        (lambda: resolve_config(file=dup), "appears twice"),
        (lambda: costmodel.paper_scale_prediction("nope", "8xGPU-NVLink"), "nope"),
        (
            lambda: costmodel.paper_scale_prediction("resnet50-imagenet", "8xGPU-NVLink", steps=0),
            "'steps'",
        ),
        (lambda: costmodel.paper_scale_prediction("resnet50-imagenet", "nope"), "nope"),
        (lambda: costmodel.load_profiles(binary), "not a text file"),
        (lambda: costmodel.load_profiles(dup), "appears twice"),
        (lambda: costmodel.measure_allreduce([4096], world_size=1), "'world_size'"),
        (lambda: costmodel.measure_allreduce([4096], trials=0), "'trials'"),
        (lambda: costmodel.measure_allreduce([4096], repeats=0), "'repeats'"),
        # issue 21: None or a wrong type names the argument; formulas and inputs bounded
        (lambda: check(None), "'values'"),
        (lambda: check("L=1"), "'values'"),
        (lambda: check(base, bounds=5), "'bounds'"),
        (lambda: build_algorithm(AlgorithmConfig(name="palsgd"), "notamodel", opt), "'model'"),
        (lambda: build_algorithm(None, model, opt), "'config'"),
        (lambda: build_algorithm(AlgorithmConfig(name="ddp"), model, None), "'inner_optimizer'"),
        (lambda: load_bound_file(None), "'path'"),
        (lambda: load_bound_file(3), "'path'"),
        (lambda: parse_formula("((2**64)**64)**64"), "magnitude"),
        (lambda: parse_formula("1e999*F0"), "1e999"),
        (lambda: parse_formula("(L**8)**16"), "exponent"),
        (lambda: parse_formula("0/0"), "undefined"),
        (lambda: files.read_mapping_file("/dev/zero", "config file"), "character device"),
        (lambda: files.check_output_file("/dev/null", "--output"), "character device"),
        (lambda: costmodel.measure_allreduce([4096], world_size=10**5), "world_size"),
        (lambda: costmodel.emulated_link_check(delay_s=1e9), "timeout"),
    ]


N_API_CASES = 76


def test_enough_api_cases(tmp_path):
    assert len(_api_cases(tmp_path)) == N_API_CASES


@pytest.mark.parametrize("i", range(N_API_CASES))
def test_api_bad_input_raises_user_input_error(i, tmp_path):
    fn, needle = _api_cases(tmp_path)[i]
    with pytest.raises(UserInputError) as exc:
        fn()
    assert needle in str(exc.value)
