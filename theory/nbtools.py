"""Small display and file helpers shared by the notebooks in ``notebooks/``.

The notebooks import these (``from theory.nbtools import fmt, md_table, output_dir``) so that
each stays short; the module lives in an installed package because the notebooks are also
executed from other working directories (the test suite runs them in a temporary one).
IPython is needed only by :func:`md_table`, and imported there.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.io import write_csv

__all__ = ["OUT_ENV", "fmt", "md_table", "output_dir", "write_csv"]

#: environment variable naming the folder the notebooks write their data files into
OUT_ENV = "PALSGD_NOTEBOOK_OUT"


def output_dir(name: str) -> Path:
    """The folder ``<root>/<name>`` for a notebook's data files, created if missing.

    ``<root>`` is the folder named by ``$PALSGD_NOTEBOOK_OUT`` when that is set and not empty,
    otherwise a new temporary folder (prefix ``palsgd-nb-``), so that a notebook never writes
    into the repository.
    """
    root = Path(os.environ.get(OUT_ENV) or tempfile.mkdtemp(prefix="palsgd-nb-"))
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def fmt(x: Any, spec: str = ".3g") -> str:
    """``x`` as text with the format ``spec``; ``"n/a"`` for ``None``, ``""`` and NaN.

    Infinities print as ``inf`` / ``-inf``. Anything else must convert with ``float()``.
    """
    if x is None or (isinstance(x, str) and x == ""):
        return "n/a"
    x = float(x)
    return "n/a" if math.isnan(x) else format(x, spec)


def md_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Display a list of dicts as a Markdown table with the given columns (missing: blank)."""
    from IPython.display import Markdown, display

    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |\n" for r in rows)
    display(Markdown(head + body))
