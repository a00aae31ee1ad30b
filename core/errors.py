"""The error every user-caused failure raises: :class:`UserInputError` (the CLI prints its
message and exits with 2, no traceback)."""

from __future__ import annotations

__all__ = ["UserInputError"]


class UserInputError(ValueError):
    """Bad input from a user (parameter, file, name). The CLI prints it and exits with 2."""
