"""The registered bounds without sympy: the registry snapshot of the on-disk cache.

``registry-<fingerprint>.json`` (in :func:`theory.bound.cache.cache_dir`) lists the
registered built-in bounds (their descriptions, metadata and bound keys) and lower bounds,
so that a fresh process (``palsgd check``, ``palsgd bounds``) knows them without importing
sympy. ``fingerprint`` hashes the package version and the text of every module of the
``theory`` package, so editing or adding a bound module (``theory/bounds/``) invalidates
it; whatever bounds the modules register are listed, one entry each.

The dependencies point one way: this module reads the registry (:mod:`theory.bounds`,
:mod:`theory.lower`) and the per-bound cache (:mod:`theory.bound.cache`); the registry
imports :mod:`theory.bound`, which imports only the per-bound cache, never this module.
This module imports neither sympy nor numpy; the registry is imported inside the functions
that need it (it imports sympy, which ``palsgd check`` on a warm cache never loads).
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

import theory
from theory.bound.cache import FORMAT, bound_key, cache_dir, load_entry, meta, read_file, write_file

__all__ = ["KEEP_SNAPSHOTS", "descriptions", "fingerprint", "lower_descriptions", "registered"]

_THEORY_DIR = os.path.dirname(os.path.abspath(theory.__file__))
_memo: dict[str, Any] = {}

#: registry snapshots kept (one per source tree and version that ran here, newest first)
KEEP_SNAPSHOTS = 8


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


def _snapshot() -> dict[str, Any]:
    """The registry snapshot (loaded, or built by importing the bound modules and written)."""
    if "snapshot" in _memo:
        return _memo["snapshot"]
    fp = fingerprint()
    name = f"registry-{fp}.json"
    snap = read_file(name)
    if (
        snap is None
        or snap.get("fingerprint") != fp
        or not isinstance(snap.get("bounds"), list)
        or not isinstance(snap.get("lower"), list)
    ):
        # lazy: the registry imports sympy (a warm cache never needs it)
        from theory import bounds as registry
        from theory import lower

        items = []
        for b in registry.all_bounds():
            b.compiled  # noqa: B018 (computes or loads the bound's entry)
            items.append({"meta": meta(b), "key": bound_key(b), "describe": b.describe()})
        snap = {
            "fingerprint": fp,
            "bounds": items,
            "lower": [lower.describe_lower(lb) for lb in lower.lower_bounds()],
        }
        write_file(name, snap)
        _prune(keep=name)
    _memo["snapshot"] = snap
    return snap


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
    """Every registered bound as a :class:`~theory.bound.numeric.CompiledBound`, by name.

    In a process that has imported :mod:`theory.bounds` (and may have registered its own
    bounds), the live registry; otherwise the built-in bounds from the registry snapshot,
    without sympy.
    """
    if _live():
        from theory import bounds as registry  # already imported (see _live)

        return {b.name: b.compiled for b in registry.all_bounds()}
    if "registered" in _memo:
        return dict(_memo["registered"])
    out = {}
    for item in _snapshot()["bounds"]:
        got = load_entry(item["key"], item["meta"])
        if got is None:  # entry gone or corrupt: rebuild from the sympy bound
            from theory import bounds as registry  # lazy: sympy

            got = registry.get(item["meta"]["name"]).compiled
        out[got.name] = got
    _memo["registered"] = dict(sorted(out.items()))
    return dict(_memo["registered"])


def descriptions() -> list[dict[str, Any]]:
    """:meth:`Bound.describe` of every registered bound, sorted by name (see :func:`registered`)."""
    if _live():
        from theory import bounds as registry  # already imported (see _live)

        return [b.describe() for b in registry.all_bounds()]
    return sorted((item["describe"] for item in _snapshot()["bounds"]), key=lambda d: d["name"])


def lower_descriptions() -> list[dict[str, Any]]:
    """:func:`theory.lower.describe_lower` of every registered lower bound, sorted by name
    (the live registry once :mod:`theory.lower` is imported, else the snapshot's)."""
    if "theory.lower" in sys.modules:
        from theory import lower  # already imported

        return [lower.describe_lower(lb) for lb in lower.lower_bounds()]
    return sorted(_snapshot()["lower"], key=lambda d: d["name"])
