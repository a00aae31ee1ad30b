"""The cost model's worker count check; every other input of the cost model is checked by
the base layer's :func:`core.validation.check_number` and :func:`core.validation.check_choice`."""

from __future__ import annotations

from typing import Any

from theory.validation import validate_one

__all__ = ["check_workers"]


def check_workers(K: Any) -> int:
    """The worker count ``K`` as an int (:func:`theory.validation.validate_one`)."""
    validate_one("K", K)
    return int(K)
