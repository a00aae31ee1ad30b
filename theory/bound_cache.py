"""On-disk cache of the input-independent work on the bounds (``palsgd check`` / ``bounds``).

Two kinds of files, JSON, in :func:`cache_dir` (``$PALSGD_CACHE_DIR``; else
``$XDG_CACHE_HOME/palsgd``; else ``~/.cache/palsgd``; ``PALSGD_CACHE_DIR=off`` disables):

* ``bound-<key>.json``, one per bound: the compiled formulas (the Python source sympy's
  ``lambdify`` prints, for the expression, its terms, the condition sides, the recommended
  step and the expanded speed-up split of :meth:`theory.bound.Bound.max_H`) and the printed
  strings. ``key`` hashes the bound's expression, conditions, recommended step and step
  symbol (their sympy ``srepr`` text), the package version and :data:`FORMAT`: a changed
  statement or version is a different file.
* ``registry-<fingerprint>.json``: the registered built-in bounds (their descriptions,
  metadata and bound keys), so that a fresh process knows them without importing sympy.
  ``fingerprint`` hashes the package version and the text of every module of the
  ``theory`` package, so editing or adding a bound module (``theory/bounds/``) invalidates
  it; whatever bounds the modules register are listed, one entry each.

Every read is checked (format, version, key, and a digest of a bound entry's content)
and any failure (missing, corrupt or
unreadable file, unwritable directory) falls back silently to computing; writes are atomic
(temporary file, then rename). This module imports neither sympy nor numpy.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from typing import Any

import theory

__all__ = [
    "ENV_DIR",
    "FORMAT",
    "bound_key",
    "cache_dir",
    "compiled",
    "descriptions",
    "fingerprint",
    "lower_descriptions",
    "registered",
]

ENV_DIR = "PALSGD_CACHE_DIR"
#: layout version of the cache files (part of every key)
FORMAT = 1
_THEORY_DIR = os.path.dirname(os.path.abspath(theory.__file__))
_memo: dict[str, Any] = {}


def cache_dir() -> str | None:
    """The cache directory, or ``None`` when caching is off (``PALSGD_CACHE_DIR=off``)."""
    env = os.environ.get(ENV_DIR)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "palsgd")


def _read(name: str) -> dict[str, Any] | None:
    d = cache_dir()
    if d is None:
        return None
    try:
        with open(os.path.join(d, name), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("format") == FORMAT
    return data if ok and data.get("version") == theory.__version__ else None


def _write(name: str, data: dict[str, Any]) -> None:
    d = cache_dir()
    if d is None:
        return
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".tmp-{os.getpid()}-{name}")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"format": FORMAT, "version": theory.__version__, **data}, fh)
        os.replace(tmp, os.path.join(d, name))
        tmp = None
    except (OSError, TypeError, ValueError):
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def fingerprint() -> str:
    """Hash of the package version and the text of every module of the ``theory`` package."""
    h = hashlib.sha256(f"{FORMAT}:{theory.__version__}".encode())
    paths = []
    for root, dirs, files in os.walk(_THEORY_DIR):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        paths += [os.path.join(root, f) for f in files if f.endswith(".py")]
    for path in sorted(paths):
        h.update(os.path.relpath(path, _THEORY_DIR).encode())
        with open(path, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:32]


def _spec_summary(bound: Any) -> dict[str, Any] | None:
    """The bound's algorithm spec as JSON (:func:`theory.algorithm.spec_summary`)."""
    from theory.algorithm import spec_summary  # with the registry's sympy work only

    return spec_summary(getattr(bound, "algorithm", None), getattr(bound, "outers", ()))


def _meta(bound: Any) -> dict[str, Any]:
    """The bound's descriptive fields (not part of its key: they come with the registry)."""
    return {
        "name": bound.name,
        "title": bound.title,
        "provenance": bound.provenance,
        "derived_here": bool(bound.derived_here),
        "algorithms": list(bound.algorithms),
        "algorithm": _spec_summary(bound),
        "assumptions": [
            {"key": a.key, "name": a.name, "statement": a.statement, "constants": list(a.constants)}
            for a in bound.assumptions
        ],
        "notes": bound.notes,
        "recommended_step": None if bound.recommended_step is None else str(bound.recommended_step),
        "step_name": bound.step_name,
        "descriptions": [c.description for c in bound.conditions],
        "measured": getattr(bound, "measured", "iterates"),
        "refuted": getattr(bound, "refuted", ""),
    }


def _build(entry: dict[str, Any], meta: dict[str, Any]) -> Any:
    """A :class:`~theory.bound_numeric.CompiledBound` from a cache entry and the metadata."""
    # numpy comes with the numerics only: `palsgd bounds` reads descriptions without it
    from theory.algorithm import spec_from_summary
    from theory.assumptions import Assumption
    from theory.bound_numeric import CompiledBound, CompiledFn

    name = meta["name"]

    def fn(d: dict[str, Any] | None) -> Any:
        return None if d is None else CompiledFn.from_dict(d, name)

    conds = entry["conditions"]
    if len(conds) != len(meta["descriptions"]):
        raise ValueError("conditions and descriptions differ in number")
    speed = entry["speedup"]
    return CompiledBound(
        name=name,
        title=meta["title"],
        provenance=meta["provenance"],
        derived_here=meta["derived_here"],
        algorithms=tuple(meta["algorithms"]),
        assumptions=tuple(
            Assumption(a["key"], a["name"], a["statement"], tuple(a["constants"]))
            for a in meta["assumptions"]
        ),
        notes=meta["notes"],
        recommended_step=meta["recommended_step"],
        step_name=meta["step_name"],
        measured=meta.get("measured", "iterates"),
        refuted=meta.get("refuted", ""),
        algorithm=spec_from_summary(meta.get("algorithm")),
        outers=tuple((meta.get("algorithm") or {}).get("outers", ())),
        parameters=tuple(entry["parameters"]),
        uses_H=bool(entry["uses_H"]),
        terms=tuple(entry["terms"]),
        conditions=tuple(
            (c[0], c[1], desc, bool(c[2]))
            for c, desc in zip(conds, meta["descriptions"], strict=True)
        ),
        f_expression=fn(entry["f_expression"]),
        f_terms=fn(entry["f_terms"]),
        f_conditions=fn(entry["f_conditions"]),
        f_recommended=fn(entry["f_recommended"]),
        speedup=None if speed is None else (fn(speed[0]), fn(speed[1])),
    )


def _digest(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k not in ("digest", "format", "version")}
    return _hash(json.dumps(body, sort_keys=True))


def _load_entry(key: str, meta: dict[str, Any]) -> Any | None:
    entry = _read(f"bound-{key}.json")
    if entry is None or entry.get("key") != key or entry.get("digest") != _digest(entry):
        return None
    try:
        return _build(entry, meta)
    except Exception:  # a corrupt entry of any shape: recompute
        return None


def compiled(bound: Any) -> Any:
    """The :class:`~theory.bound_numeric.CompiledBound` of a :class:`~theory.bound.Bound`.

    From ``bound-<key>.json`` when present and valid; otherwise computed with sympy
    (:meth:`Bound.compile_entry`) and written there.
    """
    key = bound_key(bound)
    meta = _meta(bound)
    got = _load_entry(key, meta)
    if got is None:
        entry = {"key": key, **bound.compile_entry()}
        got = _build(entry, meta)
        _write(f"bound-{key}.json", {**entry, "digest": _digest(entry)})
    return got


def bound_key(bound: Any) -> str:
    """The cache key of a bound: its statement's text (:meth:`Bound.cache_text`), the
    package version and :data:`FORMAT`."""
    return _hash(json.dumps([FORMAT, theory.__version__, bound.cache_text()]))


def _snapshot() -> dict[str, Any]:
    """The registry snapshot (loaded, or built by importing the bound modules and written)."""
    if "snapshot" in _memo:
        return _memo["snapshot"]
    fp = fingerprint()
    name = f"registry-{fp}.json"
    snap = _read(name)
    if (
        snap is None
        or snap.get("fingerprint") != fp
        or not isinstance(snap.get("bounds"), list)
        or not isinstance(snap.get("lower"), list)
    ):
        registry = importlib.import_module("theory.bounds")
        items = []
        for b in registry.all_bounds():
            b.compiled  # noqa: B018 (computes or loads the bound's entry)
            items.append({"meta": _meta(b), "key": bound_key(b), "describe": b.describe()})
        lower = importlib.import_module("theory.lower")
        snap = {
            "fingerprint": fp,
            "bounds": items,
            "lower": [lower.describe_lower(lb) for lb in lower.lower_bounds()],
        }
        _write(name, snap)
        _prune(keep=name)
    _memo["snapshot"] = snap
    return snap


#: registry snapshots kept (one per source tree and version that ran here, newest first)
KEEP_SNAPSHOTS = 8


def _prune(keep: str) -> None:
    """Remove all but the :data:`KEEP_SNAPSHOTS` newest registry snapshots (and ``keep``)."""
    d = cache_dir()
    try:
        snaps = [f for f in os.listdir(d) if f.startswith("registry-") and f.endswith(".json")]
        snaps.sort(key=lambda f: os.path.getmtime(os.path.join(d, f)), reverse=True)
        for f in snaps[KEEP_SNAPSHOTS:]:
            if f != keep:
                os.unlink(os.path.join(d, f))
    except (OSError, TypeError):
        pass


def _live() -> bool:
    """Whether the sympy registry is loaded in this process (it may hold user bounds)."""
    return "theory.bounds" in sys.modules


def registered() -> dict[str, Any]:
    """Every registered bound as a :class:`~theory.bound_numeric.CompiledBound`, by name.

    In a process that has imported :mod:`theory.bounds` (and may have registered its own
    bounds), the live registry; otherwise the built-in bounds from the registry snapshot,
    without sympy.
    """
    if _live():
        registry = importlib.import_module("theory.bounds")
        return {b.name: b.compiled for b in registry.all_bounds()}
    if "registered" in _memo:
        return dict(_memo["registered"])
    out = {}
    for item in _snapshot()["bounds"]:
        got = _load_entry(item["key"], item["meta"])
        if got is None:  # entry gone or corrupt: rebuild from the sympy bound
            registry = importlib.import_module("theory.bounds")
            got = registry.get(item["meta"]["name"]).compiled
        out[got.name] = got
    _memo["registered"] = dict(sorted(out.items()))
    return dict(_memo["registered"])


def descriptions() -> list[dict[str, Any]]:
    """:meth:`Bound.describe` of every registered bound, sorted by name (see :func:`registered`)."""
    if _live():
        registry = importlib.import_module("theory.bounds")
        return [b.describe() for b in registry.all_bounds()]
    return sorted((item["describe"] for item in _snapshot()["bounds"]), key=lambda d: d["name"])


def lower_descriptions() -> list[dict[str, Any]]:
    """:func:`theory.lower.describe_lower` of every registered lower bound, sorted by name
    (the live registry once :mod:`theory.lower` is imported, else the snapshot's)."""
    if "theory.lower" in sys.modules:
        lower = importlib.import_module("theory.lower")
        return [lower.describe_lower(lb) for lb in lower.lower_bounds()]
    return sorted(_snapshot()["lower"], key=lambda d: d["name"])
