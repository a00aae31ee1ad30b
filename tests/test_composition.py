"""The trainer and the distributed algorithms are composed of parts, not mixed in: every
class of ``empirical/train`` and ``empirical/algorithms`` reads only the attributes that it
(or a base class of these packages) sets or declares, so no class depends on attributes
its host happens to set; and no class picks its subclass in ``__new__``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("empirical/train", "empirical/algorithms")
#: bases whose attributes a class may read without declaring them
_FOREIGN_OK = {"object"}


def _classes(source: str) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}


def _self_attrs(node: ast.AST, ctx: type) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        and isinstance(n.ctx, ctx)
    }


def _declared(cls: ast.ClassDef) -> set[str]:
    """Names the class body defines (methods, properties, class attributes, annotated
    fields) and the attributes its methods assign on ``self``."""
    out = _self_attrs(cls, ast.Store)
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out.add(stmt.name)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            out |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    return out


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in cls.bases]


def undeclared_reads(sources: dict[str, str]) -> dict[str, list[str]]:
    """``{class: [attributes it reads but neither it nor its bases declare]}`` over the
    classes of ``sources`` (file name -> source); classes with a base outside them (an
    exception, a NamedTuple) are skipped."""
    classes: dict[str, ast.ClassDef] = {}
    for text in sources.values():
        classes.update(_classes(text))

    def declared(name: str) -> set[str] | None:
        cls = classes[name]
        out = _declared(cls)
        for base in _base_names(cls):
            if base in _FOREIGN_OK:
                continue
            if base not in classes:
                return None
            inherited = declared(base)
            if inherited is None:
                return None
            out |= inherited
        return out

    bad = {}
    for name, cls in classes.items():
        known = declared(name)
        if known is None:
            continue
        missing = sorted(_self_attrs(cls, ast.Load) - known)
        if missing:
            bad[name] = missing
    return bad


def _sources(package: str) -> dict[str, str]:
    return {str(p): p.read_text() for p in sorted((ROOT / package).glob("*.py"))}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_class_reads_attributes_its_host_sets(package):
    assert undeclared_reads(_sources(package)) == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_class_picks_its_subclass_in_new(package):
    for path, text in _sources(package).items():
        for cls in _classes(text).values():
            assert "__new__" not in _declared(cls), f"{path}: {cls.name}.__new__"
            assert "__init_subclass__" not in _declared(cls), f"{path}: {cls.name}"


def test_the_scan_catches_a_mixin():
    """Negative control: a mixin reading what its host sets is reported; the same class
    declaring the attribute, or a base that sets it, is not."""
    mixin = (
        "class Saving:\n    def save(self):\n        return self.model, self.helper()\n"
        "class Trainer(Saving):\n    def __init__(self):\n        self.model = 1\n"
        "    def helper(self):\n        return 2\n"
    )
    assert undeclared_reads({"m.py": mixin}) == {"Saving": ["helper", "model"]}
    declared = mixin.replace(
        "class Saving:\n", "class Saving:\n    model: int\n    helper = None\n"
    )
    assert undeclared_reads({"m.py": declared}) == {}
    based = (
        "class Base:\n    def __init__(self):\n        self.model = 1\n"
        "class Part(Base):\n    def read(self):\n        return self.model\n"
    )
    assert undeclared_reads({"m.py": based}) == {}
