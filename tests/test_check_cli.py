"""``palsgd check`` / ``palsgd bounds`` and the Python API :func:`theory.check.check`.

Expected numbers are computed here from the published formulas (Wang & Joshi Cor. 2 /
Thm. 2), not copied from the checker's output.
"""

import json

import numpy as np
import pytest

from core.errors import UserInputError
from core.validation import ParameterError
from palsgd.cli import main
from theory.bounds import get
from theory.check import CheckReport, check, infer_algorithm, load_config
from theory.presets import PRESETS, get_preset

BASE = dict(L=2.0, sigma=1.5, F0=3.0, K=4, H=16, T=100_000)


def cor2(alpha, L, sigma, F0, K, H, T):
    return 2 * F0 / (alpha * T) + alpha * L * sigma**2 / K + alpha**2 * L**2 * sigma**2 * (H - 1)


# ----------------------------------------------------------------------------- Python API
def test_check_reports_conditions_terms_and_value():
    alpha = 0.01
    rep = check({**BASE, "alpha": alpha})
    assert isinstance(rep, CheckReport)
    assert rep.algorithm == "local_sgd"
    names = [b.name for b in rep.bounds]
    assert "local_sgd_iid" in names and "local_sgd_noniid" in names
    assert "sgd" not in names and "easgd" not in names
    iid = rep.bound("local_sgd_iid")
    assert iid.status == "evaluated" and iid.alpha_source == "given"
    assert iid.value == pytest.approx(cor2(alpha, **BASE), rel=1e-12)
    (c,) = iid.conditions
    lhs = alpha * 2.0 + alpha**2 * 4.0 * 16 * 15
    assert c.margin == pytest.approx(1 - lhs, rel=1e-12)
    assert c.holds == (lhs <= 1)
    assert sum(t.share for t in iid.terms) == pytest.approx(100.0)
    assert iid.dominant_term == max(iid.terms, key=lambda t: t.value).term
    noniid = rep.bound("local_sgd_noniid")
    assert noniid.status == "skipped" and "zeta" in noniid.reason


def test_failing_condition_is_reported_not_raised():
    rep = check({**BASE, "alpha": 0.5})
    iid = rep.bound("local_sgd_iid")
    assert iid.conditions_hold is False
    assert iid.conditions[0].holds is False and iid.conditions[0].margin < 0
    assert iid.value is not None  # still evaluated


def test_without_alpha_the_optimal_step_is_used():
    rep = check(BASE)
    iid = rep.bound("local_sgd_iid")
    assert iid.alpha_source == "optimal"
    assert iid.alpha == pytest.approx(iid.optimal_alpha)
    grid = np.logspace(-8, 0, 4001) * iid.max_alpha
    assert iid.value <= cor2(grid, **BASE).min() * (1 + 1e-9)
    assert iid.conditions_hold


def test_max_H_and_rounds():
    rep = check({**BASE, "alpha": 1e-3, "eps": 0.05})
    iid = rep.bound("local_sgd_iid")
    L, s, F0, K, T = BASE["L"], BASE["sigma"], BASE["F0"], BASE["K"], BASE["T"]
    h = 1 + (2 * L * F0 + s**2) * np.sqrt(T) / (s**2 * K**1.5)  # rate terms at sqrt(K/T)/L
    assert iid.max_H_speedup == np.floor(h)
    assert iid.rounds_to_eps is not None and iid.rounds_to_eps > 0
    R = iid.rounds_to_eps
    T_R = R * BASE["H"]
    grid = np.logspace(-7, 0, 20001)
    vals = {**BASE, "T": T_R}
    ok = grid * L + (grid * L) ** 2 * 16 * 15 <= 1
    assert cor2(grid[ok], **vals).min() <= 0.05 * (1 + 1e-6)


def test_iid_bounds_are_skipped_for_heterogeneous_data():
    rep = check({**BASE, "zeta": 0.3, "alpha": 1e-3})
    assert rep.bound("local_sgd_iid").status == "skipped"
    assert "i.i.d." in rep.bound("local_sgd_iid").reason
    assert rep.bound("local_sgd_noniid").status == "evaluated"


def test_algorithm_inference():
    assert infer_algorithm({"p": 0.2, "H": 8})[0] == "palsgd"
    assert infer_algorithm({"p": 0.0, "H": 8})[0] == "local_sgd"
    assert infer_algorithm({"H": 8})[0] == "local_sgd"
    assert infer_algorithm({"H": 1})[0] == "sgd"
    assert infer_algorithm({})[0] == "sgd"
    rep = check({**BASE, "H": 1, "alpha": 0.01})
    assert [b.name for b in rep.bounds] == ["sgd"]


def test_palsgd_configuration_uses_only_bounds_covering_palsgd():
    rep = check({**BASE, "p": 0.2, "eta": 1.0, "alpha": 0.01})
    assert rep.algorithm == "palsgd"
    assert all("palsgd" in b.algorithms for b in rep.bounds)
    if not rep.bounds:
        assert any(w.code == "no_bound" for w in rep.warnings)


def test_explicit_bound_for_another_algorithm_carries_a_caveat():
    rep = check({**BASE, "alpha": 0.01}, bounds=["sgd", "easgd"])
    assert [b.name for b in rep.bounds] == ["sgd", "easgd"]
    assert not rep.bound("sgd").applicable and rep.bound("sgd").caveats
    assert rep.bound("sgd").max_H_speedup is None and not rep.bound("sgd").uses_H


@pytest.mark.parametrize(
    "alpha,eta,p,code",
    [
        (0.5, 1.0, 0.2, "pull_unstable"),
        (0.3, 1.0, 0.2, "pull_overshoot"),
        (0.01, 1.0, 0.2, "pull_coefficient"),
    ],
)
def test_pull_stability_warnings(alpha, eta, p, code):
    rep = check({**BASE, "alpha": alpha, "eta": eta, "p": p})
    w = {x.code: x for x in rep.warnings}
    assert code in w
    c = alpha * eta / p
    expected_margin = 2 - c if code == "pull_unstable" else 1 - c
    assert w[code].margin == pytest.approx(expected_margin)


def test_gradient_branch_warning():
    rep = check({**BASE, "L": 10.0, "alpha": 0.17, "p": 0.2, "eta": 0.1})
    w = {x.code: x for x in rep.warnings}
    g = 0.17 * 10.0 / 0.8
    assert g > 2 and w["gradient_step_unstable"].margin == pytest.approx(2 - g)
    rep = check({**BASE, "L": 10.0, "alpha": 0.1, "p": 0.2, "eta": 0.1})
    assert "gradient_step_unstable" not in {x.code for x in rep.warnings}


def test_outer_optimizer_caveat_for_averaging_bounds():
    rep = check({**BASE, "alpha": 0.01, "gamma": 0.7, "mu": 0.9})
    assert "outer_optimizer" in {w.code for w in rep.warnings}
    assert any("averaging" in c for c in rep.bound("local_sgd_iid").caveats)
    rep = check({**BASE, "alpha": 0.01, "gamma": 1.0, "mu": 0.0})
    assert "outer_optimizer" not in {w.code for w in rep.warnings}


def test_check_rejects_bad_input_by_name():
    with pytest.raises(ParameterError, match="'p'"):
        check({**BASE, "prob_no_grad": 1.5})
    with pytest.raises(UserInputError, match="scalar"):
        check({**BASE, "alpha": [0.1, 0.2]})
    with pytest.raises(UserInputError, match="known bounds"):
        check(BASE, bounds=["nope"])


def test_to_dict_is_json_and_round_trips_numbers():
    rep = check({**BASE, "alpha": 0.01, "eps": 0.1})
    d = json.loads(json.dumps(rep.to_dict(), allow_nan=False))
    assert d["bounds"][0]["value"] == pytest.approx(rep.bounds[0].value)
    assert d["inputs"]["alpha"] == 0.01


# ----------------------------------------------------------------------------- presets
def test_presets_hold_the_documented_values():
    readme = get_preset("gptneo-8m-readme").values
    assert dict(readme) == dict(
        K=4, H=32, T0=32, p=0.2, eta=1.0, alpha=0.01, gamma=0.1, mu=0.9, A=16
    )
    diloco = get_preset("diloco").values
    assert (diloco["H"], diloco["gamma"], diloco["mu"], diloco["K"]) == (500, 0.7, 0.9, 8)
    defaults = get_preset("authors-defaults-gptneo").values
    assert (defaults["p"], defaults["eta"], defaults["H"], defaults["T0"]) == (0.2, 0.5, 100, 100)
    for p in PRESETS.values():
        assert not {"L", "sigma", "zeta", "F0", "T"} & set(p.values)
    with pytest.raises(UserInputError, match="known presets"):
        get_preset("nope")


def test_readme_preset_agrees_with_the_trainer_run():
    # theory.presets restates the README run's hyperparameters (theory does not import
    # empirical); they must stay those of the trainer's one definition of that run
    from empirical.config import README_8M_RUN

    readme = get_preset("gptneo-8m-readme").values
    shared = set(readme) & set(README_8M_RUN)
    assert shared == set(readme) - {"K"}  # K is the trainer's process count (nproc)
    assert {k: readme[k] for k in shared} == {k: README_8M_RUN[k] for k in shared}


def test_preset_notes_flag_adamw_and_user_values_override():
    rep = check({"L": 1.0, "alpha": 0.02}, preset="gptneo-8m-readme")
    assert rep.inputs["alpha"] == 0.02 and rep.inputs["H"] == 32
    text = " ".join(w.message for w in rep.warnings)
    assert "AdamW" in text and "SGD" in text


# ----------------------------------------------------------------------------- CLI
ARGS = ["--L", "2", "--sigma", "1.5", "--F0", "3", "--K", "4", "--H", "16", "--T", "100000"]


def test_cli_text_report(capsys):
    assert main(["check", *ARGS, "--alpha", "0.5", "--verbose"]) == 0  # conditions fail: exit 0
    out = capsys.readouterr().out
    assert "[FAIL] step" in out and "local_sgd_iid" in out
    assert "dominant term" in out and "max H for linear speed-up" in out
    assert "SKIPPED: missing parameter(s) ['zeta']" in out


def test_cli_accepts_authors_aliases(capsys):
    argv = [
        "check",
        "--L",
        "1",
        "--sigma",
        "1",
        "--F0",
        "1",
        "--T",
        "1000",
        "--world_size",
        "4",
        "--lr",
        "0.01",
        "--prob_no_grad",
        "0.2",
        "--sync_interval",
        "8",
        "--outer_lr",
        "0.5",
        "--eta",
        "1",
        "--zeta",
        "0.5",
        "--json",
    ]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["inputs"] == {
        "L": 1,
        "sigma": 1,
        "F0": 1,
        "K": 4,
        "T": 1000,
        "p": 0.2,
        "alpha": 0.01,
        "eta": 1,
        "gamma": 0.5,
        "H": 8,
        "zeta": 0.5,
    }
    assert d["algorithm"] == "palsgd"


def test_cli_json_and_repeated_bound(capsys):
    assert (
        main(
            ["check", *ARGS, "--bound", "sgd", "--bound", "local_sgd_iid", "--json", "--eps", "0.1"]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert [b["name"] for b in d["bounds"]] == ["sgd", "local_sgd_iid"]
    assert d["bounds"][1]["rounds_to_eps"] > 0
    assert d["bounds"][0]["max_H_speedup"] is None


def test_cli_config_file_with_flag_override(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "L: 2\nsigma: 1.5\nF0: 3\nworld_size: 4\nsync_interval: 16\nT: 100000\nlr: 1e-3\n"
    )
    assert main(["check", "--config", str(cfg), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["inputs"]["alpha"] == 0.001 and d["inputs"]["H"] == 16
    assert main(["check", "--config", str(cfg), "--lr", "0.002", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"]["alpha"] == 0.002
    js = tmp_path / "run.json"
    js.write_text(
        json.dumps({"L": 2, "sigma": 1.5, "F0": 3, "K": 4, "H": 16, "T": 100000, "bounds": ["sgd"]})
    )
    assert main(["check", "--config", str(js), "--json"]) == 0
    assert [b["name"] for b in json.loads(capsys.readouterr().out)["bounds"]] == ["sgd"]


@pytest.mark.parametrize(
    "content,suffix,fragment",
    [
        ("L: [1, 2\n", ".yaml", "malformed"),
        ('{"L": 1,', ".json", "malformed"),
        ("L: 1\nlearning_rate: 0.1\n", ".yaml", "unknown key 'learning_rate'"),
        ("- 1\n- 2\n", ".yaml", "mapping"),
        ("L: abc\n", ".yaml", "'L'"),
        ("prob_no_grad: 1.5\n", ".yaml", "'p'"),
    ],
)
def test_cli_bad_config_file_exits_2_naming_file(tmp_path, capsys, content, suffix, fragment):
    path = tmp_path / f"bad{suffix}"
    path.write_text(content)
    assert main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_load_config_missing_file_names_it(tmp_path):
    with pytest.raises(UserInputError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    "argv,fragment",
    [
        # a notation flag out of its range: refused by argparse, naming the flag
        (["--p", "1.5"], "argument --p/--prob_no_grad: 1.5 is not in [0, 1)"),
        (["--sync_interval", "2.5"], "--H/--sync_interval: 2.5 is not an integer in [1, inf)"),
        (["--bound", "nope"], "unknown bound"),
        (["--preset", "nope"], "invalid choice: 'nope'"),
    ],
)
def test_cli_bad_input_exit_2(capsys, argv, fragment):
    assert main(["check", *ARGS, *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


def test_cli_preset(capsys):
    assert (
        main(
            [
                "check",
                "--preset",
                "gptneo-8m-readme",
                "--L",
                "1",
                "--sigma",
                "1",
                "--F0",
                "1",
                "--T",
                "10000",
                "--bound",
                "local_sgd_iid",
                "--verbose",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "AdamW" in out and "pull coefficient alpha*eta/p = 0.05" in out
    assert main(["check", "--list-presets"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PRESETS)


def test_cli_bounds_lists_and_prints_latex(capsys):
    assert main(["bounds"]) == 0
    out = capsys.readouterr().out
    for name in ("sgd", "local_sgd_iid", "local_sgd_noniid", "easgd"):
        assert f"{name}:" in out
    assert "published statement" in out and "provenance: Wang & Joshi" in out
    assert main(["bounds", "--latex", "local_sgd_iid"]) == 0
    assert r"\le" in capsys.readouterr().out
    assert main(["bounds", "easgd", "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert d["name"] == "easgd" and d["derived_here"] is False and d["conditions"]
    assert main(["bounds", "--latex", "nope"]) == 2


# ----------------------------------------------------------------------------- verdict (issue 12)
README_ARGS = "--L 10 --sigma 1 --zeta 0.5 --F0 5 --K 4 --H 32 --p 0.2 --eta 1 --lr 0.001 --T 10000"


def test_verdict_first_and_max_H_at_both_alphas(capsys):
    assert main(["check", *README_ARGS.split(), "--verbose"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("verdict: covered: the conditions of palsgd hold at alpha = 0.001")
    keys = [k.lstrip("-") for k in README_ARGS.split()[::2]]
    rep = check(dict(zip(keys, map(float, README_ARGS.split()[1::2]), strict=True)))
    b = rep.bound("palsgd")
    # at the given alpha the conditions hold up to H = 36 (the API's max_H at that step)
    assert b.max_H_conditions_given == 36
    direct = get("palsgd").max_H(step=0.001, **rep.inputs)
    assert b.max_H_conditions_given == float(direct.conditions)
    assert b.max_H_conditions_recommended == float(
        get("palsgd").max_H(step=b.optimal_alpha, **rep.inputs).conditions
    )
    assert "36 at the given alpha = 0.001" in out
    assert f"at the recommended alpha = {b.optimal_alpha:.4g}" in out
    # the speed-up schedule is printed as a number, not only as a formula
    assert f"speed-up schedule alpha = {b.schedule_alpha:.4g}" in out
    assert rep.verdict_code == "covered"


def test_verdict_conditions_fail_says_where(capsys):
    rep = check(
        {**dict(L=10, sigma=1, zeta=0.5, F0=5, K=4, H=32, p=0.2, eta=1, T=10000), "lr": 0.5}
    )
    assert rep.verdict_code == "conditions_fail"
    assert "C1" in rep.verdict and "alpha <= " in rep.verdict


def test_verdict_outer_momentum_is_not_covered():
    rep = check(
        dict(
            L=10,
            sigma=1,
            zeta=0.5,
            F0=5,
            K=4,
            H=32,
            p=0.2,
            eta=1,
            T=10000,
            lr=0.001,
            gamma=0.5,
            mu=0.9,
        )
    )
    assert rep.verdict_code == "conditions_hold" and "plain averaging" in rep.verdict


def test_nothing_evaluated_exits_2_naming_the_missing_flag(capsys):
    argv = "check --preset gptneo-8m-readme --L 30 --sigma 0.7 --F0 5 --T 2000 --json".split()
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert json.loads(cap.out)["verdict_code"] == "nothing_evaluated"
    assert "--zeta" in cap.err and "Traceback" not in cap.err


def test_warns_H_beyond_T_and_ignored_parameters():
    rep = check(dict(L=1, sigma=1, F0=1, K=4, H=64, T=32, lr=0.01))
    assert "H_exceeds_T" in [w.code for w in rep.warnings]
    rep = check(dict(L=1, sigma=1, F0=1, K=4, H=8, p=0.2, T=1000, lr=0.01), algorithm="sgd")
    w = [w for w in rep.warnings if w.code == "ignored_parameters"]
    assert w and "H = 8" in w[0].message and "p = 0.2" in w[0].message
    assert "not used by the checked bounds" in rep.verdict
    rep = check(dict(L=1, sigma=1, F0=1, K=4, H=8, T=1000, lr=0.01))
    assert "ignored_parameters" not in [w.code for w in rep.warnings]


@pytest.mark.parametrize("cmd", [["bounds"], ["check", *README_ARGS.split()]])
def test_broken_pipe_is_quiet(cmd):
    """stdout is a pipe whose reader has gone: no traceback, the broken-pipe exit code."""
    import os
    import subprocess
    import sys

    from core import exitcodes

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "palsgd", *cmd],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == exitcodes.BROKEN_PIPE
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_a_refuted_bound_is_a_caveat_and_never_covers():
    """slowmo_ar_sgd is shown false by verify (docs/verification.md, section 7): check says so
    even where its conditions hold, and the verdict is not "covered"."""
    K, T, gamma, mu = 1, 133, 0.05, 0.95
    alpha = (1 - mu) / gamma * np.sqrt(K / T)
    vals = dict(L=1.0, sigma=0.0, F0=1.0, K=K, H=1, T=T, gamma=gamma, mu=mu, alpha=alpha)
    rep = check(vals, bounds=["slowmo_ar_sgd"])
    b = rep.bound("slowmo_ar_sgd")
    assert b.conditions_hold
    assert any("shown false" in c for c in b.caveats)
    assert rep.verdict_code != "covered"
