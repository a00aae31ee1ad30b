"""ResNets (He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition", CVPR 2016),
written in plain torch: BasicBlock (two 3x3 convolutions) for ResNet-18/34, Bottleneck
(1x1, 3x3, 1x1 with expansion 4) for ResNet-50, projection shortcuts (the paper's option B:
1x1 convolution + BatchNorm) where the shape changes. Two stems:

- ``imagenet``: 7x7 convolution stride 2 + 3x3 max-pool stride 2 (paper, Table 1);
- ``cifar``: 3x3 convolution stride 1, no max-pool (keeps 32x32 resolution for stage 1).

Bottleneck blocks put the stride on the 3x3 convolution ("ResNet v1.5", the variant the
authors' torchvision models use); ``stride_in_1x1=True`` gives the original paper's
placement. Both have the same parameter count (ResNet-50, 1000 classes: 25,557,032;
ResNet-18: 11,689,512).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from core.errors import UserInputError

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "RESNET_OPTIONS"]


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class _ResidualBlock(nn.Module):
    """``relu(residual(x) + shortcut(x))``, the shortcut the identity where it is ``None``."""

    shortcut: nn.Module | None

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def last_bn(self) -> nn.BatchNorm2d:
        """The BatchNorm that ends the residual branch (zeroed by ``zero_init_residual``)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.residual(x) + skip)


class BasicBlock(_ResidualBlock):
    """Two 3x3 conv-BN layers with an identity or projection shortcut (He et al. 2016, Fig. 2)."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1, stride_in_1x1: bool = False):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv3x3(cin, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn2

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))


class Bottleneck(_ResidualBlock):
    """1x1 reduce, 3x3, 1x1 expand (x4) conv-BN layers plus shortcut (He et al. 2016, Fig. 5)."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1, stride_in_1x1: bool = False):
        super().__init__()
        cout = width * self.expansion
        s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
        self.conv1 = _conv1x1(cin, width, s1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, width, s3)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv1x1(width, cout)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn3

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return self.bn3(self.conv3(out))


def _projection(cin: int, cout: int, stride: int) -> nn.Module | None:
    """Option B shortcut of He et al. 2016: projection only where the shape changes."""
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(_conv1x1(cin, cout, stride), nn.BatchNorm2d(cout))


def _block_class(block: str | type[nn.Module]) -> type[nn.Module]:
    """The block class of a ResNet: ``"basic"``, ``"bottleneck"`` or a class."""
    if not isinstance(block, str):
        return block
    blocks = {"basic": BasicBlock, "bottleneck": Bottleneck}
    if block not in blocks:
        raise UserInputError(f"unknown ResNet block '{block}': use 'basic' or 'bottleneck'")
    return blocks[block]


def _stem(stem: str, in_channels: int, c0: int) -> nn.Sequential:
    """``imagenet``: 7x7/2 conv + 3x3/2 max-pool; ``cifar``: 3x3/1 conv."""
    if stem == "imagenet":
        return nn.Sequential(
            nn.Conv2d(in_channels, c0, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(c0),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        )
    return nn.Sequential(_conv3x3(in_channels, c0), nn.BatchNorm2d(c0), nn.ReLU(inplace=True))


def _stages(
    block: type[nn.Module],
    layers: tuple[int, ...],
    widths: tuple[int, ...],
    stride_in_1x1: bool,
) -> tuple[nn.Sequential, int]:
    """The stages (every stage after the first starts with a stride-2 block) and the number
    of output channels."""
    stages = []
    cin = widths[0]
    for i, (n, w) in enumerate(zip(layers, widths, strict=True)):
        stage = []
        for j in range(n):
            stride = 2 if (i > 0 and j == 0) else 1
            stage.append(block(cin, w, stride, stride_in_1x1))
            cin = w * block.expansion
        stages.append(nn.Sequential(*stage))
    return nn.Sequential(*stages), cin


class ResNet(nn.Module):
    """Residual network (He et al. 2016) for images of shape ``(N, in_channels, H, W)``.

    Args:
        block: ``"basic"`` or ``"bottleneck"`` (or the classes).
        layers: number of blocks per stage (ResNet-18: 2,2,2,2; 34 and 50: 3,4,6,3).
        num_classes: output logits.
        widths: base widths of the stages (default 64, 128, 256, 512); every stage after the
            first halves the spatial resolution with a stride-2 first block.
        stem: ``"imagenet"`` (7x7/2 conv + 3x3/2 max-pool) or ``"cifar"`` (3x3/1 conv).
        zero_init_residual: start every residual branch's last BN scale at 0 (Goyal et al.
            2017); off by default as in He et al. 2016.
        stride_in_1x1: Bottleneck stride on the first 1x1 conv (original paper) instead of
            the 3x3 conv (v1.5, the default).

    Initialisation: He-normal (fan-out, ReLU gain) for convolutions (He et al. 2015,
    "Delving deep into rectifiers"), BN scale 1 / shift 0, the final linear layer with
    PyTorch's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """

    def __init__(
        self,
        block: str | type[nn.Module] = "basic",
        layers: Iterable[int] = (2, 2, 2, 2),
        num_classes: int = 1000,
        *,
        widths: Iterable[int] = (64, 128, 256, 512),
        stem: str = "imagenet",
        in_channels: int = 3,
        zero_init_residual: bool = False,
        stride_in_1x1: bool = False,
    ):
        super().__init__()
        block = _block_class(block)
        layers, widths = tuple(int(n) for n in layers), tuple(int(w) for w in widths)
        if len(layers) != len(widths) or not layers or min(layers) < 1 or min(widths) < 1:
            raise UserInputError(
                f"ResNet layers {layers} and widths {widths} must be non-empty, positive and of "
                "equal length"
            )
        if stem not in ("imagenet", "cifar"):
            raise UserInputError(f"unknown ResNet stem '{stem}': use 'imagenet' or 'cifar'")
        self.stem_kind = stem
        self.stem = _stem(stem, in_channels, widths[0])
        self.stages, cin = _stages(block, layers, widths, stride_in_1x1)
        self.fc = nn.Linear(cin, num_classes)
        self.num_features = cin
        self._init_weights(zero_init_residual)

    def _init_weights(self, zero_init_residual: bool) -> None:
        """He-normal convolutions, BN scale 1 / shift 0; optionally zero last BN scales."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, _ResidualBlock):
                    nn.init.zeros_(m.last_bn().weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


#: the keyword arguments of :class:`ResNet`
RESNET_OPTIONS: tuple[str, ...] = tuple(inspect.signature(ResNet).parameters)
