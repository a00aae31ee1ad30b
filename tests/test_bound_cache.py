"""Tests of the on-disk cache of compiled bounds (theory.bound.cache) and the fast CLI paths."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import theory
from theory.bound import Bound
from theory.bound import cache as bound_cache
from theory.bound import registry as bound_registry
from theory.bounds import get
from theory.check import check

EXPR = "4*F0/(alpha*T) + L*alpha*sigma**2/K + L**2*alpha**2*H*zeta**2"
COND = {"step": "alpha*L*H <= 1/2"}
REC = "sqrt(F0*K/(L*sigma**2*T))"
VALS = dict(F0=2.0, L=1.5, sigma=0.7, K=4, T=10**4, H=8, zeta=0.3)


def _bound(expr=EXPR, name="cache_test"):
    return Bound.from_strings(name, expr, COND, recommended_step=REC, algorithm="local_sgd")


def _results(b):
    return {
        "value": b.evaluate(alpha=0.01, **VALS),
        "opt": b.optimal_step(**VALS),
        "max": b.max_step(**VALS),
        "maxH": b.max_H(**{k: v for k, v in VALS.items() if k != "H"}).as_dict(),
        "rounds": b.rounds_to_eps(0.5, **{k: v for k, v in VALS.items() if k != "T"}),
    }


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(bound_cache.ENV_DIR, str(d))
    monkeypatch.setattr(bound_registry, "_memo", {})
    return d


def _entries(d):
    return sorted(p.name for p in d.glob("bound-*.json"))


def _count_compiles(monkeypatch):
    calls = []
    orig = Bound.compile_entry

    def counting(self):
        calls.append(self.name)
        return orig(self)

    monkeypatch.setattr(Bound, "compile_entry", counting)
    return calls


def test_miss_writes_then_hit_reads_without_sympy_work(cache, monkeypatch):
    calls = _count_compiles(monkeypatch)
    first = _results(_bound())
    assert calls == ["cache_test"] and len(_entries(cache)) == 1
    second = _results(_bound())  # a new Bound object with the same statement: a hit
    assert calls == ["cache_test"]
    for k in first:
        np.testing.assert_equal(second[k], first[k])


def test_invalidation_by_expression_and_version(cache, monkeypatch):
    calls = _count_compiles(monkeypatch)
    a = _bound()
    a.compiled  # noqa: B018
    b = _bound(EXPR.replace("4*F0", "5*F0"))
    assert bound_cache.bound_key(a) != bound_cache.bound_key(b)
    assert float(b.evaluate(alpha=0.01, **VALS)) > float(a.evaluate(alpha=0.01, **VALS))
    assert calls == ["cache_test", "cache_test"] and len(_entries(cache)) == 2
    old_key = bound_cache.bound_key(a)
    monkeypatch.setattr(theory, "__version__", "999.0")
    c = _bound()
    assert bound_cache.bound_key(c) != old_key
    c.compiled  # noqa: B018
    assert len(calls) == 3 and len(_entries(cache)) == 3


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncate", "json_list", "edit_source", "wrong_version", "empty"],
)
def test_corrupt_entry_falls_back_to_computing(cache, monkeypatch, damage):
    expect = _results(_bound())
    (path,) = cache.glob("bound-*.json")
    text = path.read_text()
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "json_list":
        path.write_text("[1, 2, 3]")
    elif damage == "edit_source":  # valid JSON, tampered formula: the digest rejects it
        data = json.loads(text)
        data["f_expression"]["source"] = data["f_expression"]["source"].replace("4*", "40*")
        path.write_text(json.dumps(data))
    elif damage == "wrong_version":
        data = json.loads(text)
        data["version"] = "0.0.0"
        path.write_text(json.dumps(data))
    else:
        path.write_text("")
    calls = _count_compiles(monkeypatch)
    got = _results(_bound())
    assert calls == ["cache_test"]  # recomputed
    for k in expect:
        np.testing.assert_equal(got[k], expect[k])
    assert json.loads(path.read_text())["key"] == bound_cache.bound_key(_bound())  # rewritten


def test_unwritable_or_disabled_cache_still_computes(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(bound_registry, "_memo", {})
    for value in (str(blocker / "sub"), "off"):
        monkeypatch.setenv(bound_cache.ENV_DIR, value)
        res = _results(_bound())
        assert np.isfinite(res["value"])
    assert blocker.read_text() == "not a directory"
    assert bound_cache.cache_dir() is None


def test_cache_dir_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv(bound_cache.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert bound_cache.cache_dir() == os.path.join(str(tmp_path), "palsgd")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert bound_cache.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "palsgd")


def test_fingerprint_follows_the_bound_modules(tmp_path, monkeypatch):
    root = tmp_path / "theory"
    shutil.copytree(os.path.dirname(theory.__file__), root,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    monkeypatch.setattr(bound_registry, "_THEORY_DIR", str(root))
    fp = bound_registry.fingerprint()
    assert bound_registry.fingerprint() == fp
    (root / "bounds" / "extra.py").write_text("# a new bound module\n")
    fp2 = bound_registry.fingerprint()
    assert fp2 != fp
    (root / "bounds" / "sgd.py").write_text((root / "bounds" / "sgd.py").read_text() + "\n")
    assert bound_registry.fingerprint() not in (fp, fp2)
    monkeypatch.setattr(theory, "__version__", "999.0")
    monkeypatch.setattr(bound_registry, "_THEORY_DIR", os.path.dirname(theory.__file__))
    assert bound_registry.fingerprint() != fp


def test_snapshot_lists_every_registered_bound_with_its_key(cache, monkeypatch):
    monkeypatch.setattr(bound_registry, "_live", lambda: False)
    reg = bound_registry.registered()
    from theory.bounds import names

    builtin = [n for n in names() if not n.startswith(("cache_test", "user_", "rec_", "bad_"))]
    assert set(builtin) <= set(reg)
    (snap,) = cache.glob("registry-*.json")
    items = json.loads(snap.read_text())["bounds"]
    for item in items:
        assert item["key"] == bound_cache.bound_key(get(item["meta"]["name"]))
        assert item["describe"] == get(item["meta"]["name"]).describe()
    # the snapshot's compiled bounds give the checker's answers of the sympy bounds
    v = dict(L=1, sigma=1, F0=1, K=4, H=32, T=10**5, alpha=0.01, p=0.2, eta=1, zeta=1, eps=0.05)
    via_snapshot = check(v).to_dict()
    monkeypatch.setattr(bound_registry, "_live", lambda: True)
    assert check(v).to_dict() == via_snapshot


def _run(code, env):
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_warm_cli_imports_neither_sympy_nor_numpy_where_it_can(tmp_path):
    env = {**os.environ, bound_cache.ENV_DIR: str(tmp_path / "c")}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(theory.__file__))
    probe = (
        "import sys, io, contextlib\nfrom palsgd.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main({argv})\n"
        "assert rc == 0, rc\n"
        "print(sorted(m for m in ('sympy', 'numpy', 'torch') if m in sys.modules))\n"
    )
    check_argv = ["check", "--L", "1", "--sigma", "1", "--F0", "1", "--K", "4", "--H", "8",
                  "--T", "1000", "--p", "0.2", "--eta", "1", "--zeta", "0.5"]  # fmt: skip
    assert "sympy" in _run(probe.format(argv=check_argv), env)  # cold: computes and writes
    assert _run(probe.format(argv=check_argv), env).strip() == "['numpy']"
    assert _run(probe.format(argv=["bounds"]), env).strip() == "[]"
    assert _run(probe.format(argv=["bounds", "--latex", "sgd"]), env).strip() == "[]"
    assert _run(probe.format(argv=["--help"]), env).strip() == "[]"


def test_bytecode_only_for_the_same_interpreter():
    from theory.bound.numeric import CompiledFn

    fn = get("sgd").compiled.f_expression
    d = fn.to_dict()
    args = {n: np.asarray(1.5) for n in fn.names}
    expect = fn(args, ())
    other = CompiledFn.from_dict({**d, "code_tag": "someother-3.99"}, "sgd")
    assert other._code is None and other(args, ()) == expect  # compiled from the source
    bad = CompiledFn.from_dict({**d, "code": "AAAA"}, "sgd")
    assert bad(args, ()) == expect  # unreadable bytecode: the source
