"""Launching ranks: the checks run once before torchrun starts them, the ``torchrun`` launch
of ``--nproc`` ranks on this node (signals forwarded, no rank left behind:
:mod:`empirical.train.lifeline`) or the in-process run of one rank, and the launcher's own
exit codes (one line per failed rank instead of torchrun's traceback)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import Iterator, Sequence

import torch
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main as torchrun_main

from core import exitcodes
from core.files import check_output_dir
from core.io import atomic_write_json
from empirical.algorithms import check_stability
from empirical.checkpoint import resolve_resume
from empirical.config import TrainConfig, config_to_dict
from empirical.tokenizer import check_tokenizer_path
from empirical.train.lifeline import (
    ENV_AGENT_PID,
    ENV_LAUNCHER_PID,
    die_with_parent,
    expected_parent,
    run_forwarding_signals,
)
from empirical.train.options import PROG
from empirical.train.outcomes import EXIT_DIVERGED, EXIT_NO_RESOURCES, EXIT_OK, EXIT_USER_ERROR
from empirical.train.prepare import algorithm_config, check_devices, check_names
from empirical.train.session import train
from empirical.train.stacked import check_stacked_algorithm

__all__ = [
    "check_before_launch",
    "launch_torchrun",
    "run_ranks",
    "rank_threads",
    "agent_main",
    "run_torchrun",
    "RANK_THREADS",
]

#: the module each launched rank runs, and the function torchrun's agent process runs
_RANK_MODULE = "empirical.train"
_LAUNCHER = (
    "import os, signal, sys\n"
    "quiet = signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    "if quiet: signal.signal(signal.SIGINT, lambda *_: os._exit(130))\n"
    "from empirical.train.launch import agent_main\n"
    "if quiet: signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "sys.exit(agent_main(sys.argv[1:]))"
)
#: intra-op threads of a rank unless OMP_NUM_THREADS says otherwise (torchrun's default
#: for ranks on a shared node; the in-process path takes the same)
RANK_THREADS = 1


def check_before_launch(cfg: TrainConfig) -> None:
    """The checks of :func:`~empirical.train.prepare.prepare` that need no data, run once
    before torchrun starts ``cfg.nproc`` ranks, so that bad input exits with 2 and one line
    naming the option instead of failing inside every rank: model and dataset names and
    their tasks, the algorithm's fields (coins, outer optimizer, ``p`` for a non-PALSGD
    algorithm, ...), the pull's stability, the device, an explicit ``--resume`` path and a tokenizer
    directory. Raises
    :class:`~core.errors.UserInputError`.
    """
    check_names(cfg)
    alg = algorithm_config(cfg)
    check_stacked_algorithm(cfg, alg)
    check_stability(alg, cfg.alpha, strict=True)
    check_devices(cfg, cfg.nproc)
    if cfg.resume not in (None, "auto"):
        resolve_resume(cfg.resume, cfg.output_dir)
    if cfg.tokenizer not in (None, "byte"):
        check_tokenizer_path(cfg.tokenizer)


def launch_torchrun(cfg: TrainConfig) -> int:
    """Run ``cfg.nproc`` ranks on this node through ``torch.distributed.run``.

    The resolved configuration is passed as a JSON file, so every rank sees exactly the
    options validated here. torchrun's agent runs in a child process (:func:`agent_main`)
    that gets the SIGTERM, SIGINT and SIGHUP sent to this one and ends with it, as its
    ranks end with the agent (:mod:`empirical.train.lifeline`). Returns 0 when the ranks
    finished; :data:`EXIT_DIVERGED` for a run whose ranks stopped on a non-finite loss
    (torchrun itself reports any failing child as 1), 2 when the ranks refused the input,
    71 when they ran out of memory or disk space, 130 when interrupted (SIGINT), and
    :data:`core.exitcodes.FAILED` for any other failure (a rank killed or crashed, the
    launch stopped by SIGTERM or SIGHUP).
    """
    check_before_launch(cfg)
    out = check_output_dir(cfg.output_dir, "--output-dir")
    run_id = uuid.uuid4().hex
    cfg_path = atomic_write_json(out / "launch_config.json", config_to_dict(cfg))
    torchrun_args = [
        "--standalone",
        f"--nproc-per-node={cfg.nproc}",
        f"--max-restarts={cfg.max_restarts}",
        "-m",
        "core.child",  # each rank quiet on Ctrl-C while it imports torch (core/child.py)
        _RANK_MODULE,
        "--config",
        str(cfg_path),
    ]
    env = {**os.environ, "PALSGD_RUN_ID": run_id}
    env.setdefault("OMP_NUM_THREADS", str(RANK_THREADS))
    env.setdefault("LOGLEVEL", "ERROR")  # torchrun's warnings: this launcher says what ends
    cmd = [sys.executable, "-c", _LAUNCHER, *torchrun_args]
    code, received = run_forwarding_signals(cmd, env)
    if code == 0:
        return code
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((out / "summary.json").read_text())
        if data.get("run_id") == run_id and data.get("status") == "diverged":
            return EXIT_DIVERGED
    if signal.SIGINT in received or code in (exitcodes.INTERRUPTED, -signal.SIGINT):
        print(f"{PROG}: interrupted", file=sys.stderr)  # the one line (agent, ranks quiet)
        return exitcodes.INTERRUPTED
    if code == EXIT_USER_ERROR:
        print(f"{PROG}: the ranks refused the input (see their messages above)", file=sys.stderr)
        return EXIT_USER_ERROR
    if code == EXIT_NO_RESOURCES:
        print(f"{PROG}: the ranks ran out of resources (see their messages above)", file=sys.stderr)
        return EXIT_NO_RESOURCES
    if received:
        names = ", ".join(signal.Signals(s).name for s in dict.fromkeys(received))
        print(f"{PROG}: the launch was stopped ({names}); its ranks are stopped", file=sys.stderr)
        return exitcodes.FAILED
    print(
        f"{PROG}: the torchrun launch of {cfg.nproc} ranks failed with exit code {code} "
        "(see the ranks' messages above)",
        file=sys.stderr,
    )
    return exitcodes.FAILED


def run_ranks(cfg: TrainConfig) -> int:
    """Train ``cfg``: a torchrun launch of ``cfg.nproc`` ranks (:func:`launch_torchrun`)
    when ``cfg.nproc > 1`` outside torchrun, else in this process
    (:func:`empirical.train.train`), with the intra-op thread count a launched rank gets
    (``OMP_NUM_THREADS``, else :data:`RANK_THREADS`; restored afterwards) unless this
    process already is a torchrun rank. Returns the exit code."""
    if "WORLD_SIZE" in os.environ:
        return train(cfg)
    if cfg.nproc > 1:
        return launch_torchrun(cfg)
    with rank_threads():
        return train(cfg)


@contextlib.contextmanager
def rank_threads() -> Iterator[int]:
    """Run the block with torch's intra-op threads set as torchrun sets a rank's:
    ``OMP_NUM_THREADS`` if it is a positive integer, else :data:`RANK_THREADS`."""
    try:
        threads = max(int(os.environ.get("OMP_NUM_THREADS", RANK_THREADS)), 1)
    except ValueError:
        threads = RANK_THREADS
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def agent_main(argv: Sequence[str]) -> int:
    """The process that runs torchrun's agent for :func:`launch_torchrun`: it ends with
    the launcher (parent-death signal, :mod:`empirical.train.lifeline`), leaves its own
    process id for the ranks to end with it, and runs :func:`run_torchrun`."""
    die_with_parent(expected_parent(ENV_LAUNCHER_PID))
    os.environ[ENV_AGENT_PID] = str(os.getpid())
    # torchrun's own warnings ("Sending process N closing signal SIGINT") stay quiet: the
    # command prints one line for how the launch ended (LOGLEVEL: torchrun's variable)
    logging.getLogger("torch.distributed.elastic").setLevel(os.environ.get("LOGLEVEL", "ERROR"))
    return run_torchrun(argv)


def run_torchrun(argv: Sequence[str]) -> int:
    """``torch.distributed.run`` with ``argv``, in this process; returns an exit code.

    torchrun ends a failed launch with a traceback of its own ``ChildFailedError``; here a
    failed launch prints one line per failed rank instead and returns 2 when every failed
    rank refused its input (exit code 2), 71 when every failed rank ran out of resources
    (exit code 71), 3 when a rank diverged, 130 when interrupted and
    :data:`core.exitcodes.FAILED` otherwise (a rank killed or crashed).
    """
    try:
        torchrun_main(list(argv))
    except ChildFailedError as exc:
        codes = set()
        for rank, failure in sorted(exc.failures.items()):
            code = failure.exitcode
            codes.add(code)
            how = f"killed by {failure.signal_name()}" if code < 0 else f"exit code {code}"
            print(f"{PROG}: rank {rank} failed ({how})", file=sys.stderr)
        own = codes - {-signal.SIGTERM}  # the launcher stops the other ranks with SIGTERM
        if own in ({EXIT_USER_ERROR}, {EXIT_NO_RESOURCES}):
            return own.pop()
        if EXIT_DIVERGED in own:
            return EXIT_DIVERGED
        return exitcodes.FAILED
    except (KeyboardInterrupt, SignalException) as exc:
        sig = getattr(exc, "sigval", signal.SIGINT)
        if sig != signal.SIGINT:  # Ctrl-C: the command prints the one line
            print(f"{PROG}: launch interrupted ({signal.Signals(sig).name})", file=sys.stderr)
        return exitcodes.INTERRUPTED if sig == signal.SIGINT else exitcodes.FAILED
    return EXIT_OK
