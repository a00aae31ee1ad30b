"""Models of the paper's experiments, their losses and evaluation.

* GPT-Neo causal language models (``gptneo.py``): the paper's 8M model (hidden 128, 8 heads,
  8 layers, context 300; 8,054,656 parameters) and 125M model (hidden 768, 12 heads,
  12 layers, context 1024 as in the authors' ``gptneo_125m.yaml``; 124,412,160 parameters),
  plus a tiny one for tests; random initialisation, no weights are downloaded.
* ResNet-18/34/50 with ImageNet or CIFAR stems (``resnet.py``, He et al., CVPR 2016).
* The registry of names and the builders (``registry.py``): every model is built
  deterministically from ``seed`` inside :func:`torch.random.fork_rng`, so the caller's
  global RNG state is neither used nor changed.
* Losses and evaluation (``losses.py``).
* ``palsgd train --compile``: the model's forward compiled in place (``compiled.py``).
"""

from __future__ import annotations

__all__ = [
    "MODEL_NAMES",
    "ResNet",
    "BasicBlock",
    "Bottleneck",
    "build_model",
    "model_task",
    "model_spec",
    "count_parameters",
    "gptneo_parameter_count",
    "compute_loss",
    "evaluate",
    "next_token_logits",
    "IGNORE_INDEX",
    "compile_model",
    "is_compiled",
]

from core.lazy import lazy_exports

# lazy (core.lazy): `palsgd train --help` reads MODEL_NAMES (empirical.models.names)
# without importing torch, which the models need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.models.compiled": ("compile_model", "is_compiled"),
        "empirical.models.gptneo": ("gptneo_parameter_count",),
        "empirical.models.losses": (
            "IGNORE_INDEX",
            "compute_loss",
            "evaluate",
            "next_token_logits",
        ),
        "empirical.models.names": ("MODEL_NAMES",),
        "empirical.models.registry": (
            "build_model",
            "count_parameters",
            "model_spec",
            "model_task",
        ),
        "empirical.models.resnet": (
            "BasicBlock",
            "Bottleneck",
            "ResNet",
        ),
    },
)
