"""The trainer's collectives around checkpoints: the ranks agree on the checkpoint to
resume from, load it, clear what an earlier run left, and write a checkpoint together
(a rank file each, then rank 0's manifest; a failure on any rank abandons it on all)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

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
from empirical.resume import check_resume, checkpoint_meta, common_resume_step
from empirical.train.options import PROG
from empirical.train.outcomes import CheckpointFailed
from theory.validation import UserInputError

__all__ = ["CheckpointSteps"]

#: format of the rank files written by :meth:`CheckpointSteps._save`
_RANK_FORMAT = 1


class CheckpointSteps:
    """Checkpoint and resume steps of :class:`~empirical.train.trainer.Trainer` (which
    provides the model, optimizer, algorithm, stream, scaler, totals and counters)."""

    # ------------------------------------------------------------------ collectives
    def _agree(self, ok: bool) -> bool:
        flag = self.torch.tensor([0.0 if ok else 1.0], device=self.device)
        self.dist.all_reduce(flag)
        return float(flag.item()) == 0.0

    def _barrier(self) -> None:
        if self.world > 1:
            self.dist.barrier()

    # ------------------------------------------------------------------ resume
    def _agree_on_resume(self) -> tuple[Path | None, dict[str, Any] | None]:
        """Collective: every rank reports what it would resume from; return the common
        choice, or raise the same UserInputError on every rank.

        With ``--resume auto`` the ranks take the newest step intact on all of them (an
        older one than some rank's newest when a file is corrupt or missing there); with an
        explicit checkpoint every rank must see the same step.
        """
        prep = self.prep
        mine = {
            "rank": self.rank,
            "step": None if prep.manifest is None else int(prep.manifest["step"]),
            "candidates": prep.resume_candidates,
            "error": prep.resume_error,
        }
        notes: list[Any] = [None] * self.world
        self.dist.all_gather_object(notes, mine)
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
        step = common_resume_step(notes)
        if step is None:
            return None, None
        if mine == step:
            return self.prep.resume_dir, self.prep.manifest
        directory = step_dir(self.cfg.checkpoint_path(), step)
        if self.main:
            print(
                f"{PROG}: warning: resuming from step {step}, the newest checkpoint "
                "intact on every rank",
                file=sys.stderr,
            )
        manifest = read_manifest(directory)
        self.changed = check_resume(self.cfg, directory, manifest, self.world)
        return directory, manifest

    def _load(self, directory: Path, manifest: dict[str, Any]) -> None:
        """Collective: load every rank's file of the checkpoint in ``directory``."""
        error: UserInputError | None = None
        state: dict[str, Any] = {}
        try:
            state = load_rank_state(directory, manifest, self.rank, map_location=self.device)
        except UserInputError as exc:
            error = exc
        if not self._agree(error is None):
            raise error or UserInputError(
                f"checkpoint '{directory}': another rank could not load its file"
            )
        if self.wm is None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        else:  # this rank's chunks of a sharded worker (empirical.algorithms.fsdp)
            load_local_state(self.model, state["model"])
            load_local_optimizer_state(self.optimizer, state["optimizer"])
        self.algo.load_state_dict(state["algorithm"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.stream.load_state_dict(state["data"])
        self._load_counters(state["trainer"])
        restore_rng(state["rng"])
        self.start_step = int(manifest["step"])
        if int(self.algo.t) != self.start_step:
            raise UserInputError(
                f"checkpoint '{directory}' is inconsistent: manifest step {self.start_step}, "
                f"algorithm counter {self.algo.t}"
            )
        self.resumed_from = str(directory)
        if self.main:
            for path in remove_after(self.cfg.checkpoint_path(), self.start_step):
                print(
                    f"{PROG}: removed checkpoint '{path}' (after the resumed step)", file=sys.stderr
                )
        self._barrier()

    def _load_counters(self, tr: dict[str, Any]) -> None:
        self.totals.load_state_dict(tr["totals"])
        self.loss_sum = tr["loss_sum"].to(self.device)
        self.loss_count = int(tr["loss_count"])
        self.tokens = int(tr["tokens"])
        self.last_loss = tr.get("last_loss")
        self.last_eval = tr.get("last_eval")
        self.metrics_position = tr.get("metrics_position")

    def _clear_checkpoints(self) -> None:
        """A fresh run owns its checkpoint directory: delete what an earlier run left there
        (only partial checkpoints, unless ``overwrite`` allowed complete ones; see
        :func:`~empirical.train.prepare.prepare`)."""
        if self.main:
            for path in remove_after(self.cfg.checkpoint_path(), -1):
                print(f"{PROG}: removed old checkpoint '{path}'", file=sys.stderr)
        self._barrier()

    # ------------------------------------------------------------------ save
    def _local(self, state: dict[str, Any]) -> dict[str, Any]:
        """``state`` as this rank saves it: a sharded worker's chunks, else unchanged."""
        return state if self.wm is None else local_state(state)

    def _rank_state(self, step: int) -> dict[str, Any]:
        """What this rank's checkpoint file holds at ``step``."""
        return {
            "format": _RANK_FORMAT,
            "rank": self.rank,
            "step": step,
            "model": self._local(self.model.state_dict()),
            "optimizer": self._local(self.optimizer.state_dict()),
            "algorithm": self.algo.state_dict(),
            "data": self.stream.state_dict(),
            "rng": capture_rng(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "trainer": {
                "totals": self.totals.state_dict(),
                "loss_sum": self.loss_sum.detach().cpu(),
                "loss_count": self.loss_count,
                "tokens": self.tokens,
                "last_loss": self.last_loss,
                "last_eval": self.last_eval,
                "metrics_position": self.writer.position() if self.main else None,
            },
        }

    def _write_files(self, root: Path, step: int) -> list[dict[str, Any]]:
        """Collective: every rank writes its file, rank 0 the manifest; the failures."""
        try:
            info = save_rank_state(root, step, self.rank, self._rank_state(step))
        except OSError as exc:
            info = {"rank": self.rank, "error": f"{exc.strerror or exc} (rank {self.rank})"}
            info["errno"] = exc.errno
        infos: list[Any] = [None] * self.world
        self.dist.all_gather_object(infos, info)
        failed = [i for i in infos if "error" in i]
        if not failed and self.main:
            try:
                meta = checkpoint_meta(self.cfg, self.world)
                meta["T"] = self.cfg.T
                meta["config"] = config_to_dict(self.cfg)
                write_manifest(root, step, meta, infos)
            except OSError as exc:
                failed = [{"rank": 0, "error": str(exc.strerror or exc), "errno": exc.errno}]
        return failed

    def _save(self, step: int) -> Path:
        """Collective: the checkpoint of ``step``; on a failure anywhere its partial files
        are removed and :class:`~empirical.train.outcomes.CheckpointFailed` is raised on
        every rank."""
        self._resolve_times()
        root = self.cfg.checkpoint_path()
        directory = step_dir(root, step)
        failed = self._write_files(root, step)
        if not self._agree(not failed):
            # no rank's partial files may stay: they would keep the disk full
            self._barrier()
            if self.main:
                shutil.rmtree(directory, ignore_errors=True)
            self._barrier()
            why = failed[0]["error"] if failed else "another rank failed to write its file"
            raise CheckpointFailed(step, why, self.last_checkpoint)
        if self.main:
            prune(root, self.cfg.keep_checkpoints)
        self._barrier()
        self.last_checkpoint = directory
        return directory
