"""``palsgd map`` from the command line: outputs, exit codes, flags named in errors."""

import json

import pytest

from palsgd.cli import main

FAST = ["--H", "8", "32", "--eta", "2", "--zeta", "1", "--eps", "0.05", "--n-alpha", "4",
        "--n-outer", "2", "--no-progress"]  # fmt: skip


def test_map_writes_every_output(tmp_path, capsys):
    out = tmp_path / "m"
    rc = main(["map", *FAST, "--budget", "grads:5e4", "rounds:5e3", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "palsgd map (exact)" in text and "ratio = best PALSGD cost" in text
    data = json.loads((out / "map.json").read_text())
    assert len(data["cells"]) == 2 * 1 * 1 * 1 * 2
    assert {"local_sgd", "palsgd", "diloco", "sgd"} <= set(data["cells"][0]["cost"])
    assert (out / "map.csv").read_text().count("\n") == 5
    assert list(out.glob("ratio_*.png")) and list(out.glob("ratio_*.pdf"))
    assert (out / "summary.txt").exists() and list((out / ".cache").glob("*.json"))


def test_json_and_csv_alone(tmp_path):
    rc = main(["map", *FAST, "--no-bounds", "--json", str(tmp_path / "a.json"),
               "--csv", str(tmp_path / "a.csv")])  # fmt: skip
    assert rc == 0
    assert json.loads((tmp_path / "a.json").read_text())["engine"] == "exact"


def test_time_budget_with_a_cluster_profile(tmp_path):
    rc = main(["map", *FAST, "--no-bounds", "--budget", "time:3600", "--profile",
               "32nodes-10Gbps", "--json", str(tmp_path / "t.json")])  # fmt: skip
    assert rc == 0
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["spec"]["prices"]["pull_s"] > 0
    assert data["cells"][0]["budget"] == "time"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--budget", "flops:3"], "--budget"),
        (["--budget", "time:10"], "--profile"),
        (["--eta", "-1"], "argument --eta: -1 is not in (0, inf)"),
        (["--p", "1.5"], "argument --p/--prob_no_grad: 1.5 is not in (0, 1)"),
        (["--H", "0"], "argument --H/--sync_interval: 0 is not"),
        (["--problem", "/nonexistent/p.yaml"], "problem file"),
        (["--profile", "nowhere"], "nowhere"),
        (["--engine", "montecarlo", "--replicas", "1"], "replicas"),
        (["--sync-delay", "1"], "--sync-delay needs --engine montecarlo"),
        (["--engine", "montecarlo", "--sync-delay", "-1"], "argument --sync-delay: -1 is not"),
        (["--engine", "montecarlo", "--H", "4", "--sync-delay", "4"], "[0, 3], got 4"),
        (
            [
                "--engine",
                "montecarlo",
                "--sync-delay",
                "1",
                "--budget",
                "time:9",
                "--profile",
                "64xGPU-100Gbps",
            ],
            "--sync-delay use grads",
        ),  # fmt: skip
    ],
)
def test_bad_input_exits_2_naming_the_flag(argv, flag, capsys):
    rc = main(["map", *FAST, *argv])
    assert rc == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err
    assert "unrecognized arguments" not in err


def test_monte_carlo_from_the_command_line(tmp_path):
    rc = main(["map", "--engine", "montecarlo", "--family", "cosine", "--H", "8", "--eta", "2",
               "--zeta", "1", "--eps", "0.5", "--budget", "rounds:30", "--methods", "local_sgd",
               "palsgd", "--n-alpha", "2", "--n-outer", "1", "--max-extend", "0", "--replicas",
               "8", "--holdout-replicas", "16", "--no-progress", "--json",
               str(tmp_path / "mc.json")])  # fmt: skip
    assert rc == 0
    import json as _json

    d = _json.loads((tmp_path / "mc.json").read_text())
    assert d["engine"] == "montecarlo" and d["cells"][0]["intervals"]


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["map", *FAST, "--out", str(f)]) == 2
    assert "--out" in capsys.readouterr().err
    assert f.read_text() == "x"
