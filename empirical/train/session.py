"""One rank's session: :func:`train` prepares, joins (or creates) the process group, runs
the :class:`~empirical.train.trainer.Trainer` and leaves the group; a collective that fails
because a peer died ends the rank with one line and exit code 4."""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import sys

import torch
import torch.distributed as dist

from core import exitcodes
from empirical.config import TrainConfig
from empirical.distributed import _init_kwargs, cleanup, init_distributed
from empirical.train.options import PROG
from empirical.train.outcomes import rank_tag
from empirical.train.prepare import backend_of, prepare
from empirical.train.trainer import Trainer

__all__ = ["train"]


def train(cfg: TrainConfig) -> int:
    """Train one rank (joining or creating the process group); returns the exit code."""
    prep = prepare(cfg)  # binds this rank's device, once
    device = torch.device(prep.device)
    backend = backend_of(cfg, prep.device)
    own_group = _init_group_after_restart(backend, device)
    ctx = init_distributed(backend, bound=device)
    finished = False
    try:
        trainer = Trainer(prep, ctx)
        code = trainer.fit()
        finished = not trainer.ended_alone  # alone: its peers are not at the barrier
        return code
    except RuntimeError as exc:
        if ctx.world_size == 1 or not _from_collective(exc):
            raise
        print(
            f"{PROG}: error{rank_tag()}: a peer rank died or the collective failed "
            f"({_first_words(exc)})",
            file=sys.stderr,
        )
        return exitcodes.FAILED
    finally:
        if finished:
            _leave_together(ctx.world_size)
        cleanup(ctx)
        if own_group and dist.is_initialized():
            dist.destroy_process_group()


def _leave_together(world_size: int) -> None:
    """Wait for every rank to finish before any leaves the group: a rank that ends early
    (a failed checkpoint ends all ranks, rank 0 still writing the summary) must not tear
    down its connections while a peer still holds them. A peer that died instead is left
    to torchrun (the barrier's error is not this rank's failure)."""
    if world_size > 1:
        with contextlib.suppress(RuntimeError):
            dist.barrier()


def _from_collective(exc: BaseException) -> bool:
    """Whether ``exc`` came out of a ``torch.distributed`` call (a collective whose peer
    died or whose connection broke), judged by the frame that raised it."""
    if isinstance(exc, dist.DistError):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    package = os.path.dirname(dist.__file__)
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(package + os.sep)


def _first_words(exc: BaseException, limit: int = 160) -> str:
    """The first sentence of ``exc`` without a ``[source.cc:line]`` prefix, at most
    ``limit`` characters."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = re.sub(r"^\[[^\]]*\]\s*", "", text).split(". ")[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _init_group_after_restart(backend: str, device: torch.device) -> bool:
    """Create the process group of a *restarted* torchrun attempt on a fresh key space.

    torchrun's workers share the agent's TCPStore across restarts
    (``TORCHELASTIC_USE_AGENT_STORE=True``); the keys the previous attempt's ranks wrote
    there (gloo's peer addresses, for one) are still present, and a restarted rank that
    reads them tries to connect to a dead process ("Gloo connectFullMesh failed ...
    Connection refused"). Prefixing the store with the attempt number gives every attempt
    its own keys. Returns True if a group was created here (first attempts, runs without
    torchrun and already-initialised groups are left to :func:`init_distributed`).
    """
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    env = os.environ
    if (
        restart == 0
        or dist.is_initialized()
        or env.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
        or not all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
    ):
        return False
    timeout = datetime.timedelta(seconds=1800)
    world = int(env["WORLD_SIZE"])
    store = dist.TCPStore(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), world, is_master=False, timeout=timeout
    )
    store = dist.PrefixStore(f"palsgd/attempt_{restart}", store)
    kw = _init_kwargs(backend, device)  # the device is bound by prepare()
    dist.init_process_group(
        backend, store=store, rank=int(env["RANK"]), world_size=world, timeout=timeout, **kw
    )
    return True
