"""The progress bars of ``palsgd verify`` (on stderr; none when disabled or empty)."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

__all__ = ["progress_bar"]


def progress_bar(total: int, enabled: bool, desc: str = "palsgd verify") -> Any:
    if not enabled or total == 0:
        return None
    return tqdm(total=total, desc=desc, unit="step", leave=False, dynamic_ncols=True)
