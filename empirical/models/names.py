"""The names of the models (:data:`MODEL_NAMES`) and their architecture specs, without
torch: the flags of ``palsgd train`` offer the names as choices before torch is imported."""

from __future__ import annotations

from typing import Any

__all__ = ["MODEL_NAMES"]

_GPTNEO: dict[str, dict[str, Any]] = {
    # gptneo_8m.yaml of the authors' code (reference-implementation.md section 7)
    "gptneo-8m": dict(
        vocab_size=50257, max_position_embeddings=300, hidden_size=128, num_heads=8, num_layers=8
    ),
    # gptneo_125m.yaml: context 1024 (the released GPT-Neo-125M has 2048)
    "gptneo-125m": dict(
        vocab_size=50257, max_position_embeddings=1024, hidden_size=768, num_heads=12, num_layers=12
    ),
    # for tests: byte-level vocabulary (empirical.tokenizer.ByteTokenizer, 257 ids)
    "gptneo-tiny": dict(
        vocab_size=257, max_position_embeddings=64, hidden_size=32, num_heads=4, num_layers=2
    ),
}

_RESNET: dict[str, dict[str, Any]] = {
    "resnet18-cifar": dict(block="basic", layers=(2, 2, 2, 2), stem="cifar", num_classes=10),
    "resnet34-cifar": dict(block="basic", layers=(3, 4, 6, 3), stem="cifar", num_classes=10),
    "resnet50-cifar": dict(block="bottleneck", layers=(3, 4, 6, 3), stem="cifar", num_classes=10),
    "resnet18-imagenet": dict(
        block="basic", layers=(2, 2, 2, 2), stem="imagenet", num_classes=1000
    ),
    "resnet34-imagenet": dict(
        block="basic", layers=(3, 4, 6, 3), stem="imagenet", num_classes=1000
    ),
    "resnet50-imagenet": dict(
        block="bottleneck", layers=(3, 4, 6, 3), stem="imagenet", num_classes=1000
    ),
    # for tests: two stages of one BasicBlock, widths 8 and 16 (about 5k parameters)
    "resnet-tiny": dict(block="basic", layers=(1, 1), widths=(8, 16), stem="cifar", num_classes=10),
}

MODEL_NAMES: tuple[str, ...] = (*_GPTNEO, *_RESNET)
