"""``palsgd map`` at the edges of its inputs: a start that already meets eps is a 0-round
answer, conflicting or out-of-range flags are refused by the flag typed (exit 2, no
traceback), the bound-map stage reports progress; the criterion and the sync question."""

import json

import pytest

from core.exitcodes import BAD_INPUT, OK
from palsgd.cli import main

TINY = ["--H", "8", "--eta", "2", "--n-alpha", "3", "--n-outer", "2", "--max-extend", "1",
        "--no-progress"]  # fmt: skip
MC = ["--engine", "montecarlo", "--family", "cosine", "--H", "8", "--eta", "2", "--zeta", "1",
      "--budget", "rounds:20", "--methods", "local_sgd", "palsgd", "--n-alpha", "2",
      "--n-outer", "1", "--max-extend", "0", "--replicas", "4", "--holdout-replicas", "4",
      "--no-progress"]  # fmt: skip


def _problem(tmp_path, eigenvalues, minimisers, x0, name="p.yaml"):
    path = tmp_path / name
    path.write_text(json.dumps({"eigenvalues": eigenvalues, "minimisers": minimisers,
                                "x0": x0, "sigma2": 0.5}))  # fmt: skip
    return str(path)


def _run_json(tmp_path, argv):
    out = tmp_path / "m.json"
    assert main(["map", *argv, "--json", str(out)]) == OK
    return json.loads(out.read_text())


def test_an_eps_the_start_meets_is_a_zero_round_answer(tmp_path, capsys):
    data = _run_json(tmp_path, [*TINY, "--zeta", "1", "--eps", "50", "0.05", "--no-bounds"])
    met = [c for c in data["cells"] if c["eps"] == 50]
    assert met and all(set(c["rounds"].values()) == {0} for c in met)
    assert all(c["ratio"] == 1.0 and c["winner"] == "tie" for c in met)
    assert "the start already meets eps" in capsys.readouterr().out


@pytest.mark.parametrize(
    "eigenvalues, minimisers, x0",
    [
        ([[1.0, 0.5], [1.0, 0.5]], [[1.0, 0.0], [-1.0, 0.0]], [0.0, 0.0]),  # x0 = x*
        ([[1e-300, 1e-300], [1e-300, 1e-300]], [[1.0, 0.0], [-1.0, 0.0]], [3.0, 3.0]),
    ],
    ids=["start-at-optimum", "eigenvalues-1e-300"],
)
def test_problem_files_whose_start_meets_eps(tmp_path, eigenvalues, minimisers, x0):
    path = _problem(tmp_path, eigenvalues, minimisers, x0)
    data = _run_json(tmp_path, [*TINY, "--problem", path, "--eps", "0.05"])
    assert all(set(c["rounds"].values()) == {0} for c in data["cells"])


def test_monte_carlo_with_an_eps_the_start_meets(tmp_path):
    data = _run_json(tmp_path, [*MC, "--eps", "50"])
    assert all(c["winner"] == "tie" and c["ratio"] == 1.0 for c in data["cells"])


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--zeta", "1", "--seed", "-1"], "argument --seed: -1 is not an integer in [0, inf)"),
        (["--zeta", "1", "--K", "1"], "1 is not an integer in [2, inf)"),
        (["--zeta", "1", "--d", "0"], "argument --d: 0 is not"),
        (["--problem", "docs/examples/hetero_problem.yaml", "--K", "3"], "--K: the generated"),
        (["--problem", "docs/examples/hetero_problem.yaml", "--d", "2", "--seed", "1"],
         "--d, --seed"),
        ([*MC, "--cache", "somewhere"], "--cache"),
        ([*MC, "--L", "2"], "--L: settings of the exact engine"),
        (["--criterion", "last"], "--criterion"),
    ],
)  # fmt: skip
def test_bad_or_conflicting_flags_exit_2_naming_the_flag(argv, says, capsys):
    assert main(["map", *TINY, *argv]) == BAD_INPUT
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_json_and_csv_on_one_path_are_refused(tmp_path, capsys):
    f = str(tmp_path / "both")
    assert main(["map", *TINY, "--zeta", "1", "--json", f, "--csv", f]) == BAD_INPUT
    err = capsys.readouterr().err
    assert "--json and --csv name the same file" in err and "Traceback" not in err


def test_a_one_worker_problem_file_is_refused_as_k_1_is(tmp_path, capsys):
    path = _problem(tmp_path, [[1.0, 0.5]], [[1.0, 0.0]], [3.0, 3.0])
    assert main(["map", *TINY, "--problem", path]) == BAD_INPUT
    err = capsys.readouterr().err
    assert "one worker (K = 1)" in err and "--problem" in err and "Traceback" not in err


def test_the_bound_map_stage_reports_progress(capsys):
    argv = [a for a in TINY if a != "--no-progress"]
    assert main(["map", *argv, "--zeta", "1", "--eps", "0.05"]) == OK
    err = capsys.readouterr().err
    assert "the bound map: every registered bound's guarantee" in err
    assert "the bound map done in" in err


def test_criterion_first_and_the_sync_question(tmp_path, capsys):
    data = _run_json(tmp_path, [*TINY, "--H", "8", "32", "--zeta", "3", "--eps", "0.01",
                                "--criterion", "first", "--no-bounds"])  # fmt: skip
    text = capsys.readouterr().out
    assert "criterion: first passage" in text
    assert "fewest rounds to eps at any H" in text
    assert data["summary"]["criterion"] == "first"
    for c in data["cells"]:
        assert c["criterion"] == "first"
        for m, r in c["rounds"].items():  # a sustained answer is never earlier
            o = c["other_rounds"][m]
            assert r is None or o is None or o >= r
    fewest = {f["method"]: f for f in data["summary"]["fewest_rounds"]}
    for m, f in fewest.items():
        mine = [c["rounds"][m] for c in data["cells"] if c["cost"][m] is not None]
        assert f["rounds"] == (min(mine) if mine else None)
