"""``encoder=resnet``: the deep-text-recognition-benchmark ResNet feature extractor, scaled for
a CPU. A 3x3 stem (conv, masked batch norm, ReLU) strided to half the height (and the width
while ``model.stride`` asks for it) with ``model.conv_channels[0]`` channels, then one basic
residual block per entry (two 3x3 conv + batch norm, a 1x1 conv + batch norm on the shortcut
when the channels change, ReLU after the sum), each after the first behind a max pool that
halves the height (and the width while the stride asks for it): nothing at full
resolution. The remaining rows are averaged into one, a linear layer per column gives 2H
features and the BiGRU the states (attnlab/models/encoders/_conv.py: how padding stays
masked, and what the order costs).

At the default size (conv_channels [16, 32, 64, 128], hidden 64): nine convolutions, 307k
parameters in the stages, 398k in the encoder (a CTC reader on it: 400k).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.models.encoders import register
from attnlab.models.encoders._conv import KEYS, ConvColumns, ConvNorm, check


class Stem(nn.Module):
    """A 3x3 conv + batch norm + ReLU strided (2, ``pool``): the first halving."""

    def __init__(self, cout: int, pool: int):
        super().__init__()
        self.pool = pool
        self.layer = ConvNorm(1, cout, stride=(2, pool))

    def forward(self, x: torch.Tensor, keep: torch.Tensor):
        keep = torch.div(keep, self.pool, rounding_mode="floor")
        return self.layer(x, keep), keep

    def flops(self, h: int, w: int) -> tuple[int, int, int]:
        h, w = h // 2, w // self.pool
        return self.layer.flops(h, w), h, w


class ResidualStage(nn.Module):
    """A (2, ``pool``) max pool (none when ``pool`` is None: the stem's stage), then a basic
    block: relu(bn(conv(relu(bn(conv(x))))) + x), the shortcut projected (1x1 conv + batch
    norm) when the channels change."""

    def __init__(self, cin: int, cout: int, pool: int | None):
        super().__init__()
        self.pool = pool
        self.conv1, self.conv2 = ConvNorm(cin, cout), ConvNorm(cout, cout)
        self.shortcut = ConvNorm(cin, cout, kernel=1) if cin != cout else None

    def forward(self, x: torch.Tensor, keep: torch.Tensor):
        if self.pool is not None:
            x = nn.functional.max_pool2d(x, (2, self.pool))
            keep = torch.div(keep, self.pool, rounding_mode="floor")
        y = self.conv2(self.conv1(x, keep), keep, relu=False)
        short = x if self.shortcut is None else self.shortcut(x, keep, relu=False)
        return (y + short).relu_(), keep  # both 0 on padded columns: so is the sum

    def flops(self, h: int, w: int) -> tuple[int, int, int]:
        if self.pool is not None:
            h, w = h // 2, w // self.pool
        parts = [self.conv1, self.conv2, *([self.shortcut] if self.shortcut else [])]
        return sum(p.flops(h, w) for p in parts), h, w


@register(
    "resnet",
    "a conv stem and residual blocks with batch norm (DTRB's ResNet), then the BiGRU",
    KEYS,
    check,
)
class ResNetEncoder(ConvColumns):
    def stages_for(self, channels, pools):
        pools = [columns for _, columns in pools]  # every stage halves the rows
        return [
            Stem(channels[0], pools[0]),
            ResidualStage(channels[0], channels[0], None),
            *(
                ResidualStage(cin, c, p)
                for cin, c, p in zip(channels[:-1], channels[1:], pools[1:], strict=True)
            ),
        ]
