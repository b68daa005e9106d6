"""Training augmentation: whole-strip variation of placed glyphs (``StripSynth.render``
with ``augment``; the training stream only). Vertical geometry only, so every glyph keeps
its columns and its span stays true. Real strips (``data=folder``, whose spans nobody
knows) can also be bent in both directions (``warp``, ``data.elastic``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlab.config import DataConfig
from attnlab.data.ranges import levels, uniform


def vary_strips(
    ink: torch.Tensor, widths: torch.Tensor, d: DataConfig, gen: torch.Generator
) -> torch.Tensor:
    """Whole-strip variation of placed glyphs: ink (B, H, W) in [0, 1] -> the same, varied.

    Stroke: a share of strips dilated by one pixel (``dilate``), then the ink levels
    stretched (``ink_level`` t < 0: ink under -t fades, thinner strokes; t > 0: ink over
    1 - t saturates, thicker ones). Geometry, vertical only (columns keep their ink, so glyph
    spans stay true): the whole string scaled about its middle row, shifted, and bent by a
    smooth wave along the strip. Resolution: strips drawn at a smaller height (area
    downscale) and resized back (bilinear), as a scan or a photo of other size would be.
    Every draw comes from ``gen``, in a fixed order, whether or not a variation is on.
    """
    b, h, w = ink.shape
    dilated = torch.rand(b, generator=gen) < d.dilate
    level = uniform(d.ink_level, b, gen)
    scale = uniform(d.strip_scale, b, gen)
    shift = uniform([-d.strip_shift, d.strip_shift], b, gen)
    amp = uniform([0.0, d.wave], b, gen)
    period = uniform([3.0 * h, 8.0 * h], b, gen)  # px along the strip
    phase = uniform([0.0, 2 * math.pi], b, gen)
    factors = levels(d.resample)
    resampled = torch.randint(0, len(factors), (b,), generator=gen)

    if bool(dilated.any()):  # max over each pixel's 2 x 2 neighbourhood
        x = F.pad(ink[dilated], (0, 1, 0, 1))
        ink[dilated] = torch.maximum(
            torch.maximum(x[:, :-1, :-1], x[:, 1:, :-1]), torch.maximum(x[:, :-1, 1:], x[:, 1:, 1:])
        )
    if float(level.abs().max()) > 1e-6:
        lo, hi = (-level).clamp(min=0), 1 - level.clamp(min=0)
        ink = ink.sub_(lo[:, None, None]).mul_((1 / (hi - lo))[:, None, None]).clamp_(0, 1)
    if float((scale - 1).abs().max()) > 1e-6 or d.strip_shift > 0 or d.wave > 0:
        # Output row y of column x samples input row mid + (y - mid - shift - wave(x)) / scale,
        # written straight into grid_sample's normalised coordinates (align_corners=False).
        xs = torch.arange(w, dtype=torch.float32)
        ys = torch.arange(h, dtype=torch.float32)
        wave = amp[:, None] * torch.sin(2 * math.pi * xs[None] / period[:, None] + phase[:, None])
        mid = (h - 1) / 2
        # src_y = a * y + c(x) with a = 1 / scale, c = mid - (mid + shift + wave) / scale.
        a = 1 / scale
        c = mid - (mid + shift[:, None] + wave) * a[:, None]  # (B, W)
        grid = torch.empty(b, h, w, 2)
        grid[..., 0] = (2 * xs + 1) / w - 1
        torch.add(
            (2 * a / h)[:, None, None] * ys[None, :, None],
            ((2 * c + 1) / h - 1)[:, None, :],
            out=grid[..., 1],
        )
        ink = F.grid_sample(ink[:, None], grid, align_corners=False, padding_mode="zeros")[:, 0]
    for i, f in enumerate(factors):
        rows = resampled == i
        if f >= 1.0 - 1e-6 or not bool(rows.any()):
            continue
        small = F.interpolate(
            ink[rows][:, None], size=(max(4, round(h * f)), max(1, round(w * f))), mode="area"
        )
        ink[rows] = F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)[:, 0]
    return ink.clamp_(0.0, 1.0)


def warp(ink: torch.Tensor, elastic: float, gen: torch.Generator) -> torch.Tensor:
    """Each strip's ink (B, H, W) bent by a smooth 2-D displacement of at most ``elastic`` px
    (Simard et al.'s elastic distortion, which ``data.elastic`` also applies to synthetic
    glyphs): displacements drawn uniformly on nodes about H/4 px apart, interpolated
    bicubically between them, so strokes bend at the scale of a digit's parts. It moves ink
    across columns, so it is for real strips only, whose spans are not known."""
    b, h, w = ink.shape
    nodes = (5, max(2, math.ceil(4 * w / h) + 1))  # (rows, columns) of the coarse grid
    coarse = (torch.rand(b, 2, *nodes, generator=gen) * 2 - 1) * elastic  # (B, 2, r, c) px
    field = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)
    field = field.clamp_(-elastic, elastic)  # bicubic overshoots its nodes a little
    xs = torch.arange(w, dtype=torch.float32)
    ys = torch.arange(h, dtype=torch.float32)
    return _sample(ink, xs[None, None, :] + field[:, 0], ys[None, :, None] + field[:, 1])


def slant(ink: torch.Tensor, amount: float, gen: torch.Generator) -> torch.Tensor:
    """Each strip's ink (B, H, W) sheared as a whole: a slant drawn uniformly in
    [-``amount``, ``amount``] (columns of shift per row away from the middle row), as writers
    lean their hands differently. Rows keep their ink; a row ``r`` rows above the middle moves
    ``slant * r`` px right. It moves ink across columns, so it is for real strips only."""
    b, h, w = ink.shape
    s = (torch.rand(b, generator=gen) * 2 - 1) * amount  # (B,)
    xs = torch.arange(w, dtype=torch.float32)
    ys = torch.arange(h, dtype=torch.float32)
    mid = (h - 1) / 2
    src_x = xs[None, None, :] + s[:, None, None] * (ys[None, :, None] - mid)  # (B, H, W)
    return _sample(ink, src_x, ys[None, :, None])


def _sample(ink: torch.Tensor, src_x: torch.Tensor, src_y: torch.Tensor) -> torch.Tensor:
    """Ink (B, H, W) read at source pixel coordinates ``src_x``, ``src_y`` (each broadcast
    to (B, H, W); pixel centres at integers), bilinear, paper (0) outside the strip."""
    b, h, w = ink.shape
    grid = torch.empty(b, h, w, 2)  # grid_sample's normalised source coordinates
    grid[..., 0] = (2 * src_x + 1) / w - 1
    grid[..., 1] = (2 * src_y + 1) / h - 1
    return F.grid_sample(ink[:, None], grid, align_corners=False, padding_mode="zeros")[:, 0]


def shading(widths: torch.Tensor, canvas_w: int, amount: float, gen: torch.Generator):
    """(B, W) paper factor: 1 at one end of the strip, down to 1 - a at the other
    (a drawn in [0, amount], the direction at random): uneven light on the page."""
    b = len(widths)
    a = uniform([0.0, amount], b, gen)
    flip = torch.rand(b, generator=gen) < 0.5
    ramp = (torch.arange(canvas_w)[None] / widths[:, None].clamp(min=1)).clamp(max=1.0)
    ramp = torch.where(flip[:, None], 1.0 - ramp, ramp)
    return 1.0 - a[:, None] * ramp


# JPEG's standard luminance quantisation table (ITU-T T.81, Annex K), quality 50.
_JPEG_LUMA = torch.tensor([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
], dtype=torch.float32).view(8, 8)  # fmt: skip


def _dct_matrix() -> torch.Tensor:
    """The orthonormal 8-point DCT-II: coefficients = D @ block @ D.T."""
    k, n = torch.arange(8.0)[:, None], torch.arange(8.0)[None, :]
    d = torch.cos(math.pi * (2 * n + 1) * k / 16) * math.sqrt(2 / 8)
    d[0] /= math.sqrt(2)
    return d


def jpeg(pixels: torch.Tensor, quality: torch.Tensor) -> torch.Tensor:
    """Grey strips (N, H, W) in [0, 1] as a JPEG encoder at ``quality`` (N,) in 1..100 would
    leave them: 8 x 8 block DCT, coefficients quantised with the standard luminance table at
    that quality (the IJG scaling), and back. That is all of JPEG's loss for a grey image
    (the entropy coding is lossless): block edges, ringing around strokes, flattened
    texture. Pixels are rounded to 8 bits, as a decoder returns them."""
    n, h, w = pixels.shape
    ph, pw = -h % 8, -w % 8
    x = F.pad(pixels[:, None], (0, pw, 0, ph), mode="replicate")[:, 0] * 255 - 128
    hb, wb = x.shape[1] // 8, x.shape[2] // 8
    blocks = x.view(n, hb, 8, wb, 8).transpose(2, 3)  # (N, hb, wb, 8, 8)
    d = _dct_matrix()
    q = quality.float().clamp(1, 100)
    scale = torch.where(q < 50, 5000 / q, 200 - 2 * q)  # IJG: percent of the base table
    table = ((_JPEG_LUMA * scale[:, None, None] + 50) / 100).floor().clamp(1, 255)
    table = table[:, None, None]  # (N, 1, 1, 8, 8)
    coeffs = d @ blocks @ d.T
    blocks = d.T @ (torch.round(coeffs / table) * table) @ d
    x = blocks.transpose(2, 3).reshape(n, hb * 8, wb * 8)[:, :h, :w]
    return torch.round((x + 128).clamp(0, 255)) / 255
