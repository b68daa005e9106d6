"""``encoder=vgg``: the CRNN / deep-text-recognition-benchmark VGG feature extractor, scaled
for a CPU. One stage per ``model.conv_channels`` entry, each halving the height, and the width
while ``model.stride`` asks for it (the field's (2, 1) pools after that): the first by a
strided 3x3 convolution, the others by a max pool before their 3x3 convolutions (one in the
first two stages, two after, as VGG doubles its deeper layers), each convolution with masked
batch norm and ReLU. Pooling first keeps the wide convolutions at the lowest resolution (the
field's early pooling). The remaining rows are averaged into one, a linear layer per column
gives 2H features and the BiGRU the states (attnlab/models/encoders/_conv.py: how padding
stays masked, and what the order costs).

At the default size (conv_channels [16, 32, 64, 128], hidden 64): six convolutions, 282k
parameters in the stages, 373k in the encoder (a CTC reader on it: 375k).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.models.encoders import register
from attnlab.models.encoders._conv import KEYS, ConvColumns, ConvNorm, check


class VGGStage(nn.Module):
    """Halve the height (and the width by ``pool``): a strided first convolution
    (``strided``) or a (2, ``pool``) max pool; then ``convs`` 3x3 conv + batch norm + ReLU
    layers in all."""

    def __init__(self, cin: int, cout: int, convs: int, pool: int, strided: bool):
        super().__init__()
        self.pool, self.strided = pool, strided
        first = ConvNorm(cin, cout, stride=(2, pool) if strided else (1, 1))
        rest = (ConvNorm(cout, cout) for _ in range(convs - 1))
        self.layers = nn.ModuleList([first, *rest])

    def forward(self, x: torch.Tensor, keep: torch.Tensor):
        if not self.strided:
            x = nn.functional.max_pool2d(x, (2, self.pool))
        keep = torch.div(keep, self.pool, rounding_mode="floor")
        for layer in self.layers:
            x = layer(x, keep)
        return x, keep

    def flops(self, h: int, w: int) -> tuple[int, int, int]:
        h, w = h // 2, w // self.pool
        return sum(layer.flops(h, w) for layer in self.layers), h, w


@register(
    "vgg", "VGG conv stages with batch norm (CRNN's feature extractor), then the BiGRU", KEYS, check
)
class VGGEncoder(ConvColumns):
    def stages_for(self, channels, pools):
        cins = [1, *channels[:-1]]
        return [
            VGGStage(cin, c, 1 if i < 2 else 2, pool, strided=i == 0)
            for i, (cin, c, (_, pool)) in enumerate(zip(cins, channels, pools, strict=True))
        ]
