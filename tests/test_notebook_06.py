"""Notebook 06 (when pulling pays): paired, stored without outputs, executes, draws, writes.

Reuses the checks of ``tests/test_notebooks.py`` for this notebook (its ``NAMES`` list is
the integrator's to extend).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("nbclient")
_SPEC = importlib.util.spec_from_file_location(
    "_nb_checks", Path(__file__).resolve().parent / "test_notebooks.py"
)
nbchecks = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(nbchecks)  # type: ignore[union-attr]

NAME = "06_when_pulling_pays"


def test_stored_without_outputs():
    nbchecks.test_stored_without_outputs(NAME)


def test_py_pair_in_sync():
    nbchecks.test_py_pair_in_sync(NAME)


@pytest.mark.slow
def test_notebook_executes(tmp_path, monkeypatch, record_property):
    nbchecks.test_notebook_executes(NAME, tmp_path, monkeypatch, record_property)
