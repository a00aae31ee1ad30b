"""Named presets of ``palsgd train`` and the authors' README run they share with
paper_figures."""

from __future__ import annotations

from typing import Any

__all__ = ["TRAIN_PRESETS", "README_8M_RUN"]


def _preset(**kw: Any) -> dict[str, Any]:
    return kw


#: The authors' README command for GPT-Neo on TinyStories (gptneo_8m/README.md:49; the
#: 125M README is identical): micro-batch 32 x 16 accumulation, AdamW lr 0.01 wd 0.01,
#: clip 1.0, outer Nesterov 0.1/0.9, H = 32, T0 = 32, p = 0.2, eta = 1, context 300.
#: Shared by the presets below and by paper_figures' paper-scale plan.
README_8M_RUN: dict[str, Any] = dict(
    dataset="tinystories",
    seq_len=300,
    batch_size=32,
    A=16,
    T=20000,
    optimizer="adamw",
    alpha=0.01,
    weight_decay=0.01,
    beta1=0.9,
    beta2=0.999,
    clip_grad_norm=1.0,
    algorithm="palsgd",
    outer="nesterov",
    gamma=0.1,
    mu=0.9,
    H=32,
    T0=32,
    p=0.2,
    eta=1.0,
    eval_interval=500,
    eval_batches=50,
    checkpoint_interval=1000,
    log_interval=50,
)


#: named presets: field values applied on top of the dataclass defaults
TRAIN_PRESETS: dict[str, dict[str, Any]] = {
    # The default: a tiny GPT-Neo on the embedded text, PALSGD, well under a minute on CPU.
    "tiny": _preset(),
    # Same, as plain data-parallel SGD (DDP) for comparison.
    "tiny-ddp": _preset(
        algorithm="ddp", p=None, eta=None, H=None, T0=None, outer=None, gamma=None, mu=None
    ),
    # The authors' README command for GPT-Neo-8M on TinyStories (README_8M_RUN), run with
    # the algorithm as described. Needs --data-path (TinyStories text) and, for the paper's
    # scale, --nproc 4 on GPUs. With the default byte tokenizer the model has 1,654,656
    # parameters; --tokenizer DIR (a local copy of the GPT-2 BPE tokenizer the authors used)
    # gives the paper's 8,054,656.
    "gptneo-8m-readme": _preset(model="gptneo-8m", **README_8M_RUN, nproc=4),
    # The same run with every quirk of the authors' code switched on
    # (AlgorithmConfig.reference_faithful): first-tensor pull, shared coins, discarded
    # batches on pulls, A outer steps per sync, the authors' sync offset.
    "gptneo-8m-readme-faithful": _preset(
        model="gptneo-8m", **README_8M_RUN, reference_faithful=True, nproc=4
    ),
    # DiLoCo reference setting (Douillard et al. 2023): inner AdamW 4e-4, wd 0.1,
    # betas (0.9, 0.95); outer Nesterov 0.7/0.9; H = 500. On the tiny model by default.
    "diloco": _preset(
        algorithm="diloco",
        optimizer="adamw",
        alpha=4e-4,
        weight_decay=0.1,
        beta1=0.9,
        beta2=0.95,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        H=500,
        p=None,
        eta=None,
        T0=0,
        clip_grad_norm=1.0,
        T=2000,
    ),
}
