"""The layering: core <- theory <- empirical <- paper_figures <- palsgd (the command line).

A lower layer never names a higher one, not even by string (an import or a module path in a
string would hide the dependency from the import graph).
"""

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: package -> the packages above it, which it must not name
ABOVE = {
    "core": ("theory", "empirical", "paper_figures", "palsgd"),
    "theory": ("empirical", "paper_figures", "palsgd"),
    "empirical": ("paper_figures", "palsgd"),
    "paper_figures": ("palsgd",),
}


def _names(path: Path) -> set[str]:
    """Top-level package names a file imports or mentions as a dotted module string."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            head = node.value.split(".")[0]
            if "." in node.value and " " not in node.value and head in ABOVE["core"]:
                out.add(head)
    return out


@pytest.mark.parametrize("package", sorted(ABOVE))
def test_a_layer_never_names_the_layers_above(package):
    bad = {
        str(p.relative_to(ROOT)): sorted(_names(p) & set(ABOVE[package]))
        for p in sorted((ROOT / package).rglob("*.py"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_every_subcommand_is_registered_by_the_package_that_implements_it():
    from empirical import commands as e
    from palsgd.cli import SUBCOMMANDS
    from paper_figures import commands as f
    from theory import commands as t

    for package, table in (("theory", t), ("empirical", e), ("paper_figures", f)):
        for name, (module, _) in table.COMMANDS.items():
            assert module.split(".")[0] == package
            assert SUBCOMMANDS[name][0] == module
    assert len(SUBCOMMANDS) == sum(len(m.COMMANDS) for m in (t, e, f))


def test_help_imports_neither_numpy_nor_torch():
    code = "import sys; from palsgd.cli import main; main(['--help']); " \
        "print(sorted(m for m in ('numpy', 'torch', 'sympy') if m in sys.modules))"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_scan_sees_imports_and_module_strings(tmp_path):
    """Negative control: each way of naming a higher layer is caught."""
    f = tmp_path / "x.py"
    f.write_text(
        "import empirical.train\nfrom paper_figures.cli import main\n"
        "import importlib\nm = importlib.import_module('palsgd.cli')\ns = 'a sentence. not a module'\n"
    )
    assert _names(f) >= {"empirical", "paper_figures", "palsgd"}
    assert "a sentence" not in _names(f)
    g = tmp_path / "y.py"
    g.write_text("from theory.validation import validate\ns = 'theory.bounds'\n")
    assert set(ABOVE["core"]) & _names(g) == {"theory"}


def _modules(package: str) -> list[str]:
    out = []
    for p in sorted((ROOT / package).rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


@pytest.mark.parametrize("package", [*sorted(ABOVE), "palsgd"])
def test_every_module_imports_and_names_only_modules_that_exist(package):
    """A stale import (a module moved or removed) fails here, also in ``__main__`` files,
    which are parsed rather than run."""
    for name in _modules(package):
        if name.endswith("__main__"):
            tree = ast.parse((ROOT / (name.replace(".", "/") + ".py")).read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    assert importlib.util.find_spec(node.module) is not None, (name, node.module)
        else:
            importlib.import_module(name)
