"""Faults injected into every process of a launch (the sitecustomize module next to this
file applies them at interpreter start when their environment variable is set).

``PALSGD_FAULT_DISK_FULL=TEXT``: ``os.fsync`` of a file whose path contains ``TEXT``
fails with ``ENOSPC`` ("No space left on device"), as it does on a full disk; the atomic
writers of checkpoints and records call it before they rename their temporary file.
"""

from __future__ import annotations

import errno
import os

__all__ = ["ENV_DISK_FULL", "disk_full", "install_from_env"]

ENV_DISK_FULL = "PALSGD_FAULT_DISK_FULL"


def disk_full(text: str) -> None:
    """Make ``os.fsync`` fail with ENOSPC on files whose path contains ``text``."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if text in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    os.fsync = fsync


def install_from_env() -> None:
    """The faults named by the environment (none when no variable is set)."""
    text = os.environ.get(ENV_DISK_FULL)
    if text:
        disk_full(text)
