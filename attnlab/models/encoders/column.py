"""The lab's column encoder (``encoder=column``, every reader's default): a small conv stem,
then a bidirectional GRU that keeps a state for every column of the strip.

Its keys: ``model.stem_channels``, ``model.column_convs``, ``model.column_mlp``,
``model.column_norm`` (defaults and notes in attnlab.config.ModelConfig). Padded columns never
reach the recurrences (packed sequences, ``_recurrent.py``), and the stem zeroes them after
every layer, so a strip's states do not depend on what it was batched with.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from attnlab.config.model import check_stages
from attnlab.config.rules import require
from attnlab.models import costs
from attnlab.models.encoders import register
from attnlab.models.encoders._recurrent import ColumnStates

KEYS = ("stem_channels", "column_convs", "column_mlp", "column_norm")


def check(m: Any, height: int) -> None:
    """Its keys' values (``model.stride`` a power of two is checked for every encoder)."""
    check_stages(m, "stem_channels", height, "stem layers", at_least_one=False)
    convs = list(m.column_convs)
    require(all(c >= 1 for c in convs), "model.column_convs", convs, "must be >= 1 each")
    require(m.column_mlp >= 0, "model.column_mlp", m.column_mlp, "must be >= 0 (0 = none)")


@register(
    "column",
    "the lab's encoder: conv stem, column convolutions, per-column layer, BiGRU",
    KEYS,
    check,
)
class ColumnEncoder(ColumnStates):
    def __init__(self, cfg: Any, height: int, recurrent: bool = True):
        """``recurrent`` False: no BiGRU, for a reader that encodes the column features
        itself (``features``); calling the encoder then is an error."""
        super().__init__(cfg, height)
        halvings = int(math.log2(cfg.stride))
        n_conv = len(cfg.stem_channels)
        # The config check refuses these in one line before a reader is built.
        assert 2**halvings == cfg.stride and not (n_conv and halvings > n_conv)
        assert height % (2**n_conv) == 0
        self.convs = nn.ModuleList()
        self.width_pools: list[int] = []
        channels, h = 1, height
        for i, c in enumerate(cfg.stem_channels):
            pool = 2 if i < halvings else 1
            self.convs.append(nn.Conv2d(channels, c, kernel_size=3, stride=(2, pool), padding=1))
            self.width_pools.append(pool)
            channels, h = c, h // 2
        # 1-D convolutions along the strip, over pixel columns (or the stem's columns).
        self.column_convs = nn.ModuleList()
        width = channels * h
        for c in cfg.column_convs:
            self.column_convs.append(nn.Conv1d(width, c, kernel_size=3, padding=1))
            width = c
        # Without a stem, `stride` neighbouring columns are stacked into one.
        group = 1 if n_conv else cfg.stride
        self.column_features = width * group
        if cfg.column_mlp > 0:  # a hidden layer between the pixels of a column and the GRU
            self.proj = nn.Sequential(
                nn.Linear(self.column_features, cfg.column_mlp),
                nn.ReLU(),
                nn.Linear(cfg.column_mlp, 2 * cfg.hidden),
            )
        else:
            self.proj = nn.Linear(self.column_features, 2 * cfg.hidden)
        self.norm = nn.LayerNorm(2 * cfg.hidden) if cfg.column_norm else nn.Identity()
        self.add_gru(cfg, recurrent)

    def flop_terms(self, columns: int) -> list[costs.Term]:
        """Closed-form forward FLOPs of one strip of ``columns`` encoder columns, by layer
        (attnlab.models.costs): the stem and column convolutions, the per-column layer and
        the BiGRU, each once per column."""
        terms, h, w = [], self.height, columns * self.stride
        for i, (conv, pool) in enumerate(zip(self.convs, self.width_pools, strict=True)):
            h, w = (h - 1) // 2 + 1, (w - 1) // pool + 1  # kernel 3, padding 1, stride (2, pool)
            n = costs.conv2d(h * w, conv.in_channels, conv.out_channels, 3)
            terms.append(
                costs.Term(f"stem conv {i + 1}", "encoder", f"encoder.convs.{i}", "column", n)
            )
        for i, conv in enumerate(self.column_convs):
            n = costs.conv1d(w, conv.in_channels, conv.out_channels, 3)
            name, path = f"column conv {i + 1}", f"encoder.column_convs.{i}"
            terms.append(costs.Term(name, "encoder", path, "column", n))
        layers = [m for m in self.proj.modules() if isinstance(m, nn.Linear)]
        n = sum(costs.linear(columns, m.in_features, m.out_features) for m in layers)
        terms.append(costs.Term("column layer", "encoder", "encoder.proj", "column", n))
        return [*terms, *self.gru_terms(columns)]

    def features(self, images: torch.Tensor, widths: torch.Tensor):
        """images (B, H, W) with 1 = paper; widths (B,) real widths in pixels.

        Returns the column features (B, T, 2H) before any recurrence (stem, column layer and
        norm; what a reader with its own column encoder starts from) and lengths (B,) in
        columns. Features of padded columns are 0 (the per-column layers skip them).
        """
        b, _, w = images.shape
        lengths = self.column_lengths(widths)  # (B,)
        t = int(lengths.max())
        x = 1.0 - images  # ink, so that padding and the convs' zero padding agree
        if self.normalize:  # stretch each strip's own range to [0, 1]: paper 0, darkest ink 1
            real = (torch.arange(w, device=x.device) < widths[:, None])[:, None, :]  # (B, 1, W)
            lo = x.masked_fill(~real, float("inf")).amin(dim=(1, 2), keepdim=True)
            hi = x.masked_fill(~real, float("-inf")).amax(dim=(1, 2), keepdim=True)
            x = ((x - lo) / (hi - lo).clamp(min=0.1)).clamp(0, 1) * real
        if w < t * self.stride:
            x = nn.functional.pad(x, (0, t * self.stride - w))
        x = x[:, None, :, : t * self.stride]  # (B, 1, H, T*s)
        keep = lengths * self.stride  # real columns at the current resolution
        for conv, pool in zip(self.convs, self.width_pools, strict=True):
            x = torch.relu(conv(x))  # strided: halves the height, and the width if pool=2
            keep = torch.div(keep, pool, rounding_mode="floor")
            cols = torch.arange(x.shape[-1], device=x.device)
            x = x * (cols < keep[:, None]).to(x.dtype)[:, None, None, :]  # zero padded columns
        if self.column_convs:  # (B, C*H', W') columns as vectors, convolved along the strip
            y = x.flatten(1, 2)
            cols = torch.arange(y.shape[-1], device=y.device)
            real = (cols < keep[:, None]).to(y.dtype)[:, None, :]
            for conv in self.column_convs:
                y = torch.relu(conv(y)) * real  # padded columns stay zero: batch-independent
            x = y[:, :, None, :]  # (B, C, 1, W')
        if self.convs:
            feats = x.permute(0, 3, 1, 2).reshape(b, t, -1)  # (B, T, C*H')
        else:  # stack `stride` neighbouring columns: (B, C, H, T*s) -> (B, T, C*H*s)
            c = x.shape[1] * x.shape[2]
            feats = x.reshape(b, c, t, self.stride).permute(0, 2, 1, 3).reshape(b, t, -1)
        # The per-column layers run on real columns only (packed); padded ones are 0.
        real = torch.arange(t, device=feats.device)[None, :] < lengths[:, None]  # (B, T)
        y = self.norm(torch.relu(self.proj(feats[real])))  # (real columns, 2H)
        out = y.new_zeros(b, t, y.shape[-1])
        out[real] = y
        return out, lengths  # (B, T, 2H), (B,)
