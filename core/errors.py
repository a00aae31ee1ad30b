"""The errors every user-caused failure raises: :class:`UserInputError` (the CLI prints its
message and exits with 2, no traceback), and :class:`InputChanged`, an input that was
checked at the start and changed under a running job (also 2: the run records it, keeps its
last checkpoint and ends with one line)."""

from __future__ import annotations

__all__ = ["UserInputError", "InputChanged"]


class UserInputError(ValueError):
    """Bad input from a user (parameter, file, name). The CLI prints it and exits with 2."""


class InputChanged(UserInputError):
    """An input file changed while a run read it (truncated, rewritten with ids the start's
    check would have refused). One message argument, so that a DataLoader worker's copy is
    re-raised as this type in the training process."""

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @property
    def line(self) -> str:
        """The message in one line (a DataLoader worker's re-raised copy carries the
        worker's traceback: its last line is the message)."""
        text = str(self)
        if "Traceback" not in text:
            return text.strip()
        last = [ln for ln in text.splitlines() if ln.strip()][-1]
        return last.split(f"{type(self).__name__}: ", 1)[-1].strip()
