"""The exit codes of every ``palsgd`` command, in one table (also in the README).

===== ==================== ==========================================================
code  name                 meaning
===== ==================== ==========================================================
0     OK                   finished; nothing violated
1     BOUND_VIOLATED       ``palsgd verify``: a bound is violated that is not a known
                           finding, or a known finding no longer reproduces
2     BAD_INPUT            bad input: a parameter, name, file or path (one line names it)
3     DIVERGED             ``palsgd train``: the loss or the parameters became NaN/inf
4     FAILED               a run the command launched failed (a rank, a figure's run)
5     CONTRADICTION        ``palsgd check``: an upper bound is below a lower bound where both
                           apply: at least one of them is false (both are named)
6     UNTESTED             ``palsgd verify``: nothing violated, but a bound was tested on no
                           design inside its conditions in any stage (it is named)
70    INTERNAL_ERROR       a bug in the toolkit: a traceback is printed, please report it
71    OUT_OF_RESOURCES     out of memory or disk space (the message says which)
130   INTERRUPTED          interrupted by the user (SIGINT, Ctrl-C)
141   BROKEN_PIPE          standard output was closed early (``palsgd check | head -1``)
===== ==================== ==========================================================

A broken pipe ends quietly (no message, no traceback) with 141, the code a shell reports
for a process ended by SIGPIPE; the reader that closed the pipe got what it read.
"""

from __future__ import annotations

__all__ = [
    "OK",
    "BOUND_VIOLATED",
    "BAD_INPUT",
    "DIVERGED",
    "FAILED",
    "CONTRADICTION",
    "UNTESTED",
    "INTERNAL_ERROR",
    "OUT_OF_RESOURCES",
    "INTERRUPTED",
    "BROKEN_PIPE",
    "TABLE",
    "describe",
]

OK = 0
BOUND_VIOLATED = 1
BAD_INPUT = 2
DIVERGED = 3
FAILED = 4
CONTRADICTION = 5
UNTESTED = 6
INTERNAL_ERROR = 70
OUT_OF_RESOURCES = 71
INTERRUPTED = 130
BROKEN_PIPE = 141

#: code -> (name, meaning); the README's table is this one
TABLE: dict[int, tuple[str, str]] = {
    OK: ("ok", "finished; nothing violated"),
    BOUND_VIOLATED: (
        "bound violated",
        "`palsgd verify`: an encoded bound is violated that is not a known finding, or a "
        "known finding no longer reproduces (`--at`: violated at that design)",
    ),
    BAD_INPUT: (
        "bad input",
        "a parameter, name, file or output path is invalid; one line names it, no traceback",
    ),
    DIVERGED: ("diverged", "`palsgd train`: the loss or the parameters became NaN/inf"),
    FAILED: ("run failed", "a run the command launched failed (a training rank, a figure's run)"),
    CONTRADICTION: (
        "contradiction",
        "`palsgd check`: an upper bound is below a lower bound where both apply, so at least "
        "one of them is false (both are named; `palsgd verify` on both says which)",
    ),
    UNTESTED: (
        "untested",
        "`palsgd verify`: nothing violated, but a bound was tested on no design inside its "
        "conditions in any stage (the summary names it: 'untested: no design inside its "
        "conditions'); a violation takes precedence (1)",
    ),
    INTERNAL_ERROR: (
        "internal error",
        "a bug in the toolkit: the traceback is printed; please report it",
    ),
    OUT_OF_RESOURCES: ("out of resources", "out of memory or disk space (the message says which)"),
    INTERRUPTED: (
        "interrupted",
        "interrupted by the user (SIGINT / Ctrl-C), at any instant from start-up on: one "
        "line, no traceback",
    ),
    BROKEN_PIPE: (
        "broken pipe",
        "standard output closed early (`palsgd check | head -1`): ends quietly",
    ),
}


def describe(code: int) -> str:
    """``"2 (bad input)"`` for a known code, ``"N"`` otherwise."""
    name = TABLE.get(code, (None,))[0]
    return f"{code} ({name})" if name else str(code)
