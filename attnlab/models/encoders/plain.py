"""``encoder=plain``: conv stages as the tutorials write a CRNN. Each stage is one 3x3
convolution (with its bias, as ``nn.Conv2d`` has it), masked batch norm and ReLU at the stage's
input resolution, then its own max pool (``model.conv_pools``: rows x columns, or none), so
the stack can leave several rows (joined into each column's vector with
``model.conv_rows=flatten``). A linear layer per column gives the BiGRU its input
(``model.conv_features``).

It is the reference the field's tutorials train, not a faster encoder: its convolutions run
before their pools, at the higher resolution (``vgg`` pools first, attnlab/models/encoders/
_conv.py says what that order costs). ``model=plain_crnn`` (conf/model/plain_crnn.yaml) is
the tutorials' CRNN on it: 611,563 parameters at 32 px.

Padding stays masked as in the other conv encoders (_conv.py): each convolution sees zeros
past the strip's real columns, and every pool's columns (2, or a power of two multiplying to
``model.stride``) never mix a real column with a padded one.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch
from torch import nn

from attnlab.config.model import check_stages
from attnlab.config.rules import require
from attnlab.models.encoders import register
from attnlab.models.encoders._conv import KEYS, ConvColumns, ConvNorm, check_columns

POOL = re.compile(r"^([1-9][0-9]*)x([1-9][0-9]*)$")


def parse_pool(text: Any) -> tuple[int, int] | None:
    """``"2x1"`` -> (2, 1) (rows, columns); ``"none"`` -> (1, 1); anything else None."""
    word = str(text).strip().lower()
    if word == "none":
        return 1, 1
    match = POOL.match(word)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check(m: Any, height: int) -> None:
    """``model.conv_channels`` and ``model.conv_pools`` (one per stage, each ``RxC`` or none,
    the columns' multiplying to ``model.stride``, the rows' dividing data.height); [] as the
    other conv encoders' stages (check_stages). Then the keys every conv encoder reads."""
    pools = list(m.conv_pools)
    if not pools:
        check_stages(m, "conv_channels", height, "conv stages", at_least_one=True)
        check_columns(m)
        return
    channels = list(m.conv_channels)
    ok = bool(channels) and all(c >= 1 for c in channels)
    require(ok, "model.conv_channels", channels, "must be one or more numbers >= 1")
    parsed = [parse_pool(p) for p in pools]
    shown = [str(p) for p in pools]
    ok = all(p is not None for p in parsed)
    require(ok, "model.conv_pools", shown, "must be RxC (e.g. 2x2, 2x1) or none, one per stage")
    ok = len(parsed) == len(channels)
    rule = f"must have one entry per stage: model.conv_channels has {len(channels)}"
    require(ok, "model.conv_pools", shown, rule)
    columns = math.prod(c for _, c in parsed)
    rule = f"its columns pool by {columns} in all, model.stride is {m.stride}: make them equal"
    require(columns == m.stride, "model.conv_pools", shown, rule)
    rows = math.prod(r for r, _ in parsed)
    rule = f"must be divisible by {rows} (model.conv_pools' rows)"
    require(height % rows == 0, "data.height", height, rule)
    check_columns(m)


class PlainStage(nn.Module):
    """One 3x3 conv (with bias) + batch norm + ReLU, then a ``pool`` (rows, columns) max pool
    (none at (1, 1))."""

    def __init__(self, cin: int, cout: int, pool: tuple[int, int]):
        super().__init__()
        self.pool = pool
        self.layer = ConvNorm(cin, cout, bias=True)

    def forward(self, x: torch.Tensor, keep: torch.Tensor):
        x = self.layer(x, keep)
        if self.pool != (1, 1):
            x = nn.functional.max_pool2d(x, self.pool)
        return x, torch.div(keep, self.pool[1], rounding_mode="floor")

    def flops(self, h: int, w: int) -> tuple[int, int, int]:
        return self.layer.flops(h, w), h // self.pool[0], w // self.pool[1]


@register(
    "plain",
    "one conv + batch norm + ReLU per stage, then its own pool (the tutorials' CRNN), the BiGRU",
    (*KEYS, "conv_pools"),
    check,
)
class PlainEncoder(ConvColumns):
    def pools_for(self, cfg: Any, stages: int) -> list[tuple[int, int]]:
        pools = [parse_pool(p) for p in cfg.conv_pools]
        if not pools:
            return super().pools_for(cfg, stages)
        assert all(p is not None for p in pools) and len(pools) == stages  # checked before
        return pools  # type: ignore[return-value]

    def stages_for(self, channels, pools):
        cins = [1, *channels[:-1]]
        return [PlainStage(i, o, p) for i, o, p in zip(cins, channels, pools, strict=True)]
