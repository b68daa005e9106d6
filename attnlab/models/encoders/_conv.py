"""What the deep conv encoders (``vgg``, ``resnet``) share: the field's recipe (CRNN, Shi et
al. 2015; deep-text-recognition-benchmark's feature extractors) scaled for a CPU. Stages of
3x3 convolutions with batch norm, each halving the height (and the width, while the stride
asks for it), the remaining rows averaged into one (or joined: ``model.conv_rows``), a linear
layer per column to 2H (or ``model.conv_features``), then the same BiGRU as the column encoder
(``_recurrent.py``). ``encoder=plain`` is the tutorials' order instead (plain.py).

Cost. Nothing runs at the strip's full resolution: the first stage's convolution is strided
(2 rows, and 2 columns while the stride asks for it) and every later stage pools before its
convolutions, so the wide convolutions run on the fewest positions, as the field's small
CRNNs pool early. Batch norm in training mode is one affine map from two sums per channel
(``MaskedBatchNorm2d``). Written the other way round (a full-resolution first stage, pools
after the convolutions, batch norm as a chain of masked element-wise operations), the
element-wise work alone took over twice the convolutions' time, and a CRNN step 15 to 29
times a column-encoder CTC step on one thread (about 3.5 times now).

Padding. A strip's states must not depend on what it is batched with. Three things keep it:

- every stage zeroes the columns past the strip's real width (``keep``, at that stage's
  resolution) after each activation, so a 3x3 convolution at the strip's right edge sees
  zeros there, exactly the zero padding it sees when the strip is alone;
- the width pools (and the first convolution's column stride) are 2 wide and the real width
  is a multiple of the stride, so a pool never mixes a real column with a padded one, and
  the strided convolution's real columns see no padding but the zeros a lone strip has;
- batch norm (``MaskedBatchNorm2d``) takes its training statistics over the real positions
  only, and in eval mode is the fixed affine map of its running statistics, so padding moves
  neither a strip's states (eval) nor the statistics training learns from (training).
  Group norm was the alternative: it normalises each strip over its own positions, so it
  would need the same mask in both modes, and it is not what the field's recipe uses.

Every operation is also traceable as written (no Python integers taken from tensors when
``traced``): the ONNX export uses the encoder itself, with the columns taken from the image's
width instead of the widest strip's.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from attnlab.config.model import check_stages
from attnlab.config.rules import require
from attnlab.errors import UserError
from attnlab.models import costs
from attnlab.models.encoders._recurrent import ColumnStates

# What a conv encoder reads beyond the keys every encoder reads.
KEYS = ("conv_channels", "conv_rows", "conv_features")
ROWS = ("mean", "flatten")  # model.conv_rows: the remaining rows averaged, or joined


def check(m: Any, height: int) -> None:
    """``model.conv_channels``: one stage or more, enough for the stride, dividing the height;
    then the keys every conv encoder reads (``check_columns``)."""
    check_stages(m, "conv_channels", height, "conv stages", at_least_one=True)
    check_columns(m)


def check_columns(m: Any) -> None:
    """``model.conv_rows`` and ``model.conv_features``: how the remaining rows become a
    column's vector, and its size."""
    require(m.conv_rows in ROWS, "model.conv_rows", m.conv_rows, f"must be one of {'|'.join(ROWS)}")
    ok = isinstance(m.conv_features, int) and m.conv_features >= 0
    require(ok, "model.conv_features", m.conv_features, "must be >= 0 (0 = 2 x model.hidden)")


def positions(row: torch.Tensor) -> torch.Tensor:
    """0, 1, ... len(row) - 1 (int64) made from the row's values: an ``arange`` that a trace
    keeps as long as the row (``torch.arange(x.shape[i])`` would become a constant)."""
    return (row.isnan() | ~row.isnan()).long().cumsum(0) - 1


def real_columns(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """x (B, C, H, W), keep (B,) real columns -> (B, 1, 1, W) 1.0 on real columns, else 0."""
    cols = positions(x[0, 0, 0])
    return (cols[None, :] < keep[:, None]).to(x.dtype)[:, None, None, :]


class MaskedBatchNorm2d(nn.BatchNorm2d):
    """Batch norm whose training statistics (and so its running ones) are the real
    positions' only: ``real`` (B, 1, 1, W) marks them. In eval mode it is plain batch norm,
    an affine map per channel, which padding cannot reach.

    Training takes the statistics from two sums per channel (of x and of x squared, each
    first summed down the rows, then weighted by the real columns: no masked copy of x) and
    applies them as one affine map, ``x * scale + shift``: a few passes over x instead of
    the dozen a masked mean, a masked centred variance and an affine map written out take
    (forward and backward), which made the conv encoders' batch norm their largest cost."""

    def forward(self, x: torch.Tensor, real: torch.Tensor | None = None) -> torch.Tensor:
        if not self.training or real is None:
            return super().forward(x)
        scale, shift = self.statistics(x, real[:, 0, 0, :])
        return torch.addcmul(shift[:, None, None], x, scale[:, None, None])

    def statistics(self, x: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, C, H, W), real (B, W) -> the per-channel (scale, shift) of training mode,
        the running statistics moved. Sums in float32 at least (bf16 autocast included)."""
        acc = torch.promote_types(x.dtype, torch.float32)
        count = real.sum() * x.shape[2]  # real positions per channel
        w = real.to(acc)
        mean = torch.einsum("bcw,bw->c", x.sum(2, dtype=acc), w) / count  # (C,)
        square = torch.einsum("bcw,bw->c", x.square().sum(2, dtype=acc), w) / count
        var = (square - mean.square()).clamp(min=0)  # biased, as batch norm's
        with torch.no_grad():
            m = self.momentum if self.momentum is not None else 0.1
            unbiased = var * count / (count - 1).clamp(min=1)
            self.running_mean.mul_(1 - m).add_(m * mean)
            self.running_var.mul_(1 - m).add_(m * unbiased)
            self.num_batches_tracked.add_(1)
        scale = self.weight * torch.rsqrt(var + self.eps)
        return scale.to(x.dtype), (self.bias - mean * scale).to(x.dtype)


class ConvNorm(nn.Module):
    """A convolution (square kernel, same padding, no bias unless ``bias``: batch norm's shift
    makes it redundant; ``stride`` (rows, columns)) then masked batch norm, the padded columns
    zeroed after it (and after the ReLU, ``relu``)."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int = 3,
        stride: tuple[int, int] = (1, 1),
        bias: bool = False,
    ):
        super().__init__()
        pad = kernel // 2
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=pad, bias=bias)
        self.norm = MaskedBatchNorm2d(cout)

    def forward(self, x: torch.Tensor, keep: torch.Tensor, relu: bool = True) -> torch.Tensor:
        """x (B, Cin, H, W), 0 on padded columns; keep (B,) the output's real columns ->
        (B, Cout, H', W'), 0 on padded columns."""
        y = self.conv(x)
        real = real_columns(y, keep)
        y = self.norm(y, real).mul_(real)
        return y.relu_() if relu else y

    def flops(self, h: int, w: int) -> int:
        """``h`` x ``w``: the output's rows and columns."""
        c = self.conv
        return costs.conv2d(h * w, c.in_channels, c.out_channels, c.kernel_size[0])


class ConvColumns(ColumnStates):
    """The column encoder surface (see ``attnlab.models.encoders``) over a conv stack that a
    subclass builds: ``stages_for(channels, pools)`` returns modules with ``forward(x, keep)
    -> (x, keep)`` and ``flops(h, w) -> (flops, h, w)``; each stage divides the rows and the
    columns by its ``pools`` entry (rows, columns) (``pools_for``: by default 2 rows each, and
    2 columns while ``model.stride`` asks). The rows left are averaged into one, or joined
    into each column's vector (``model.conv_rows``), and a linear layer per column gives the
    BiGRU ``model.conv_features`` (0: 2 x hidden) of them."""

    def __init__(self, cfg: Any, height: int, recurrent: bool = True):
        super().__init__(cfg, height)
        channels = list(cfg.conv_channels)
        pools = self.pools_for(cfg, len(channels))  # (rows, columns) each stage divides by
        # The config check refuses these in one line before an encoder is built.
        assert math.prod(c for _, c in pools) == cfg.stride
        assert height % math.prod(r for r, _ in pools) == 0
        self.rows = height // math.prod(r for r, _ in pools)  # rows left after the stages
        self.flatten = str(getattr(cfg, "conv_rows", "mean")) == "flatten"
        size = int(getattr(cfg, "conv_features", 0) or 2 * cfg.hidden)
        if not recurrent and size != 2 * cfg.hidden:
            raise UserError(
                f"model.conv_features={size}: a reader without the encoder's BiGRU reads its "
                f"columns at 2 x model.hidden = {2 * cfg.hidden} (set 0)"
            )
        self.stages = nn.ModuleList(self.stages_for(channels, pools))
        self.proj = nn.Linear(channels[-1] * (self.rows if self.flatten else 1), size)
        self.add_gru(cfg, recurrent, size)

    def pools_for(self, cfg: Any, stages: int) -> list[tuple[int, int]]:
        """(rows, columns) each of ``stages`` stages divides by: 2 rows each, 2 columns in
        the first log2(``model.stride``) stages."""
        halvings = int(math.log2(cfg.stride))
        assert 2**halvings == cfg.stride and halvings <= stages
        return [(2, 2 if i < halvings else 1) for i in range(stages)]

    def stages_for(self, channels: list[int], pools: list[tuple[int, int]]) -> list[nn.Module]:
        raise NotImplementedError

    def flop_terms(self, columns: int) -> list[costs.Term]:
        """Closed-form forward FLOPs of one strip of ``columns`` encoder columns: each conv
        stage (its convolutions; norms, pools and activations are element-wise, uncounted),
        the per-column layer and the BiGRU, each growing with the columns."""
        terms, h, w = [], self.height, columns * self.stride
        for i, stage in enumerate(self.stages):
            n, h, w = stage.flops(h, w)
            terms.append(
                costs.Term(f"conv stage {i + 1}", "encoder", f"encoder.stages.{i}", "column", n)
            )
        n = costs.linear(columns, self.proj.in_features, self.proj.out_features)
        terms.append(costs.Term("column layer", "encoder", "encoder.proj", "column", n))
        return [*terms, *self.gru_terms(columns)]

    def features(self, images: torch.Tensor, widths: torch.Tensor, traced: bool = False):
        """images (B, H, W) with 1 = paper; widths (B,) real widths in pixels.

        Returns the column features (B, T, F) before the BiGRU (F: model.conv_features, or
        2H), 0 on padded columns, and lengths (B,) in columns. T is the widest strip's
        columns; ``traced`` (the ONNX export): the image's, ceil(W / stride), with no Python
        integer taken from a tensor.
        """
        s = self.stride
        lengths = self.column_lengths(widths)  # (B,)
        if not traced:
            images = images[:, :, : int(lengths.max()) * s]
        w = images.shape[2]
        x = 1.0 - images  # ink: padding, paper and the convs' zero padding agree
        real = (positions(images[0, 0]) < widths[:, None])[:, None, :]  # (B, 1, W)
        if self.normalize:  # each strip's own range to [0, 1], as the column encoder does
            lo = x.masked_fill(~real, float("inf")).amin(dim=(1, 2), keepdim=True)
            hi = x.masked_fill(~real, float("-inf")).amax(dim=(1, 2), keepdim=True)
            x = ((x - lo) / (hi - lo).clamp(min=0.1)).clamp(0, 1)
        x = nn.functional.pad(x * real, (0, (s - w % s) % s))[:, None]  # (B, 1, H, T*s)
        keep = lengths * s  # real columns at the current resolution
        for stage in self.stages:
            x, keep = stage(x, keep)
        if self.flatten:  # (B, T, C * R): each column's rows joined, channel by channel
            x = x.permute(0, 3, 1, 2).flatten(2)
        else:
            x = x.mean(2).transpose(1, 2)  # (B, T, C): the remaining rows averaged
        cols = positions(x[0, :, 0])
        real_cols = (cols[None, :] < lengths[:, None]).to(x.dtype)[..., None]  # (B, T, 1)
        return self.proj(x) * real_cols, lengths
