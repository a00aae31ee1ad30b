"""The entry points: ``palsgd train`` (:func:`run`, launching torchrun for ``--nproc`` > 1)
and ``python -m empirical.train``, the entry of each torchrun rank (:func:`main`), with
their failures mapped to exit codes."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from core import exitcodes
from core.errors import UserInputError
from core.files import check_output_dir
from empirical.checkpoint import latest_complete
from empirical.config import TrainConfig, config_to_dict
from empirical.train.inputs import check_inputs_before_launch
from empirical.train.launch import run_ranks
from empirical.train.lifeline import ENV_AGENT_PID, die_with_parent, expected_parent
from empirical.train.options import PROG, add_arguments, config_from_args
from empirical.train.outcomes import EXIT_NO_RESOURCES, EXIT_OK, EXIT_USER_ERROR, rank_tag
from theory.presets import render_presets

__all__ = ["run", "main", "entry"]


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd train`` (see :mod:`empirical.train` for exit codes)."""
    if vars(args).get("cfg:list_presets"):
        print(render_presets())
        return EXIT_OK
    cfg = config_from_args(args)
    if vars(args).get("cfg:print_config"):
        print(json.dumps(config_to_dict(cfg), indent=2))
        return EXIT_OK
    check_output_dir(cfg.output_dir, "--output-dir")
    if cfg.checkpoint_dir:
        check_output_dir(cfg.checkpoint_dir, "--checkpoint-dir")
    if cfg.export_dir:  # written at the end: refused now, naming the flag
        check_output_dir(cfg.export_dir, "--export-dir")
    if "WORLD_SIZE" not in os.environ:  # once per command, not in each (restarted) rank
        _refuse_previous_run(cfg)
        check_inputs_before_launch(cfg)  # a token file read once, before any rank starts
    try:
        return run_ranks(cfg)
    except MemoryError:
        print(f"{PROG}: error{rank_tag()}: out of memory", file=sys.stderr)
        return EXIT_NO_RESOURCES
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(
            f"{PROG}: error{rank_tag()}: no space left on the device while writing "
            f"'{exc.filename or 'an output file'}'",
            file=sys.stderr,
        )
        return EXIT_NO_RESOURCES


#: files of a finished or started run in its output directory (empirical.metrics, records)
_RUN_FILES = ("summary.json", "metrics.jsonl", "train.csv")


#: files another command writes into its output directory (``palsgd map --out``)
_OTHER_FILES = {"map.json": "palsgd map", "map.csv": "palsgd map"}


def _refuse_previous_run(cfg: TrainConfig) -> None:
    """A second run into an output directory that holds a run's records would replace them:
    refused unless ``--resume`` continues that run or ``--overwrite`` asks to start afresh.
    A directory holding another command's output is refused (``--resume auto`` too), and
    ``--resume auto`` with no checkpoint to continue says it starts a new run."""
    other = [f for f in _OTHER_FILES if (Path(cfg.output_dir) / f).exists()]
    if other:
        raise UserInputError(
            f"--output-dir '{cfg.output_dir}' holds the output of {_OTHER_FILES[other[0]]} "
            f"({other[0]}), not a training run: give another --output-dir"
        )
    if cfg.resume == "auto" and latest_complete(cfg.checkpoint_path()) is None:
        print(
            f"{PROG}: note: --resume auto: no checkpoint in '{cfg.checkpoint_path()}' to "
            "continue; starting a new run",
            file=sys.stderr,
        )
    if cfg.resume or cfg.overwrite:
        return
    found = [f for f in _RUN_FILES if (Path(cfg.output_dir) / f).exists()]
    if found:
        raise UserInputError(
            f"--output-dir '{cfg.output_dir}' holds a previous run ({found[0]}): give another "
            "--output-dir, --resume auto to continue it, or --overwrite to replace it"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m empirical.train`` (the torchrun entry): parse, train, map errors to codes."""
    parser = argparse.ArgumentParser(
        prog="python -m empirical.train", description="PALSGD trainer (one rank of a torchrun job)"
    )
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run(args)
    except UserInputError as exc:
        print(f"{PROG}: error{rank_tag()}: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        if ENV_AGENT_PID not in os.environ:  # a rank of `palsgd train`: the command says it
            print(f"{PROG}: interrupted{rank_tag()}", file=sys.stderr)
        return exitcodes.INTERRUPTED


def entry() -> None:  # pragma: no cover - exercised through torchrun in the tests
    """``python -m empirical.train``: :func:`main` under torchrun's error recorder. A rank
    of torchrun ends with torchrun's agent, even when the agent is killed with SIGKILL
    (:func:`empirical.train.lifeline.die_with_parent`)."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        sys.exit(record(main)())
    die_with_parent(expected_parent(ENV_AGENT_PID) or os.getppid())
    code = record(main)()
    # A rank has closed its files and left the process group by now; what remains is the
    # interpreter's and the C++ libraries' teardown, where gloo has been seen to abort a
    # rank whose peer was still tearing down ("terminate called without an active
    # exception", SIGABRT), replacing the run's exit code. The rank ends here instead.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
