"""Users' own problems for the Monte-Carlo map: the declarative family file (constants
computed and stated) and the Python protocol (anything with ``build`` and ``describe``)."""

import json

import numpy as np
import pytest

from core.errors import UserInputError
from core.exitcodes import BAD_INPUT, OK
from palsgd.cli import main
from theory.compare import Grid, MapSpec
from theory.compare.family_file import ProblemFamily, load_family_file
from theory.compare.run_mc import run_mc_map
from theory.problems.hessians import make_hetero_hessian

EXAMPLE = "docs/examples/hetero_cosine_family.yaml"
SMALL = ["--engine", "montecarlo", "--H", "8", "--eta", "2", "--eps", "0.5", "--budget",
         "rounds:30", "--methods", "local_sgd", "palsgd", "--n-alpha", "2", "--n-outer", "1",
         "--max-extend", "0", "--replicas", "4", "--holdout-replicas", "8", "--no-progress"]  # fmt: skip


def test_the_example_file_states_its_constants():
    fam = load_family_file(EXAMPLE)
    assert isinstance(fam, ProblemFamily)
    d = fam.describe()
    lam = np.array(fam.quadratic.eigenvalues)
    assert d["K"] == 4 and d["d"] == 3
    assert d["L"] == pytest.approx(lam.max() + 0.3 * 2.0**2)  # max l + |c| w^2
    assert d["sigma2"] == 0.5 and d["zeta2_region"] >= d["zeta2_star"] > 0
    p = fam.build(None)
    assert d["F0"] == pytest.approx(float(p.f(p.x0())) - d["f_star"])
    pts = np.random.default_rng(0).uniform(-6, 6, size=(200_000, 3))  # f* is a global minimum
    assert p.f(pts).min() >= d["f_star"] - 1e-9
    assert fam.build(1.0).describe()["zeta2_star"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text, says",
    [
        ("eigenvalues: [[1.0]]\nminimisers: [[0.0]]\n", "one worker (K = 1)"),
        ("eigenvalues: [[1.0], [2.0]]\nminimisers: [[0.0], [1.0]]\ncosine: 3\n", "'cosine'"),
        ("eigenvalues: [[1.0], [2.0]]\nminimisers: [[0.0], [1.0]]\nshape: 2\n", "unknown key"),
    ],
)
def test_bad_family_files_are_refused_by_key(tmp_path, text, says):
    f = tmp_path / "fam.yaml"
    f.write_text(text)
    with pytest.raises(UserInputError, match="--family-file") as exc:
        load_family_file(str(f))
    assert says in str(exc.value)


def test_the_command_line_runs_a_family_file(tmp_path, capsys):
    out = tmp_path / "ff.json"
    assert main(["map", *SMALL, "--family-file", EXAMPLE, "--json", str(out)]) == OK
    data = json.loads(out.read_text())
    assert data["engine"] == "montecarlo"
    src = data["problems"]["source"]
    assert src["family_file"].endswith("hetero_cosine_family.yaml") and src["L"] > 0
    assert data["cells"][0]["zeta"] is None  # the file's own heterogeneity
    assert "precision guard" not in capsys.readouterr().out  # exact engine only


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--family-file", EXAMPLE, "--K", "3"], "--K: the built-in families"),
        (["--family-file", EXAMPLE, "--family", "cosine"], "--family and --family-file"),
        (["--family-file", "/nonexistent/f.yaml"], "--family-file"),
    ],
)
def test_family_file_conflicts_exit_2(argv, says, capsys):
    assert main(["map", *SMALL, *argv]) == BAD_INPUT
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_the_exact_engine_refuses_a_family_file(capsys):
    argv = ["map", "--H", "8", "--eta", "2", "--family-file", EXAMPLE, "--no-progress"]
    assert main(argv) == BAD_INPUT
    assert "--family-file is a problem for --engine montecarlo" in capsys.readouterr().err


def test_the_python_protocol():
    """Any object with ``build(zeta)`` and ``describe()`` is a family for the map."""

    class Mine:
        def build(self, zeta):
            return make_hetero_hessian(K=2, d=1, zeta=1.0 if zeta is None else zeta)

        def describe(self):
            return {"mine": True}

    spec = MapSpec(H=(4,), eta=(2.0,), zeta=None, eps=(0.5,), budgets={"rounds": 20.0},
                   methods=("local_sgd", "palsgd"), grid=Grid(n_alpha=2, n_outer=1,
                   max_extend=0))  # fmt: skip
    res = run_mc_map(spec, family=Mine(), replicas=4, holdout_replicas=8)
    assert res.problems["source"]["mine"] is True and len(res.cells) == 1
