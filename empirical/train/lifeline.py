"""The processes of a launch end together: the launcher forwards the signals that stop a
run to torchrun's agent, and the agent and every rank die with their parent, even when
it is killed with SIGKILL (which no handler sees).

The chain is ``palsgd train`` (the launcher) -> ``torchrun``'s agent (a child process,
:func:`run_forwarding_signals`) -> the ranks (the agent's children, each in a session of
its own). Each link below the launcher asks the kernel for a parent-death signal
(Linux ``prctl(PR_SET_PDEATHSIG)``, :func:`die_with_parent`): when its parent exits for any
reason the child gets SIGTERM, so the agent stops its ranks and a rank whose agent is gone
ends. A child whose parent died before it could ask exits at once (it compares its parent
with the process id the parent left in the environment).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

__all__ = [
    "FORWARDED_SIGNALS",
    "ENV_LAUNCHER_PID",
    "ENV_AGENT_PID",
    "die_with_parent",
    "expected_parent",
    "run_forwarding_signals",
]

#: the signals the launcher passes on to the agent (the agent stops its ranks on each)
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: environment variables naming the process a child expects as its parent
ENV_LAUNCHER_PID = "PALSGD_LAUNCHER_PID"
ENV_AGENT_PID = "PALSGD_AGENT_PID"

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(expected_parent: int | None = None, sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent exits (Linux; returns
    False where that is not available, True otherwise).

    ``expected_parent``: the process id the parent should have; if this process was
    already orphaned before the request took effect (its parent is another process now),
    it sends ``sig`` to itself at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os.kill(os.getpid(), sig)
    return True


def expected_parent(variable: str) -> int | None:
    """The parent process id left in the environment variable ``variable`` (None if unset
    or not a number)."""
    with contextlib.suppress(KeyError, ValueError):
        return int(os.environ[variable])
    return None


@contextlib.contextmanager
def _forwarding(proc: subprocess.Popen, received: list[int]) -> Iterator[None]:
    """While the block runs, the signals of :data:`FORWARDED_SIGNALS` go to ``proc`` (and
    are noted in ``received``) instead of stopping this process. Signal handlers exist in
    the main thread only; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_forwarding_signals(
    cmd: Sequence[str], env: Mapping[str, str], grace_s: float = 60.0
) -> tuple[int, list[int]]:
    """Run ``cmd`` as a child in a session of its own and wait for it; return its exit code
    (negative: killed by that signal) and the signals this process received meanwhile.

    SIGTERM, SIGINT and SIGHUP sent to this process are passed on to the child once each
    (a terminal's Ctrl-C reaches this process only: the child is not in the terminal's
    process group). A child still running ``grace_s`` seconds after the first of them is
    killed (its own children then get their parent-death signal), and so is a child left
    running by an exception here. The child finds this process's id in
    :data:`ENV_LAUNCHER_PID`, for :func:`die_with_parent`.
    """
    env = {**env, ENV_LAUNCHER_PID: str(os.getpid())}
    proc = subprocess.Popen(list(cmd), env=env, start_new_session=True)
    received: list[int] = []
    try:
        with _forwarding(proc, received):
            deadline = None
            while True:
                try:
                    return proc.wait(timeout=0.5), received
                except subprocess.TimeoutExpired:
                    pass
                if received and deadline is None:
                    deadline = time.monotonic() + grace_s
                if deadline is not None and time.monotonic() > deadline:
                    proc.kill()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
