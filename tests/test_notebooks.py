"""The notebooks: stored without outputs, paired with their jupytext ``.py`` files, and
executable top to bottom on the embedded defaults.

Execution uses ``nbclient`` with the ``python3`` kernel of the running interpreter, in a
temporary working directory; ``PALSGD_NOTEBOOK_OUT`` points the notebooks' data files at
that directory too. A cell that raises fails the test. Each run's wall time is printed
(``pytest -s``) and recorded as the test's ``notebook_seconds`` property.
"""

from __future__ import annotations

import ast
import importlib
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
NAMES = (
    "01_explore_bounds",
    "02_check_configuration",
    "03_verify_bound",
    "04_reproduce_figure",
    "05_distributed_run_vs_bound",
    "06_when_pulling_pays",
    "07_worst_problem_of_the_class",
)
#: per-cell time limit (seconds); a notebook as a whole should take about a minute
CELL_TIMEOUT = 300
#: the notebooks that train real runs or map hundreds of cells (20-40 s each on two idle
#: cores) and those over 10 s: executed under ``-m slow``; in the default run every
#: notebook's imports are resolved and its code compiled
#: (:func:`test_notebook_code_compiles_and_imports_resolve`), and 02 and 07 execute
HEAVY = (
    "01_explore_bounds",
    "03_verify_bound",
    "04_reproduce_figure",
    "05_distributed_run_vs_bound",
    "06_when_pulling_pays",
)


def _present(name: str) -> bool:
    return (NB_DIR / f"{name}.ipynb").exists()


def _require(name: str) -> None:
    if not _present(name):
        pytest.fail(f"notebooks/{name}.ipynb is missing")


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_every_notebook_has_its_pair():
    stored = sorted(p.stem for p in NB_DIR.glob("*.ipynb"))
    paired = sorted(p.stem for p in NB_DIR.glob("*.py"))
    assert stored == paired, "every notebook needs its jupytext .py pair and vice versa"
    missing = [n for n in NAMES if n not in stored]
    assert not missing, f"missing notebooks: {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_stored_without_outputs(name):
    _require(name)
    nb = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]
    assert not dirty, f"{name}.ipynb is stored with outputs in cells {dirty}: clear them"
    assert "widgets" not in nb.metadata, f"{name}.ipynb is stored with widget state"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert nb.cells and nb.cells[0].cell_type == "markdown", "start with an introduction"


@pytest.mark.parametrize("name", NAMES)
def test_py_pair_in_sync(name):
    _require(name)
    stored = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    py = jupytext.read(NB_DIR / f"{name}.py")
    a, b = _cells(stored), _cells(py)
    assert len(a) == len(b), (
        f"{name}: {len(a)} cells in the .ipynb, {len(b)} in the .py; run "
        f"`jupytext --sync notebooks/{name}.ipynb`"
    )
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x == y, f"{name}: cell {i} differs between .ipynb and .py (jupytext --sync)"
    fmt = stored.metadata.get("jupytext", {}).get("formats", "")
    assert "py:percent" in fmt, f"{name}.ipynb is not paired with py:percent"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_code_compiles_and_imports_resolve(name):
    """Every code cell compiles, and every name it imports from the toolkit (or a library)
    exists: the cheap check of the default run for what executing the notebook tests in
    full (``test_notebook_executes``; the heavy notebooks run it under ``-m slow``)."""
    _require(name)
    nb = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        tree = ast.parse(source, filename=f"{name}, code cell {i}")
        compile(tree, f"{name}, code cell {i}", "exec")
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for n in ast.walk(t)}
        for node in ast.walk(tree):
            if id(node) in guarded:  # an optional import, with its fallback in the cell
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if alias.name != "*" and not hasattr(module, alias.name):
                        importlib.import_module(f"{node.module}.{alias.name}")


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in NAMES]
)
def test_notebook_executes(name, tmp_path, monkeypatch, record_property):
    _require(name)
    out = tmp_path / "out"
    monkeypatch.setenv("PALSGD_NOTEBOOK_OUT", str(out))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    before = sorted(p.name for p in NB_DIR.iterdir())
    nb = nbformat.read(NB_DIR / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    record_property("notebook_seconds", round(seconds, 1))
    print(f"\n{name}: executed in {seconds:.1f} s")

    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "display_data" and "image/png" in o.get("data", {})
    ]
    assert images, f"{name} drew no figure"
    written = [p for p in out.rglob("*") if p.is_file()]
    assert written, f"{name} wrote no data file into PALSGD_NOTEBOOK_OUT"
    assert sorted(p.name for p in NB_DIR.iterdir()) == before, f"{name} wrote into notebooks/"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "out"]
    assert not leftovers, f"{name} wrote {leftovers} outside PALSGD_NOTEBOOK_OUT"
