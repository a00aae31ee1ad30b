"""The algorithm table (theory.algorithm): every list, choice and rule comes from it, and the
layers that share a rule decide it the same way (the pull's stability above all)."""

import argparse
import math
import re
from pathlib import Path

import pytest

from core.errors import UserInputError
from core.options import declare
from empirical.algorithms import AlgorithmConfig, check_stability
from empirical.config import TrainConfig
from empirical.train import OPTIONS, config_from_args
from empirical.train.launch import check_before_launch
from palsgd.cli import main as cli_main
from theory import algorithm as A
from theory.check import check

ROOT = Path(__file__).resolve().parents[1]


def _train_parser() -> argparse.ArgumentParser:
    """A parser of ``palsgd train``'s options (:data:`empirical.train.OPTIONS`)."""
    parser = argparse.ArgumentParser()
    declare(parser, OPTIONS)
    return parser


#: the pull coefficients of the sweep: both sides of 1 and of 2, the neighbours of 2 in
#: double precision included (alpha = 1, p = 1/4: eta = c/4 is exact, so alpha*eta/p = c)
SWEEP = (0.0, 0.5, 1.0, 1.5, math.nextafter(2.0, 0.0), 2.0, math.nextafter(2.0, 3.0), 2.5, 4.0)


def _check_code(c: float) -> str:
    rep = check(
        dict(L=1.0, sigma=1.0, zeta=0.0, F0=1.0, K=4, H=8, T=1000, p=0.25, eta=c / 4, alpha=1.0)
    )
    verdicts = ("pull_unstable", "pull_overshoot", "pull_coefficient")
    codes = [w.code for w in rep.warnings if w.code in verdicts]
    assert len(codes) == 1, codes
    return codes[0]


def _train_refuses(c: float) -> bool:
    cfg = TrainConfig(algorithm="palsgd", p=0.25, eta=c / 4, alpha=1.0, nproc=1, device="cpu")
    try:
        check_before_launch(cfg)
    except UserInputError as exc:
        assert "'eta'" in str(exc) and ">= 2" in str(exc)
        return True
    return False


@pytest.mark.parametrize("c", SWEEP)
def test_check_and_train_agree_on_the_pull_coefficient(c):
    """palsgd check calls c unstable exactly where palsgd train's validation refuses it:
    c >= 2 (at 2 a pull maps x - z to -(x - z): no contraction), and both take the verdict
    from the spec (theory.algorithm.pull_stability)."""
    code, refused = _check_code(c), _train_refuses(c)
    unstable = c >= A.PULL_EDGE
    assert (code == "pull_unstable") == unstable == refused
    assert code == (
        "pull_unstable" if unstable else "pull_overshoot" if c > 1 else "pull_coefficient"
    )
    verdict = A.AlgorithmSpec.of("palsgd", alpha=1.0, p=0.25, eta=c / 4).pull_stability()
    assert verdict.stable == (not unstable)
    assert (
        check_stability(AlgorithmConfig(name="palsgd", p=0.25, eta=c / 4), 1.0).status
        == verdict.status
    )


def test_the_edge_is_where_a_pull_stops_contracting():
    """The verdict follows the dynamics: a pull maps y = x - z to (1 - c) y."""
    for c in SWEEP:
        contracting = abs(1 - c) < 1 or c == 0.0  # c = 0: no pull (eta = 0)
        assert A.pull_stability(1.0, c / 4, 0.25).stable == (contracting or c < 2)
    assert not A.pull_stability(1.0, 0.5, 0.25).stable  # c = 2: y -> -y


def test_commands_agree_at_exactly_two(capsys, tmp_path):
    """The two commands themselves at c = alpha*eta/p = 2: palsgd check warns that the pull
    is unstable, palsgd train refuses before launching (exit 2, naming eta)."""
    common = ["--p", "0.25", "--eta", "0.5"]
    code = cli_main(
        ["check", "--L", "1", "--sigma", "1", "--zeta", "0", "--F0", "1", "--K", "4", "--H",
         "8", "--T", "1000", "--lr", "1", *common]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "pull_unstable" in out and ">= 2" in out, out
    code = cli_main(
        ["train", "--alpha", "1", "--nproc", "1", "--T", "1", "--no-progress", "--output-dir",
         str(tmp_path / "run"), *common]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "'eta'" in err and ">= 2" in err, err


def test_lists_are_derived_from_the_table():
    names = tuple(A.ALGORITHMS)
    assert A.KINDS == tuple(n for n in names if A.ALGORITHMS[n].simulated)
    assert A.DISTRIBUTED_NAMES == tuple(
        a.distributed for a in A.ALGORITHMS.values() if a.distributed
    )
    assert set(A.LOCAL_NAMES) <= set(A.KINDS) and set(A.WARMUP_NAMES) <= set(A.KINDS)
    assert A.distributed_choices() == A.DISTRIBUTED_NAMES + ("slowmo",)
    parser = _train_parser()
    algo = next(a for a in parser._actions if a.dest.endswith("algorithm"))
    assert tuple(algo.choices) == A.distributed_choices()
    for n in A.distributed_choices():  # the help text names and describes every choice
        assert f"{n}: " in algo.help


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(name="local_sgd", outer="nesterov"), "use 'diloco'"),
        (dict(name="local_sgd", T0=4), "post_local_sgd"),
        (dict(name="post_local_sgd", T0=0), "'T0'"),
        (dict(name="diloco", coins="shared"), "coin model of pull steps"),
        (dict(name="ddp", outer="sgd"), "takes the outer update"),
        (dict(name="diloco", p=0.2), "pull steps exist only in 'palsgd'"),
        (dict(name="palsgd", outer="average", gamma=0.5), "outer='average'"),
    ],
)
def test_spec_and_distributed_config_refuse_alike(kw, match):
    """One rule set: the theory spec and the distributed configuration refuse the same
    combinations with the same message (the configuration holds the spec)."""
    name = kw.pop("name")
    with pytest.raises(UserInputError, match=match):
        AlgorithmConfig(name=name, **kw)
    with pytest.raises(UserInputError, match=match):
        A.AlgorithmSpec.of(name, alpha=0.1, **kw)


def test_slowmo_is_a_preset_of_existing_parts():
    """SlowMo over Local SGD = Local SGD rounds + outer SGD with slow momentum: one entry of
    VARIANTS, available to the theory spec, the distributed configuration and palsgd train."""
    spec = A.AlgorithmSpec.of("slowmo", alpha=0.1, H=4)
    assert (spec.kind, spec.outer, spec.gamma, spec.mu) == ("diloco", "sgd", 1.0, 0.5)
    assert A.AlgorithmSpec.of("slowmo", alpha=0.1, H=4, mu=0.7).mu == 0.7
    cfg = AlgorithmConfig(name="slowmo", H=4)
    assert (cfg.name, cfg.outer, cfg.gamma, cfg.mu) == ("diloco", "sgd", 1.0, 0.5)
    assert cfg.spec == spec.replace(alpha=None)
    parser = _train_parser()
    tc = config_from_args(parser.parse_args(["--algorithm", "slowmo"]))
    assert tc.algorithm == "slowmo" and (tc.outer, tc.gamma, tc.mu, tc.p) == (None,) * 4


def test_local_sgd_from_the_default_preset_averages(capsys):
    """--algorithm local_sgd on the default preset (outer Nesterov 0.7/0.9 for PALSGD): Local
    SGD has no outer optimiser, so the preset's outer settings are dropped with a note."""
    parser = _train_parser()
    tc = config_from_args(parser.parse_args(["--algorithm", "local_sgd"]))
    assert (tc.outer, tc.gamma, tc.mu, tc.p, tc.eta) == (None,) * 5
    assert "has no outer optimiser" in capsys.readouterr().err
    tc = config_from_args(parser.parse_args(["--algorithm", "local_sgd", "--outer", "nesterov"]))
    with pytest.raises(UserInputError, match="use 'diloco'"):
        check_before_launch(tc)


#: a string comparison with an algorithm name (the issue's count)
_COMPARISON = re.compile(r'(==|!=) *"(palsgd|diloco|local_sgd|post_local_sgd|easgd|ddp|sgd)"')


def test_no_algorithm_name_is_compared_outside_the_table():
    """Algorithm names are the table's: no `== "palsgd"` in any package (the table itself,
    theory/algorithm/, decides by its fields and needs none either)."""
    hits = []
    for pkg in ("theory", "empirical", "paper_figures", "palsgd"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if _COMPARISON.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)
