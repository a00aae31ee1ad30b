"""The trainer's checkpointing part (:class:`Checkpoints`): the ranks agree on the
checkpoint to resume from, load it, clear what an earlier run left, and write a checkpoint
together (a rank file each, then rank 0's manifest; a failure on any rank abandons it on
all)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

from core.errors import UserInputError
from empirical.algorithms.fsdp import load_local_optimizer_state, load_local_state, local_state
from empirical.checkpoint import (
    capture_rng,
    load_rank_state,
    prune,
    read_manifest,
    remove_after,
    restore_rng,
    save_rank_state,
    step_dir,
    write_manifest,
)
from empirical.config import config_to_dict
from empirical.distributed import all_agree, barrier
from empirical.resume import check_resume, checkpoint_meta, common_resume_step
from empirical.train.options import PROG
from empirical.train.outcomes import CheckpointFailed
from empirical.train.records import Records
from empirical.train.state import RunState

__all__ = ["Checkpoints"]

#: format of the rank files written by :meth:`Checkpoints.save`
_RANK_FORMAT = 1


class Checkpoints:
    """Resume and checkpoints of the run in ``state``; the metrics files' position comes
    from ``records``. Every method but :meth:`__init__` is a collective."""

    def __init__(self, state: RunState, records: Records) -> None:
        self.state, self.records = state, records

    def resume(self) -> None:
        """Agree on the checkpoint to resume from and load it, or, in a fresh run, clear
        what an earlier run left in the checkpoint directory."""
        directory, manifest = self._agree_on_resume()
        if directory is not None:
            self._load(directory, manifest)
        else:
            self._clear()

    # ------------------------------------------------------------------ resume
    def _agree_on_resume(self) -> tuple[Path | None, dict[str, Any] | None]:
        """Collective: every rank reports what it would resume from; return the common
        choice, or raise the same UserInputError on every rank.

        With ``--resume auto`` the ranks take the newest step intact on all of them (an
        older one than some rank's newest when a file is corrupt or missing there); with an
        explicit checkpoint every rank must see the same step.
        """
        st = self.state
        prep = st.prep
        mine = {
            "rank": st.rank,
            "step": None if prep.manifest is None else int(prep.manifest["step"]),
            "candidates": prep.resume_candidates,
            "error": prep.resume_error,
        }
        notes: list[Any] = [None] * st.world
        dist.all_gather_object(notes, mine)
        errors = [n for n in notes if n["error"]]
        if errors:
            first = errors[0]
            raise UserInputError(
                f"rank {first['rank']} cannot resume: {first['error']}"
                + (f" ({len(errors)} ranks report problems)" if len(errors) > 1 else "")
            )
        if prep.resume_candidates is not None:  # --resume auto
            return self._common_newest(notes, mine["step"])
        steps = {n["rank"]: n["step"] for n in notes}
        if len(set(steps.values())) > 1:
            raise UserInputError(
                f"the ranks see different checkpoints to resume from (step by rank: {steps}); "
                "the checkpoint directory must be shared storage visible to every rank"
            )
        return prep.resume_dir, prep.manifest

    def _common_newest(
        self, notes: list[dict[str, Any]], mine: int | None
    ) -> tuple[Path | None, dict[str, Any] | None]:
        """``--resume auto``: the newest step intact on every rank (``notes``)."""
        st = self.state
        step = common_resume_step(notes)
        if step is None:
            return None, None
        if mine == step:
            return st.prep.resume_dir, st.prep.manifest
        directory = step_dir(st.cfg.checkpoint_path(), step)
        if st.main:
            print(
                f"{PROG}: warning: resuming from step {step}, the newest checkpoint "
                "intact on every rank",
                file=sys.stderr,
            )
        manifest = read_manifest(directory)
        st.changed = check_resume(st.cfg, directory, manifest, st.world)
        return directory, manifest

    def _load(self, directory: Path, manifest: dict[str, Any]) -> None:
        """Load every rank's file of the checkpoint in ``directory``."""
        st = self.state
        error: UserInputError | None = None
        state: dict[str, Any] = {}
        try:
            state = load_rank_state(directory, manifest, st.rank, map_location=st.device)
        except UserInputError as exc:
            error = exc
        if not all_agree(error is None, st.device):
            raise error or UserInputError(
                f"checkpoint '{directory}': another rank could not load its file"
            )
        if st.mesh is None:
            st.model.load_state_dict(state["model"])
            st.optimizer.load_state_dict(state["optimizer"])
        else:  # this rank's chunks of a sharded worker (empirical.algorithms.fsdp)
            load_local_state(st.model, state["model"])
            load_local_optimizer_state(st.optimizer, state["optimizer"])
        st.algo.load_state_dict(state["algorithm"])
        if st.scaler is not None and state.get("scaler"):
            st.scaler.load_state_dict(state["scaler"])
        st.stream.load_state_dict(state["data"])
        st.counters.load_state_dict(state["trainer"], st.device)
        st.metrics_position = state["trainer"].get("metrics_position")
        restore_rng(state["rng"])
        st.start_step = int(manifest["step"])
        if int(st.algo.t) != st.start_step:
            raise UserInputError(
                f"checkpoint '{directory}' is inconsistent: manifest step {st.start_step}, "
                f"algorithm counter {st.algo.t}"
            )
        st.resumed_from = str(directory)
        if st.main:
            for path in remove_after(st.cfg.checkpoint_path(), st.start_step):
                print(
                    f"{PROG}: removed checkpoint '{path}' (after the resumed step)", file=sys.stderr
                )
        barrier(st.world)

    def _clear(self) -> None:
        """A fresh run owns its checkpoint directory: delete what an earlier run left there
        (only partial checkpoints, unless ``overwrite`` allowed complete ones; see
        :func:`~empirical.train.prepare.prepare`)."""
        if self.state.main:
            for path in remove_after(self.state.cfg.checkpoint_path(), -1):
                print(f"{PROG}: removed old checkpoint '{path}'", file=sys.stderr)
        barrier(self.state.world)

    # ------------------------------------------------------------------ save
    def _local(self, state: dict[str, Any]) -> dict[str, Any]:
        """``state`` as this rank saves it: a sharded worker's chunks, else unchanged."""
        return state if self.state.mesh is None else local_state(state)

    def _rank_state(self, step: int) -> dict[str, Any]:
        """What this rank's checkpoint file holds at ``step``."""
        st = self.state
        return {
            "format": _RANK_FORMAT,
            "rank": st.rank,
            "step": step,
            # stacked workers: the global model (the workers' rows are in "algorithm")
            "model": st.algo.anchor_state_dict()
            if st.stacked
            else self._local(st.model.state_dict()),
            "optimizer": self._local(st.optimizer.state_dict()),
            "algorithm": st.algo.state_dict(),
            "data": st.stream.state_dict(),
            "rng": capture_rng(),
            "scaler": None if st.scaler is None else st.scaler.state_dict(),
            "trainer": st.counters.state_dict(self.records.position() if st.main else None),
        }

    def _write_files(self, root: Path, step: int) -> list[dict[str, Any]]:
        """Every rank writes its file, rank 0 the manifest; the failures."""
        st = self.state
        try:
            info = save_rank_state(root, step, st.rank, self._rank_state(step))
        except OSError as exc:
            info = {"rank": st.rank, "error": f"{exc.strerror or exc} (rank {st.rank})"}
            info["errno"] = exc.errno
        infos: list[Any] = [None] * st.world
        dist.all_gather_object(infos, info)
        failed = [i for i in infos if "error" in i]
        if not failed and st.main:
            try:
                meta = checkpoint_meta(st.cfg, st.world)
                meta["T"] = st.cfg.T
                meta["config"] = config_to_dict(st.cfg)
                write_manifest(root, step, meta, infos)
            except OSError as exc:
                failed = [{"rank": 0, "error": str(exc.strerror or exc), "errno": exc.errno}]
        return failed

    def save(self, step: int) -> Path:
        """The checkpoint of ``step`` (the time totals folded first, by the caller); on a
        failure anywhere its partial files are removed and
        :class:`~empirical.train.outcomes.CheckpointFailed` is raised on every rank."""
        st = self.state
        root = st.cfg.checkpoint_path()
        directory = step_dir(root, step)
        failed = self._write_files(root, step)
        if not all_agree(not failed, st.device):
            # no rank's partial files may stay: they would keep the disk full
            barrier(st.world)
            if st.main:
                shutil.rmtree(directory, ignore_errors=True)
            barrier(st.world)
            why = failed[0]["error"] if failed else "another rank failed to write its file"
            raise CheckpointFailed(step, why, st.last_checkpoint)
        if st.main:
            prune(root, st.cfg.keep_checkpoints)
        barrier(st.world)
        st.last_checkpoint = directory
        return directory
