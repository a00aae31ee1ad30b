"""No import cycle in the toolkit: the module graph of every package (``core``, ``theory``,
``empirical``, ``paper_figures``, ``palsgd``), built from the source (ast), is acyclic,
cycles across packages included.

Two graphs: the top-level imports (what importing a module runs), and every import, the
ones inside functions and the ``importlib.import_module("theory....")`` calls with a
literal name included (what a run may import later; a cycle there, such as a bound
importing its cache, which imported the registry, which imported the bound, makes the
order of first use matter). An edge from a module to a package above it (a submodule
naming its own package) is left out: Python initialises a package before its submodules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: every package of the toolkit (the graph is one graph over all of them)
PACKAGES = ("core", "theory", "empirical", "paper_figures", "palsgd")


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _named(node: ast.AST, name: str, is_package: bool) -> set[str]:
    """The modules one import statement or ``import_module`` call names."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        mod = _resolve(node, name, is_package)
        return {mod, *(f"{mod}.{a.name}" for a in node.names)}
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("import_module")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return {node.args[0].value}
    return set()


def _imports(tree: ast.Module, name: str, is_package: bool, *, top_level: bool) -> set[str]:
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if _type_checking(st):
                continue
            if isinstance(st, ast.Import | ast.ImportFrom):
                out.update(_named(st, name, is_package))
            elif isinstance(st, ast.If | ast.Try):  # still run at import time
                for block in (st.body, st.orelse, getattr(st, "finalbody", [])):
                    visit(block)
                for handler in getattr(st, "handlers", []):
                    visit(handler.body)
            if not top_level and not isinstance(st, ast.Import | ast.ImportFrom):
                for node in ast.walk(st):
                    if not (isinstance(node, ast.If) and _type_checking(node)):
                        out.update(_named(node, name, is_package))

    visit(tree.body)
    return out


def import_graph(
    root: Path, packages: str | tuple[str, ...], *, top_level: bool
) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` (one package or several: one graph, edges
    between packages included) it imports (see the module docstring)."""
    names = (packages,) if isinstance(packages, str) else packages
    files = {_module_name(root, p): p for pkg in names for p in sorted((root / pkg).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        named = _imports(
            ast.parse(path.read_text(), str(path)),
            name,
            path.name == "__init__.py",
            top_level=top_level,
        )
        graph[name] = {
            m for m in named if m in files and m != name and not name.startswith(m + ".")
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w) :] + [w]
            if w not in state and (found := dfs(w)):
                return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := dfs(v)):
            return found
    return None


@pytest.mark.parametrize("top_level", [True, False], ids=["top-level", "every-import"])
def test_no_package_has_an_import_cycle(top_level):
    graph = import_graph(ROOT, PACKAGES, top_level=top_level)
    for pkg in PACKAGES:  # the graph was built, every package in it
        assert any(m == pkg or m.startswith(pkg + ".") for m in graph), pkg
    assert len(graph) > 300 and sum(map(len, graph.values())) > 900
    crossing = {(a, b) for a, bs in graph.items() for b in bs if a.split(".")[0] != b.split(".")[0]}
    assert len(crossing) > 100  # edges between packages are in the graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_a_cycle_is_found(tmp_path):
    """Negative control: a synthetic package with a cycle through a function-level import
    and one through ``import_module`` (and a package naming its own submodules, no cycle)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")
    (pkg / "a.py").write_text("import pkg.b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import c\n")
    (pkg / "c.py").write_text("from pkg.a import x\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import d\n")
    (pkg / "sub" / "d.py").write_text("from pkg.sub import e\n")
    (pkg / "sub" / "e.py").write_text(
        "import importlib\ndef g():\n    importlib.import_module('pkg.sub.d')\n"
    )
    top = import_graph(tmp_path, "pkg", top_level=True)
    assert top["pkg.sub.d"] == {"pkg.sub.e"} and top["pkg.b"] == set()
    assert find_cycle(top) is None
    every = import_graph(tmp_path, "pkg", top_level=False)
    assert find_cycle(every) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    del every["pkg.b"]
    assert find_cycle(every) == ["pkg.sub.d", "pkg.sub.e", "pkg.sub.d"]
    assert find_cycle({"x": {"y"}, "y": {"z"}, "z": set()}) is None


def test_a_cycle_across_packages_is_found(tmp_path):
    """Negative control: a cycle that only closes across two packages (each acyclic alone)."""
    for pkg, body in (("p1", "from p2.b import y\n"), ("p2", "def f():\n    import p1.a\n")):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
        (tmp_path / pkg / ("a.py" if pkg == "p1" else "b.py")).write_text(body)
    assert find_cycle(import_graph(tmp_path, "p1", top_level=False)) is None
    assert find_cycle(import_graph(tmp_path, "p2", top_level=False)) is None
    both = import_graph(tmp_path, ("p1", "p2"), top_level=False)
    assert find_cycle(both) == ["p1.a", "p2.b", "p1.a"]
