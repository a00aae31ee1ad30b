"""Faults injected into every process of a launch (the sitecustomize module next to this
file applies them at interpreter start when their environment variable is set).

``PALSGD_FAULT_DISK_FULL=TEXT``: ``os.fsync`` of a file whose path contains ``TEXT``
fails with ``ENOSPC`` ("No space left on device"), as it does on a full disk; the atomic
writers of checkpoints and records call it before they rename their temporary file.

``PALSGD_FAULT_PAUSE=PHASE:DIR``: the process pauses in ``PHASE`` (one of
:data:`PAUSE_AT`: the token file's scan, a rank's start, the third step, the first
checkpoint, the first evaluation) once its module is imported: it writes the file
``DIR/PHASE.PID`` and sleeps until a signal ends it, so that a test lands a signal in that
phase without relying on timing.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import time
from collections.abc import Callable
from importlib.machinery import PathFinder
from pathlib import Path
from types import ModuleType

__all__ = ["ENV_DISK_FULL", "ENV_PAUSE", "PAUSE_AT", "disk_full", "pause_in", "install_from_env"]

ENV_DISK_FULL = "PALSGD_FAULT_DISK_FULL"
ENV_PAUSE = "PALSGD_FAULT_PAUSE"
#: phase -> (module, class or None, function, the call that pauses: 1 = the first)
PAUSE_AT: dict[str, tuple[str, str | None, str, int]] = {
    "scan": ("empirical.data.token_scan", None, "scan_file", 1),
    "launch": ("empirical.train.prepare", None, "prepare", 1),
    "step": ("empirical.train.trainer", "Trainer", "_one_step", 3),
    "checkpoint": ("empirical.train.checkpoints", "Checkpoints", "save", 1),
    "eval": ("empirical.train.monitor", "Monitor", "evaluate", 1),
}


def disk_full(text: str) -> None:
    """Make ``os.fsync`` fail with ENOSPC on files whose path contains ``text``."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if text in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    os.fsync = fsync


class _AfterImport:
    """A meta-path finder that runs ``patch(module)`` once ``name`` has been imported."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]):
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path, target=None):  # noqa: ANN001 (importlib's)
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            real(module)
            self.patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def pause_in(phase: str, directory: str) -> None:
    """Pause this process in ``phase`` (see the module docstring)."""
    module_name, owner, func, nth = PAUSE_AT[phase]
    marker = Path(directory) / f"{phase}.{os.getpid()}"

    def patch(module: ModuleType) -> None:
        host = getattr(module, owner) if owner else module
        real = getattr(host, func)
        calls = [0]

        @functools.wraps(real)
        def paused(*args, **kwargs):
            calls[0] += 1
            if calls[0] == nth:
                marker.write_text(phase)
                while True:  # until a signal ends it (SIGINT: a KeyboardInterrupt here)
                    time.sleep(0.05)
            return real(*args, **kwargs)

        setattr(host, func, paused)

    sys.meta_path.insert(0, _AfterImport(module_name, patch))


def install_from_env() -> None:
    """The faults named by the environment (none when no variable is set)."""
    text = os.environ.get(ENV_DISK_FULL)
    if text:
        disk_full(text)
    pause = os.environ.get(ENV_PAUSE)
    if pause:
        phase, _, directory = pause.partition(":")
        pause_in(phase, directory)
