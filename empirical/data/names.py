"""The names of the datasets (:data:`DATASET_NAMES`), without the loaders: the flags of
``palsgd train`` offer them as choices before torch is imported."""

from __future__ import annotations

__all__ = ["DATASET_NAMES"]

#: every dataset :func:`empirical.data.build_dataset` builds, in the order ``--help`` lists
DATASET_NAMES: tuple[str, ...] = (
    "embedded-text",
    "tinystories",
    "tokens",
    "embedded-images",
    "cifar10",
    "imagefolder",
)
