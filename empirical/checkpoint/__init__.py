"""Checkpoints of a distributed run: per-rank files, a rank-0 manifest, atomic writes.

Files: ``store.py`` (layout, atomic writes, manifest, listing, pruning), ``verify.py``
(integrity and match checks, resume choice, loading), ``rng.py`` (random-number states).

Layout under the checkpoint directory::

    step_00000040/
        rank_00000.pt   per-rank state (torch.save of a dict, see below)
        rank_00001.pt
        manifest.json   written by rank 0 after every rank file is on disk

A checkpoint is *complete* when its ``manifest.json`` exists; the manifest is the commit
point. Every file is written to a temporary name in the same directory and moved into
place with :func:`os.replace` (atomic on POSIX), so a crash leaves either the old or the
new file, never half of one. The manifest lists each rank file with its size and SHA-256,
which are checked on load, so a truncated or altered file is reported, not loaded.

What a rank file holds is up to the trainer; :mod:`empirical.train` stores everything
needed to continue bit for bit: the rank's model and inner-optimizer state (they differ
between syncs), the algorithm state (anchor, outer optimizer, counters, position in the
round), the data-stream state, the random-number states (:func:`capture_rng`) and the
metrics-writer position.

Errors a user can cause (missing, corrupt or mismatched checkpoint) raise
:class:`core.errors.UserInputError` naming the file and what differs.
"""

from __future__ import annotations

from empirical.checkpoint.rng import capture_rng, restore_rng
from empirical.checkpoint.store import (
    CHECKPOINT_FORMAT,
    MANIFEST,
    atomic_write_bytes,
    latest_complete,
    list_checkpoints,
    prune,
    rank_file,
    read_manifest,
    remove_after,
    save_rank_state,
    step_dir,
    write_manifest,
)
from empirical.checkpoint.verify import (
    check_compatible,
    check_rank_files,
    intact_checkpoints,
    load_rank_state,
    resolve_resume,
    verify_checkpoint,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "MANIFEST",
    "step_dir",
    "rank_file",
    "atomic_write_bytes",
    "save_rank_state",
    "write_manifest",
    "read_manifest",
    "list_checkpoints",
    "latest_complete",
    "verify_checkpoint",
    "intact_checkpoints",
    "resolve_resume",
    "check_compatible",
    "check_rank_files",
    "load_rank_state",
    "prune",
    "remove_after",
    "capture_rng",
    "restore_rng",
]
