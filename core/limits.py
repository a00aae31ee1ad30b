"""Caps on what one command may ask of the machine it runs on, checked before any work.

A request beyond a cap is refused with a :class:`~core.errors.UserInputError` naming the
flag, the value and the cap (exit code 2), instead of starting work that cannot finish:

* :func:`check_processes`: processes started on this machine (``palsgd cost calibrate
  --world-size``, ``palsgd train --nproc`` on the CPU): at most :data:`PROCESSES_PER_CORE`
  per CPU core (and never fewer than 8 allowed), and their memory
  (:data:`PROCESS_BYTES` each) within :func:`core.files.check_memory`.
* :func:`check_steps`: a run's step count, at most :data:`MAX_STEPS` (``palsgd train --T``,
  ``palsgd probe --steps``): more than a hundred times the longest run of the paper.
* :func:`check_duration`: a lower estimate of a command's wall-clock (``palsgd cost check``:
  the emulated link delays alone), at most :data:`MAX_PLANNED_S` unless the user confirms.

Memory for arrays is :func:`core.files.check_memory`.
"""

from __future__ import annotations

import math
import os
from typing import Any

from core.errors import UserInputError
from core.files import check_memory
from core.validation import check_int

__all__ = [
    "MAX_PLANNED_S",
    "MAX_STEPS",
    "PROCESS_BYTES",
    "PROCESSES_PER_CORE",
    "check_duration",
    "check_processes",
    "check_steps",
    "process_cap",
]

#: processes a command may start per CPU core (a gloo rank per core is the fast case; a few
#: per core still run, slowly)
PROCESSES_PER_CORE = 4
#: memory one started process is planned to hold (the resident size of a torch process)
PROCESS_BYTES = 400 * 2**20
#: steps one run may take: the paper's longest runs take about 10^5 steps
MAX_STEPS = 10**7
#: a command's planned wall-clock (a lower estimate) beyond which it asks for confirmation
MAX_PLANNED_S = 3600.0


def process_cap(cores: int | None = None) -> int:
    """The most processes a command may start here: :data:`PROCESSES_PER_CORE` per core,
    at least 8."""
    if cores is None:
        cores = os.cpu_count() or 1
    return max(8, PROCESSES_PER_CORE * cores)


def check_processes(n: Any, flag: str, *, cores: int | None = None) -> int:
    """``n`` (processes to start on this machine) if it is at most :func:`process_cap` and
    their memory fits; otherwise :class:`UserInputError` naming ``flag``."""
    cap = process_cap(cores)
    n = check_int(flag, n, 1)
    if n > cap:
        raise UserInputError(
            f"{flag} = {n} processes is more than this machine can run: at most {cap} "
            f"({PROCESSES_PER_CORE} per CPU core, {os.cpu_count()} cores)"
        )
    check_memory(n * PROCESS_BYTES, f"{flag} = {n} processes ({PROCESS_BYTES >> 20} MiB each)")
    return n


def check_steps(T: Any, flag: str, *, cap: int = MAX_STEPS) -> None:
    """Refuse a step count above ``cap`` (:data:`MAX_STEPS`), naming ``flag``."""
    if isinstance(T, int | float) and not isinstance(T, bool) and T > cap:
        raise UserInputError(
            f"{flag} = {T:g} steps is more than one run may take here: at most {cap:.0e} "
            "(the paper's longest runs take about 1e5 steps)"
        )


def check_duration(seconds: float, what: str, *, confirmed: bool, flag: str = "--yes") -> None:
    """Refuse a command whose planned wall-clock (a lower estimate, ``seconds``) exceeds
    :data:`MAX_PLANNED_S`, unless the user ``confirmed`` it with ``flag``. ``what`` says
    where the estimate comes from and which options set it."""
    if confirmed or (math.isfinite(seconds) and seconds <= MAX_PLANNED_S):
        return
    shown = f"{seconds / 3600:.3g} h" if math.isfinite(seconds) else "for ever"
    raise UserInputError(
        f"{what} would run at least {shown} (more than {MAX_PLANNED_S / 3600:g} h): "
        f"ask for less, or confirm with {flag}"
    )
