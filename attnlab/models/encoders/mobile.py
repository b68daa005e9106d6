"""``encoder=mobile``: depthwise-separable conv stages (MobileNet, Howard et al. 2017) in
place of VGG's full 3x3 convolutions, for a CPU. One stage per ``model.conv_channels`` entry,
each halving the height (and the width while ``model.stride`` asks for it): the first by a
strided 3x3 convolution from the one grey channel, the others by a max pool, then a 3x3
depthwise convolution (one filter per channel) and a 1x1 pointwise one (the channels mixed),
each with masked batch norm and ReLU. A stage costs about 9 + C_out multiply-adds per input
channel and position where VGG's costs 9 C_out. The remaining rows are averaged into one, a
linear layer per column gives 2H features and the BiGRU the states (``_conv.py``: how padding
stays masked; ``_recurrent.py``: the BiGRU).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.models import costs
from attnlab.models.encoders import register
from attnlab.models.encoders._conv import KEYS, ConvColumns, ConvNorm, check


class Depthwise(ConvNorm):
    """A 3x3 convolution per channel (``groups`` = channels), batch norm, ReLU."""

    def __init__(self, channels: int):
        super().__init__(channels, channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)

    def flops(self, h: int, w: int) -> int:
        return costs.conv2d(h * w, 1, self.conv.out_channels, 3)


class SeparableStage(nn.Module):
    """Halve the height (and the width by ``pool``): a strided 3x3 convolution (the first
    stage, ``cin`` 1) or a (2, ``pool``) max pool, then depthwise 3x3 and pointwise 1x1."""

    def __init__(self, cin: int, cout: int, pool: int, first: bool):
        super().__init__()
        self.pool, self.first = pool, first
        layers = (
            [ConvNorm(cin, cout, stride=(2, pool))]
            if first
            else [Depthwise(cin), ConvNorm(cin, cout, kernel=1)]
        )
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor, keep: torch.Tensor):
        if not self.first:
            x = nn.functional.max_pool2d(x, (2, self.pool))
        keep = torch.div(keep, self.pool, rounding_mode="floor")
        for layer in self.layers:
            x = layer(x, keep)
        return x, keep

    def flops(self, h: int, w: int) -> tuple[int, int, int]:
        h, w = h // 2, w // self.pool
        return sum(layer.flops(h, w) for layer in self.layers), h, w


@register(
    "mobile",
    "depthwise-separable conv stages with batch norm (MobileNet), then the BiGRU",
    KEYS,
    check,
)
class MobileEncoder(ConvColumns):
    def stages_for(self, channels, pools):
        cins = [1, *channels[:-1]]
        return [
            SeparableStage(cin, c, pool, first=i == 0)
            for i, (cin, c, pool) in enumerate(zip(cins, channels, pools, strict=True))
        ]
