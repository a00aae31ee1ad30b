"""On-disk cache of the input-independent work on the bounds (``palsgd check`` / ``bounds``).

Two kinds of files, JSON, in :func:`cache_dir` (``$PALSGD_CACHE_DIR``; else
``$XDG_CACHE_HOME/palsgd``; else ``~/.cache/palsgd``; ``PALSGD_CACHE_DIR=off`` disables):

* ``bound-<key>.json``, one per bound: the compiled formulas (the Python source sympy's
  ``lambdify`` prints, for the expression, its terms, the condition sides, the recommended
  step and the expanded speed-up split of :meth:`theory.bound.Bound.max_H`) and the printed
  strings. ``key`` hashes the bound's expression, conditions, recommended step and step
  symbol (their sympy ``srepr`` text), the package version and :data:`FORMAT`: a changed
  statement or version is a different file.
* ``registry-<fingerprint>.json``: the registry snapshot, written and read by
  :mod:`theory.bound.registry` through :func:`read_file` and :func:`write_file`.

Every read is checked (format, version, key, and a digest of a bound entry's content)
and any failure (missing, corrupt or
unreadable file, unwritable directory) falls back silently to computing; writes are atomic
(temporary file, then rename). This module imports neither sympy nor numpy, nor the registry
(:mod:`theory.bounds`): the registry imports :mod:`theory.bound`, which imports this module,
so the dependency points one way.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import theory

__all__ = [
    "ENV_DIR",
    "FORMAT",
    "bound_key",
    "cache_dir",
    "compiled",
    "load_entry",
    "meta",
    "read_file",
    "write_file",
]

ENV_DIR = "PALSGD_CACHE_DIR"
#: layout version of the cache files (part of every key)
FORMAT = 1


def cache_dir() -> str | None:
    """The cache directory, or ``None`` when caching is off (``PALSGD_CACHE_DIR=off``)."""
    env = os.environ.get(ENV_DIR)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "palsgd")


def read_file(name: str) -> dict[str, Any] | None:
    """The JSON file ``name`` of the cache directory, or ``None`` (missing, unreadable, of
    another format or version)."""
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


def write_file(name: str, data: dict[str, Any]) -> None:
    """Write ``data`` (with the format and version) to ``name`` atomically; a failure is
    silent (the cache is an optimisation)."""
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


def _spec_summary(bound: Any) -> dict[str, Any] | None:
    """The bound's algorithm spec as JSON (:func:`theory.algorithm.spec_summary`)."""
    from theory.algorithm import spec_summary  # with the registry's sympy work only

    return spec_summary(getattr(bound, "algorithm", None), getattr(bound, "outers", ()))


def meta(bound: Any) -> dict[str, Any]:
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
    """A :class:`~theory.bound.numeric.CompiledBound` from a cache entry and the metadata."""
    # numpy comes with the numerics only: `palsgd bounds` reads descriptions without it
    from theory.algorithm import spec_from_summary
    from theory.assumptions import Assumption
    from theory.bound.numeric import CompiledBound, CompiledFn

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


def load_entry(key: str, meta: dict[str, Any]) -> Any | None:
    """The compiled bound of the cache entry ``key`` with its metadata ``meta``, or ``None``
    when the entry is missing, corrupt or of another statement."""
    entry = read_file(f"bound-{key}.json")
    if entry is None or entry.get("key") != key or entry.get("digest") != _digest(entry):
        return None
    try:
        return _build(entry, meta)
    except Exception:  # a corrupt entry of any shape: recompute
        return None


def compiled(bound: Any) -> Any:
    """The :class:`~theory.bound.numeric.CompiledBound` of a :class:`~theory.bound.Bound`.

    From ``bound-<key>.json`` when present and valid; otherwise computed with sympy
    (:meth:`Bound.compile_entry`) and written there.
    """
    key = bound_key(bound)
    info = meta(bound)
    got = load_entry(key, info)
    if got is None:
        entry = {"key": key, **bound.compile_entry()}
        got = _build(entry, info)
        write_file(f"bound-{key}.json", {**entry, "digest": _digest(entry)})
    return got


def bound_key(bound: Any) -> str:
    """The cache key of a bound: its statement's text (:meth:`Bound.cache_text`), the
    package version and :data:`FORMAT`."""
    return _hash(json.dumps([FORMAT, theory.__version__, bound.cache_text()]))
