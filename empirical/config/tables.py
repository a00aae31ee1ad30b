"""The tables of ``palsgd train``'s options, derived from the fields' declarations
(:mod:`empirical.config.fields`): the declarations themselves, the choices, the theory's
parameters, the algorithm's keywords, the fields a resume must match, those that may change
freely and the hyperparameters; and the trainer's synonyms of field names."""

from __future__ import annotations

from dataclasses import fields

from empirical.config.fields import TrainConfig
from empirical.config.flags import CHANGE, FREE, MATCH, NO_DEFAULT, Flag, flag_of

__all__ = [
    "FLAGS",
    "CHOICES",
    "THEORY_FIELDS",
    "ALGORITHM_FIELDS",
    "MATCH_FIELDS",
    "MATCH_DEFAULTS",
    "RUN_ONLY_FIELDS",
    "CHANGE_FIELDS",
    "FIELD_ALIASES",
]

_FIELDS = {f.name: f for f in fields(TrainConfig)}

#: every field's declaration, in field order
FLAGS: dict[str, Flag] = {name: flag_of(f) for name, f in _FIELDS.items()}
#: the values of the fields whose choices the configuration owns
CHOICES: dict[str, tuple[str, ...]] = {n: d.choices for n, d in FLAGS.items() if d.choices}
#: fields checked by theory.validation.validate (project names)
THEORY_FIELDS = tuple(n for n, d in FLAGS.items() if d.theory)
#: TrainConfig field -> AlgorithmConfig keyword
ALGORITHM_FIELDS: dict[str, str] = {n: d.algorithm for n, d in FLAGS.items() if d.algorithm}
#: fields a checkpoint must share with the run that resumes it (besides the world size)
MATCH_FIELDS = tuple(n for n, d in FLAGS.items() if d.resume == MATCH)
#: fields of MATCH_FIELDS added after checkpoints were first written, with the value a
#: manifest that lacks them was written with
MATCH_DEFAULTS: dict[str, object] = {
    n: d.match_default for n, d in FLAGS.items() if d.match_default is not NO_DEFAULT
}
#: fields that may differ freely between a run and the checkpoint it resumes (they say how
#: this invocation runs and where it writes, not what is trained)
RUN_ONLY_FIELDS = tuple(n for n, d in FLAGS.items() if d.resume == FREE)
#: the hyperparameters: a resume refuses to change one unless it is named in
#: ``allow_changed`` (then the new value is applied and the change recorded)
CHANGE_FIELDS = tuple(n for n, d in FLAGS.items() if d.resume == CHANGE)

#: trainer-side synonyms (besides theory.validation.ALIASES) -> field
FIELD_ALIASES: dict[str, str] = {
    "B": "batch_size",
    "bs_per_gpu": "batch_size",
    "micro_batch_size": "batch_size",
    "K": "nproc",
    "nproc_per_node": "nproc",
    "wd": "weight_decay",
    "max_length": "seq_len",
    "inner_optimizer": "optimizer",
    "clip_gradnorm": "clip_grad_norm",
    "eval_every": "eval_interval",
    "checkpoint_every": "checkpoint_interval",
    "checkpoint_dirpath": "checkpoint_dir",
    "log_every": "log_interval",
    "out": "output_dir",
}


def _canonical_key(key: str) -> str:
    """Field name for a config/CLI key (dashes allowed, aliases resolved)."""
    k = key.replace("-", "_")
    if k in _FIELDS:
        return k
    if k in FIELD_ALIASES:
        return FIELD_ALIASES[k]
    return k
