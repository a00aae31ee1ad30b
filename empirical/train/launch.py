"""Launching ranks: the checks run once before torchrun starts them, the ``torchrun`` launch
of ``--nproc`` ranks on this node, and the launcher's own exit codes (one line per failed
rank instead of torchrun's traceback)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main as torchrun_main

from empirical.algorithms import check_stability
from empirical.checkpoint import resolve_resume
from empirical.config import TrainConfig, config_to_dict
from empirical.tokenizer import check_tokenizer_path
from empirical.train.options import PROG
from empirical.train.outcomes import EXIT_DIVERGED, EXIT_OK, EXIT_USER_ERROR
from empirical.train.prepare import algorithm_config, check_devices, check_names
from theory import exitcodes
from theory.io import atomic_write_json
from theory.validation import check_output_dir

__all__ = ["check_before_launch", "launch_torchrun", "run_torchrun"]

#: the module each launched rank runs, and the function this launcher runs torchrun with
_RANK_MODULE = "empirical.train"
_LAUNCHER = (
    "import sys; from empirical.train import run_torchrun; sys.exit(run_torchrun(sys.argv[1:]))"
)


def check_before_launch(cfg: TrainConfig) -> None:
    """The checks of :func:`~empirical.train.prepare.prepare` that need no data, run once
    before torchrun starts ``cfg.nproc`` ranks, so that bad input exits with 2 and one line
    naming the option instead of failing inside every rank: model and dataset names and
    their tasks, the algorithm's fields (coins, outer optimizer, ``p`` for a non-PALSGD
    algorithm, ...), the pull's stability, the device, an explicit ``--resume`` path and a tokenizer
    directory. Raises
    :class:`~theory.validation.UserInputError`.
    """
    check_names(cfg)
    check_stability(algorithm_config(cfg), cfg.alpha, strict=True)
    check_devices(cfg, cfg.nproc)
    if cfg.resume not in (None, "auto"):
        resolve_resume(cfg.resume, cfg.output_dir)
    if cfg.tokenizer not in (None, "byte"):
        check_tokenizer_path(cfg.tokenizer)


def launch_torchrun(cfg: TrainConfig) -> int:
    """Run ``cfg.nproc`` ranks on this node through ``torch.distributed.run``.

    The resolved configuration is passed as a JSON file, so every rank sees exactly the
    options validated here. Returns the launcher's exit code, except that a run whose ranks
    stopped on a non-finite loss returns :data:`EXIT_DIVERGED` (torchrun itself reports
    any failing child as 1), an interrupted launch 130, and any other failure
    :data:`theory.exitcodes.FAILED`.
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
        _RANK_MODULE,
        "--config",
        str(cfg_path),
    ]
    env = {**os.environ, "PALSGD_RUN_ID": run_id}
    env.setdefault("OMP_NUM_THREADS", "1")
    code = subprocess.run([sys.executable, "-c", _LAUNCHER, *torchrun_args], env=env).returncode
    if code == 0:
        return code
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((out / "summary.json").read_text())
        if data.get("run_id") == run_id and data.get("status") == "diverged":
            return EXIT_DIVERGED
    if code in (exitcodes.INTERRUPTED, -2):
        return exitcodes.INTERRUPTED
    if code == EXIT_USER_ERROR:
        print(f"{PROG}: the ranks refused the input (see their messages above)", file=sys.stderr)
        return EXIT_USER_ERROR
    print(
        f"{PROG}: the torchrun launch of {cfg.nproc} ranks failed with exit code {code} "
        "(see the ranks' messages above)",
        file=sys.stderr,
    )
    return exitcodes.FAILED


def run_torchrun(argv: Sequence[str]) -> int:
    """``torch.distributed.run`` with ``argv``, in this process; returns an exit code.

    torchrun ends a failed launch with a traceback of its own ``ChildFailedError``; here a
    failed launch prints one line per failed rank instead and returns 2 when every failed
    rank refused its input (exit code 2), 3 when a rank diverged, 130 when interrupted and
    :data:`theory.exitcodes.FAILED` otherwise (a rank killed or crashed).
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
        if own == {EXIT_USER_ERROR}:
            return EXIT_USER_ERROR
        if EXIT_DIVERGED in own:
            return EXIT_DIVERGED
        return exitcodes.FAILED
    except (KeyboardInterrupt, SignalException) as exc:
        sig = getattr(exc, "sigval", signal.SIGINT)
        print(f"{PROG}: launch interrupted ({signal.Signals(sig).name})", file=sys.stderr)
        return exitcodes.INTERRUPTED if sig == signal.SIGINT else exitcodes.FAILED
    return EXIT_OK
