"""In-memory image datasets and the generated ``embedded-images`` shape task."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from core.errors import UserInputError
from core.validation import ParameterError, check_int
from empirical.data.common import _TRAIN, rng_of, seed_of


def _normalise(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    m = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
    return (x.float().div(255.0) - m) / s


def random_crop_flip(x: torch.Tensor, rng: np.random.Generator, pad: int = 4) -> torch.Tensor:
    """Zero-pad by ``pad`` pixels, crop back to the original size at a random offset, and flip
    horizontally with probability 1/2 (the standard CIFAR augmentation, He et al. 2016 sec. 4.2).
    """
    _, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad))
    i, j = rng.integers(0, 2 * pad + 1, size=2)
    out = xp[:, i : i + h, j : j + w]
    if rng.random() < 0.5:
        out = out.flip(-1)
    return out


class TensorImageDataset(Dataset):
    """Images held in memory as uint8 ``(N, 3, H, W)`` with integer labels.

    ``sample(i, epoch, salt)`` applies the optional augmentation (random crop with 4-pixel
    zero padding + horizontal flip) with a generator seeded by ``(seed, salt, epoch, i)``,
    resizes to ``image_size`` (bilinear) if that differs from the stored size, scales to
    [0, 1] and normalises per channel. ``dataset[i]`` is ``sample(i, 0, 0)``.
    """

    task = "image"

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        *,
        mean: Sequence[float],
        std: Sequence[float],
        augment: bool = False,
        image_size: int | None = None,
        seed: int = 0,
        classes: Sequence[str] | None = None,
    ):
        if images.dtype != torch.uint8 or images.ndim != 4:
            raise UserInputError(
                f"images must be uint8 (N, C, H, W), got {images.dtype} {tuple(images.shape)}"
            )
        self.images = images
        self.labels = labels.to(torch.long)
        self.mean, self.std = tuple(mean), tuple(std)
        self.augment = bool(augment)
        self.image_size = image_size
        self.seed = seed
        self.num_classes = int(len(classes)) if classes is not None else int(self.labels.max()) + 1
        self.classes = (
            list(classes) if classes is not None else [str(c) for c in range(self.num_classes)]
        )

    def __len__(self) -> int:
        return self.images.shape[0]

    def sample(self, i: int, epoch: int = 0, salt: int = 0) -> tuple[torch.Tensor, int]:
        x = self.images[i]
        if self.augment:
            x = random_crop_flip(x, rng_of(self.seed, salt, epoch, i))
        x = _normalise(x, self.mean, self.std)
        if self.image_size is not None and x.shape[-1] != self.image_size:
            x = F.interpolate(
                x[None],
                size=(self.image_size, self.image_size),
                mode="bilinear",
                align_corners=False,
            )[0]
        return x, int(self.labels[i])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.sample(i)


EMBEDDED_IMAGE_CLASSES = (
    "disk",
    "square",
    "ring",
    "horizontal-bars",
    "vertical-bars",
    "diagonal-stripes",
    "cross",
    "triangle",
    "checkerboard",
    "two-dots",
)


def _stripes(t: torch.Tensor, period: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
    return torch.sin(2 * math.pi * t / period + phase) > 0


def render_shapes(
    n: int, seed: int, *, size: int = 32, noise: float = 0.1, chunk: int = 512
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generate ``n`` labelled images of the 10-class shape task (uint8 (n, 3, size, size)).

    Class c draws the shape ``EMBEDDED_IMAGE_CLASSES[c]`` at a random centre (within 20% of
    the middle), random radius (20%-38% of the size), random stripe period/phase, in a random
    foreground colour on a random background colour (per-channel contrast of at least 0.3),
    plus Gaussian pixel noise of std ``noise``. Colour and position carry no label information;
    only shape and texture do. Labels are balanced (each class n/10 +- 1) and shuffled.
    Deterministic in ``seed``.
    """
    g = torch.Generator().manual_seed(seed_of(seed, 0x5A9E5))
    labels = torch.arange(n) % 10
    labels = labels[torch.randperm(n, generator=g)]
    out = torch.empty((n, 3, size, size), dtype=torch.uint8)
    coords = torch.arange(size, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    for s in range(0, n, chunk):
        m = min(chunk, n - s)

        def u(lo: float, hi: float, m: int = m) -> torch.Tensor:
            return (lo + (hi - lo) * torch.rand(m, generator=g)).view(m, 1, 1)

        cx, cy = u(0.4, 0.6) * size, u(0.4, 0.6) * size
        r = u(0.2, 0.38) * size
        period = u(3.0, 6.0)
        phase = u(0.0, 2 * math.pi)
        dx, dy = xx - cx, yy - cy
        dist = torch.sqrt(dx * dx + dy * dy)
        box = (dx.abs() <= r) & (dy.abs() <= r)
        cell = torch.floor(dx / (period * 0.8)) + torch.floor(dy / (period * 0.8))
        masks = torch.stack(
            [
                dist <= r,
                (dx.abs() <= 0.8 * r) & (dy.abs() <= 0.8 * r),
                (dist <= r) & (dist >= 0.55 * r),
                box & _stripes(yy, period, phase),
                box & _stripes(xx, period, phase),
                box & _stripes((xx + yy) / math.sqrt(2), period, phase),
                ((dx.abs() <= r / 3.5) & (dy.abs() <= r))
                | ((dy.abs() <= r / 3.5) & (dx.abs() <= r)),
                (dy <= 0.8 * r) & (dy >= -r) & (dx.abs() <= 0.55 * (dy + r)),
                box & (torch.remainder(cell, 2) == 0),
                (torch.sqrt((dx - r / 2) ** 2 + dy**2) <= r / 2.5)
                | (torch.sqrt((dx + r / 2) ** 2 + dy**2) <= r / 2.5),
            ],
            dim=1,
        )  # (m, 10, size, size)
        lab = labels[s : s + m]
        mask = masks[torch.arange(m), lab].unsqueeze(1).float()  # (m, 1, size, size)
        bg = torch.rand(m, 3, 1, 1, generator=g)
        shift = 0.3 + 0.4 * torch.rand(m, 3, 1, 1, generator=g)
        fg = torch.remainder(bg + shift, 1.0)
        img = bg * (1 - mask) + fg * mask
        img = img + noise * torch.randn(m, 3, size, size, generator=g)
        out[s : s + m] = (img.clamp(0, 1) * 255).round().to(torch.uint8)
    return out, labels


def _embedded_images(
    split: str,
    seed: int,
    image_size: int | None,
    n: int | None = None,
    noise: float = 0.1,
    augment: bool = False,
) -> TensorImageDataset:
    n = check_int("n", n if n is not None else (10000 if split == _TRAIN else 2000), low=1)
    try:
        noise_v = float(noise)
    except (TypeError, ValueError):
        noise_v = math.nan
    if not (math.isfinite(noise_v) and noise_v >= 0):
        raise ParameterError("noise", noise, "[0, inf)")
    images, labels = render_shapes(n, seed_of(seed, 0 if split == _TRAIN else 1), noise=noise_v)
    return TensorImageDataset(
        images,
        labels,
        mean=(0.5, 0.5, 0.5),
        std=(0.25, 0.25, 0.25),
        augment=augment,
        image_size=image_size,
        seed=seed,
        classes=EMBEDDED_IMAGE_CLASSES,
    )
