"""Training augmentation: whole-strip variation of placed glyphs (``StripSynth.render``
with ``augment``; the training stream only). Vertical geometry only, so every glyph keeps
its columns and its span stays true. Real strips (``data=folder``, whose spans nobody
knows) can also be bent in both directions (``warp``, ``data.elastic``).
"""

from __future__ import annotations

import functools
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
    downscale) and resized back (bilinear), as a scan or a photo of other size would be,
    each strip at its own size (``widths`` (B,) columns; past them the ink is 0), so a strip
    is varied alike whether it is batched alone or beside a longer one.
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
        ink[rows] = _resample(ink[rows], widths[rows], f)
    ink.masked_fill_(outside_columns(widths, w), 0.0)
    return ink.clamp_(0.0, 1.0)


def outside_columns(widths: torch.Tensor, w: int) -> torch.Tensor:
    """(B, 1, W) bool, True on the padding: the columns past each strip's width."""
    return (torch.arange(w)[None, :] >= widths[:, None])[:, None, :]


def edge_filled(x: torch.Tensor, widths: torch.Tensor) -> torch.Tensor:
    """x (B, H, W) with each strip's padding columns filled with its own last column: what a
    filter reading past a strip's edge sees when the strip is alone (replicated edge)."""
    b, h, w = x.shape
    last = (widths.to(torch.long) - 1).clamp(min=0)[:, None]  # (B, 1)
    cols = torch.minimum(torch.arange(w)[None, :], last)  # (B, W)
    return x.gather(2, cols[:, None, :].expand(b, h, w))


@functools.lru_cache(maxsize=16)
def _rows_resampled(h: int, f: float) -> torch.Tensor:
    """(H, H) the map of an H-row column drawn at ``f`` times its height (area) and resized
    back (bilinear, align_corners=False): ``F.interpolate``'s, applied to every unit column."""
    unit = torch.eye(h).view(h, 1, h, 1)  # (H, 1, H, 1) one image per row lit
    small = F.interpolate(unit, size=(max(4, round(h * f)), 1), mode="area")
    back = F.interpolate(small, size=(h, 1), mode="bilinear", align_corners=False)
    return back.view(h, h).T.contiguous()  # column j: what row j's ink becomes


def _resample(ink: torch.Tensor, widths: torch.Tensor, f: float) -> torch.Tensor:
    """Ink (N, H, W) of strips ``widths`` (N,) wide drawn at ``f`` times their own size (area
    average) and resized back to it (bilinear, align_corners=False), as ``F.interpolate``
    would do to each strip alone: separable, columns per strip, rows for all at once."""
    n, h, w = ink.shape
    wide = widths.to(torch.long).clamp(min=1)[:, None]  # (N, 1)
    small = (wide * f).round().long().clamp(min=1)  # (N, 1) the strip's width when small
    # Down, columns: small column j averages columns [floor(j w / s), ceil((j + 1) w / s)),
    # from running sums (ink <= 1: float32 sums of a strip stay within 1e-4 of the exact).
    j = torch.arange(int(small.max()))[None]  # (1, S)
    start = (j * wide // small).clamp(max=w)  # (N, S)
    end = (((j + 1) * wide + small - 1) // small).clamp(max=w)
    sums = torch.zeros(n, h, w + 1)
    torch.cumsum(ink, -1, out=sums[..., 1:])  # (N, H, W + 1) sums[..., x]: columns < x
    s = j.shape[1]
    total = sums.gather(2, end[:, None].expand(n, h, s))
    total -= sums.gather(2, start[:, None].expand(n, h, s))
    down = total.div_((end - start).clamp(min=1)[:, None])  # (N, H, S)
    down = torch.matmul(_rows_resampled(h, f), down)  # rows: the same for every strip
    # Up, columns: column x reads small column (x + 0.5) s / w - 0.5, bilinear.
    src = ((torch.arange(w)[None] + 0.5) * small / wide - 0.5).clamp(min=0)  # (N, W)
    x0 = src.long().clamp(max=small - 1)
    x1 = (x0 + 1).clamp(max=small - 1)
    lam = (src - x0)[:, None, :]  # (N, 1, W)
    a = down.gather(2, x0[:, None, :].expand(n, h, w))
    return a.lerp_(down.gather(2, x1[:, None, :].expand(n, h, w)), lam)


def warp(
    ink: torch.Tensor, elastic: float, gen: torch.Generator, widths: torch.Tensor | None = None
) -> torch.Tensor:
    """Each strip's ink (B, H, W) bent by a smooth 2-D displacement of at most ``elastic`` px
    (Simard et al.'s elastic distortion, which ``data.elastic`` also applies to synthetic
    glyphs): displacements drawn uniformly on nodes about H/4 px apart, interpolated
    bicubically between them, so strokes bend at the scale of a digit's parts. It moves ink
    across columns, so it is for real strips only, whose spans are not known.

    The nodes sit at fixed columns from the strip's start, and those past a strip's own last
    node repeat it (as the edge of a canvas as wide as the strip would), so a strip
    (``widths`` (B,) columns; None: the whole canvas) bends alike batched alone or beside a
    longer one."""
    b, h, w = ink.shape
    widths = torch.full((b,), w) if widths is None else widths.to(torch.long)
    step = max(1, round(h / 4))  # px between nodes along the strip
    n_cols = max(2, math.ceil((w - 1) / step) + 1)  # nodes along the canvas
    coarse = (torch.rand(b, 2, 5, n_cols, generator=gen) * 2 - 1) * elastic  # (B, 2, 5, c) px
    own = ((widths + step - 2) // step + 1).clamp(min=2)  # (B,) nodes along the strip
    node = torch.minimum(torch.arange(n_cols)[None], own[:, None] - 1)  # (B, c)
    coarse = coarse.gather(3, node[:, None, None, :].expand(b, 2, 5, n_cols))
    size = (h, (n_cols - 1) * step + 1)
    field = F.interpolate(coarse, size=size, mode="bicubic", align_corners=True)[..., :w]
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


def jpeg(
    pixels: torch.Tensor, quality: torch.Tensor, widths: torch.Tensor | None = None
) -> torch.Tensor:
    """Grey strips (N, H, W) in [0, 1] as a JPEG encoder at ``quality`` (N,) in 1..100 would
    leave them: 8 x 8 block DCT, coefficients quantised with the standard luminance table at
    that quality (the IJG scaling), and back. That is all of JPEG's loss for a grey image
    (the entropy coding is lossless): block edges, ringing around strokes, flattened
    texture. Pixels are rounded to 8 bits, as a decoder returns them. Given ``widths``
    (N,), the blocks at a strip's edge see its last column repeated (as an encoder pads a
    strip alone), not the batch's padding."""
    if widths is not None:
        pixels = edge_filled(pixels, widths)
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
