"""Synthetic digit strips: a glyph bank rendered once per process, vectorised strip synthesis.

A strip is a grey image of a digit string, fixed height, width growing with the string.
Pixels are floats in [0, 1] with 1 = white paper and 0 = black ink, as a scan would be.
Every strip carries its label and the column span [start, end) of every glyph.

Synthesis is tensor work: glyphs are gathered from the bank and added onto a flat canvas
with one ``index_add_``; then whole-strip variation (stroke weight, vertical warps,
resampling; ``vary_strips``) and per-strip contrast, paper, shading and noise, all batched.
All randomness comes from an explicit ``torch.Generator``: the same seed gives the same
strips on every machine (the bank is built from fonts shipped inside Pillow and matplotlib).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.config import DataConfig
from attnlab.errors import UserError

DIGITS = "0123456789"
# Symbol-only or display fonts whose digits are missing or not digits (file-name substrings:
# DejaVuSansDisplay and DejaVuSerifDisplay draw a placeholder box for every digit).
_SKIP_FONTS = ("cmex10", "cmsy10", "STIXSiz", "Display", "LastResort", "STIXNonUni")


@dataclass
class StripBatch:
    """A batch of strips padded to the widest one. Padded columns are white paper (1.0)."""

    images: torch.Tensor  # (B, H, W) float32, 1 = paper
    widths: torch.Tensor  # (B,) int64, real width of each strip in pixels
    labels: list[str]
    spans: torch.Tensor  # (B, L, 2) int64 glyph [start, end) columns; (0, 0) past the label

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def mask(self) -> torch.Tensor:
        """(B, W) bool, True on a strip's real columns."""
        cols = torch.arange(self.images.shape[-1])
        return cols[None, :] < self.widths[:, None]

    def select(self, index: torch.Tensor | list[int]) -> StripBatch:
        """Sub-batch, cropped to its own widest strip."""
        index = torch.as_tensor(index, dtype=torch.long)
        widths = self.widths[index]
        w = int(widths.max()) if len(index) else 0
        labels = [self.labels[i] for i in index.tolist()]
        span_len = max((len(s) for s in labels), default=0)
        return StripBatch(
            images=self.images[index, :, :w],
            widths=widths,
            labels=labels,
            spans=self.spans[index, :span_len],
        )


def pad_strips(images: list[torch.Tensor], labels: list[str], spans: torch.Tensor) -> StripBatch:
    """Stack strips of different widths into a batch, padding with paper."""
    h = images[0].shape[0]
    widths = torch.tensor([im.shape[1] for im in images], dtype=torch.long)
    out = torch.ones(len(images), h, int(widths.max()))
    for i, im in enumerate(images):
        out[i, :, : im.shape[1]] = im
    return StripBatch(out, widths, labels, spans)


# ---------------------------------------------------------------------------------------------
# Fonts and the glyph bank


def bundled_fonts() -> list[str]:
    """TrueType fonts shipped with matplotlib that render all ten digits, plus Pillow's own."""
    import matplotlib

    ttf = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    paths = sorted(
        str(p) for p in ttf.glob("*.ttf") if not any(skip in p.stem for skip in _SKIP_FONTS)
    )
    return ["pillow:default", *paths]


def resolve_fonts(data: DataConfig) -> list[str]:
    """Font sources named by the config: ``bundled`` or paths / globs, minus exclusions."""
    fonts: list[str] = []
    for entry in data.fonts:
        if entry == "bundled":
            fonts.extend(bundled_fonts())
            continue
        matches = sorted(glob.glob(str(Path(entry).expanduser())))
        if not matches:
            raise UserError(f"data.fonts: no font file matches {entry!r}")
        fonts.extend(matches)
    fonts = [f for f in fonts if not any(x in Path(f).name for x in data.exclude_fonts)]
    if not fonts:
        raise UserError("data.fonts: no fonts left after data.exclude_fonts")
    return fonts


def _load_font(source: str, size: int):
    from PIL import ImageFont

    if source == "pillow:default":
        return ImageFont.load_default(size=size)
    try:
        return ImageFont.truetype(source, size=size)
    except OSError as err:
        raise UserError(f"data.fonts: cannot load font {source}: {err}") from err


def _render_digits(source: str, size: int, stroke: int, height: int) -> list[torch.Tensor] | None:
    """Ten tight-cropped glyphs (height, w) as ink in [0, 1]; None if the font lacks digits."""
    import numpy as np
    from PIL import Image, ImageDraw

    font = _load_font(source, size)
    baseline = round(0.8 * height)
    glyphs = []
    for d in DIGITS:
        canvas = Image.new("L", (3 * size + 4 * stroke + 8, height), 0)
        ImageDraw.Draw(canvas).text(
            (4 + stroke, baseline), d, font=font, fill=255, anchor="ls",
            stroke_width=stroke, stroke_fill=255,
        )  # fmt: skip
        ink = torch.from_numpy(np.asarray(canvas, dtype=np.float32) / 255.0)
        cols = torch.nonzero(ink.sum(0) > 0.05).flatten()
        if len(cols) == 0:
            return None
        glyphs.append(ink[:, int(cols[0]) : int(cols[-1]) + 1])
    # A font without digits draws the same placeholder box for each of them.
    first = glyphs[0]
    if all(g.shape == first.shape and torch.equal(g, first) for g in glyphs[1:]):
        return None
    return glyphs


def mark_zero(glyph: torch.Tensor, how: str) -> torch.Tensor:
    """A zero (H, w) ink in [0, 1] with a dot in its counter or a slash across it, drawn in
    its own stroke width: the zeros of many monospaced and programming typefaces."""
    import numpy as np
    from PIL import Image, ImageDraw

    h, w = glyph.shape
    rows = torch.nonzero(glyph.amax(1) > 0.5).flatten()
    if len(rows) < 3 or w < 4:
        return glyph
    top, bottom = int(rows[0]), int(rows[-1])
    mid = (top + bottom) // 2
    run = glyph[mid] > 0.5  # the left stroke at mid height: its width is the stroke's
    first = int(torch.nonzero(run).flatten()[0]) if bool(run.any()) else 0
    stroke = int(torch.nonzero(~run[first:]).flatten()[0]) if bool((~run[first:]).any()) else 1
    stroke = max(1, min(stroke, w // 4))
    image = Image.fromarray(np.uint8(glyph.numpy() * 255))
    draw = ImageDraw.Draw(image)
    cx, cy, tall = (w - 1) / 2, (top + bottom) / 2, bottom - top
    if how == "dot":
        rx, ry = max(0.6, 0.45 * stroke), max(0.8, 0.12 * tall)
        draw.ellipse((cx - rx, cy - ry, cx + rx, cy + ry), fill=255)
    else:
        draw.line(
            (0.8 * (w - 1), top + 0.15 * tall, 0.2 * (w - 1), bottom - 0.15 * tall),
            fill=255, width=stroke,
        )  # fmt: skip
    return torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0)


# Old-style (text) figures: 0 1 2 at x-height, 3 4 5 7 9 from x-height down below the
# baseline, 6 8 at full height, as book typefaces (Georgia, Computer Modern's italic) draw them.
_SMALL, _DESCENDING = (0, 1, 2), (3, 4, 5, 7, 9)


def oldstyle_figures(glyphs: list[torch.Tensor], baseline: int) -> list[torch.Tensor]:
    """Ten lining figures (H, w) standing on ``baseline`` -> their old-style forms: small
    ones shrunk to 70% of the height onto the baseline, descending ones shrunk to 90% and
    moved down by 30% of the height (clipped at the image's bottom), 6 and 8 unchanged."""
    out = []
    for d, g in enumerate(glyphs):
        h, w = g.shape
        rows = torch.nonzero(g.amax(1) > 0.1).flatten()
        if d not in _SMALL + _DESCENDING or len(rows) < 4:
            out.append(g)
            continue
        top, cap = int(rows[0]), baseline - int(rows[0])
        factor = 0.7 if d in _SMALL else 0.9
        new_h, new_w = max(2, round(cap * factor)), max(2, round(w * (0.9 if d in _SMALL else 1)))
        small = F.interpolate(
            g[None, None, top:baseline], size=(new_h, new_w), mode="bilinear", align_corners=False
        )[0, 0]
        bottom = baseline if d in _SMALL else baseline + round(0.3 * cap)
        bottom = min(bottom, h)
        placed = torch.zeros(h, new_w)
        placed[bottom - min(new_h, bottom) : bottom] = small[new_h - min(new_h, bottom) :]
        out.append(placed.clamp(0, 1))
    return out


def _affine_variants(
    glyphs: torch.Tensor,
    v: int,
    scale,
    stretch,
    shear,
    rotation,
    v_offset: int,
    gen: torch.Generator,
) -> torch.Tensor:
    """(N, H, Wg) -> (N, V, H, Wg): variant 0 unchanged; the others scaled, stretched
    horizontally, sheared, rotated and shifted vertically, each with its own draw from the
    configured [low, high] ranges."""
    n, h, wg = glyphs.shape
    u = torch.rand(n, v, 5, generator=gen)
    lo = torch.tensor([scale[0], shear[0], rotation[0], -v_offset, stretch[0]])
    hi = torch.tensor([scale[1], shear[1], rotation[1], v_offset, stretch[1]])
    p = lo.float() + u * (hi - lo).float()
    p[:, 0] = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0])
    scale, shear, rot, wide = p[..., 0], p[..., 1], torch.deg2rad(p[..., 2]), p[..., 4]
    shift = -2.0 * p[..., 3] / h  # pixels -> normalised height, output moves down by +px
    # Output->input map in normalised coordinates (x spans the width, y the height).
    aspect = wg / h
    cos, sin = torch.cos(rot), torch.sin(rot)
    zero = torch.zeros_like(scale)
    row1 = torch.stack([cos / scale / wide, (-sin + shear) / scale / aspect / wide, zero], -1)
    row2 = torch.stack([sin / scale * aspect, cos / scale, shift], -1)
    theta = torch.stack([row1, row2], -2).reshape(n * v, 2, 3)
    src = glyphs[:, None].expand(n, v, h, wg).reshape(n * v, 1, h, wg)
    grid = F.affine_grid(theta, [n * v, 1, h, wg], align_corners=False)
    out = F.grid_sample(src, grid, align_corners=False, padding_mode="zeros")
    return out.reshape(n, v, h, wg)


def _blur_levels(blur: list[float]) -> list[float]:
    """The Gaussian sigmas a strip can be blurred with: three levels across the range."""
    lo, hi = float(blur[0]), float(blur[1])
    return [lo] if hi - lo < 1e-6 else [lo, (lo + hi) / 2, hi]


def _gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of (N, H, W) images, zero outside (ink fades into paper)."""
    if sigma < 0.05:
        return images
    radius = max(1, math.ceil(2.5 * sigma))
    x = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-(x**2) / (2 * sigma**2))
    k = k / k.sum()
    out = F.conv2d(images[:, None], k.view(1, 1, 1, -1), padding=(0, radius))
    out = F.conv2d(out, k.view(1, 1, -1, 1), padding=(radius, 0))
    return out[:, 0]


@dataclass(frozen=True)
class GlyphBank:
    """Every digit of every font, size and stroke, in geometric variants and blur levels.

    Stored column-major, (..., Wg, H), so that placing a glyph adds whole columns.
    """

    columns: torch.Tensor  # (R, K, 10, V, Wg, H) uint8 ink, left-aligned on the first ink column
    widths: torch.Tensor  # (R, K, 10, V) int64 ink width of each glyph
    renderings: tuple[str, ...]  # "font@size/stroke" for each of the R renderings
    blur_levels: tuple[float, ...]  # the K blur sigmas


def _bank_key(data: DataConfig) -> tuple:
    fonts = tuple(resolve_fonts(data))
    return (
        data.height, fonts, tuple(data.font_sizes), tuple(data.stroke_widths), data.variants,
        tuple(data.scale), tuple(data.stretch), tuple(data.shear), tuple(data.rotation),
        data.v_offset, tuple(data.blur), float(data.marked_zeros), float(data.oldstyle),
    )  # fmt: skip


def glyph_bank(data: DataConfig) -> GlyphBank:
    """The bank for this config, built once per process."""
    return _build_bank(_bank_key(data))


@functools.lru_cache(maxsize=4)
def _build_bank(key: tuple) -> GlyphBank:
    (height, fonts, sizes, strokes, variants, scale, stretch, shear, rotation, v_offset, blur,
     marked, oldstyle) = key  # fmt: skip
    if variants < 1:
        raise UserError(f"data.variants must be >= 1, got {variants}")
    base: list[torch.Tensor] = []
    names: list[str] = []
    zeros = torch.Generator().manual_seed(10)  # which renderings mark their zero, and how
    for source in fonts:
        for size in sizes:
            px = max(6, round(size * height / 32))
            for stroke in strokes:
                glyphs = _render_digits(source, px, stroke, height)
                if glyphs is None:
                    continue
                u, how, old = torch.rand(3, generator=zeros).tolist()
                if u < marked:
                    glyphs[0] = mark_zero(glyphs[0], "dot" if how < 0.5 else "slash")
                if old < oldstyle:
                    glyphs = oldstyle_figures(glyphs, round(0.8 * height))
                base.extend(glyphs)
                names.append(f"{Path(source).stem}@{px}/{stroke}")
    if not names:
        raise UserError("data.fonts: none of the fonts renders the ten digits")
    wg = math.ceil(1.5 * max(1.0, stretch[1]) * max(g.shape[1] for g in base)) + 4
    padded = torch.zeros(len(base), height, wg)
    for i, g in enumerate(base):  # centred, so that rotation and shear stay inside
        left = (wg - g.shape[1]) // 2
        padded[i, :, left : left + g.shape[1]] = g
    gen = torch.Generator().manual_seed(8)  # the bank is part of the data definition
    var = _affine_variants(padded, variants, scale, stretch, shear, rotation, v_offset, gen)
    var = var.clamp_(0, 1)  # (N, V, H, Wg)
    levels = _blur_levels(list(blur))
    aligned = [_left_align(_gaussian_blur(var.reshape(-1, height, wg), s)) for s in levels]
    w_used = int(max(w.max() for _, w in aligned))
    n, r, k = len(base), len(names), len(levels)
    columns = torch.stack([c[:, :w_used].view(n, variants, w_used, height) for c, _ in aligned], 1)
    columns = columns.reshape(r, 10, k, variants, w_used, height).transpose(1, 2)
    widths = torch.stack([w.reshape(n, variants) for _, w in aligned], 1)  # (N, K, V)
    widths = widths.reshape(r, 10, k, variants).transpose(1, 2)
    return GlyphBank(columns.contiguous(), widths.contiguous(), tuple(names), tuple(levels))


def _left_align(glyphs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N*V, H, Wg) ink -> columns (N*V, Wg, H) uint8 starting at the first ink column,
    and the ink widths (N*V,)."""
    h, wg = glyphs.shape[1:]
    inked = glyphs.amax(dim=1) > 0.1  # (N*V, Wg)
    cols = torch.arange(wg)
    first = torch.where(inked, cols, wg).amin(-1).clamp(max=wg - 1)
    last = torch.where(inked, cols, -1).amax(-1)
    widths = (last - first + 1).clamp(min=1)
    src = (cols + first[:, None]).clamp(max=wg - 1)  # (N*V, Wg)
    aligned = torch.gather(glyphs, 2, src[:, None, :].expand(-1, h, -1))
    aligned = aligned * (cols < widths[:, None, None])
    columns = (aligned.transpose(1, 2) * 255).round().to(torch.uint8)
    return columns, widths


@functools.lru_cache(maxsize=8)
def _noise_windows(height: int, width: int) -> torch.Tensor:
    """(4096, H*W) overlapping windows of one fixed N(0, 1) texture.

    Drawing a window per strip costs a copy instead of fresh Gaussian draws for every pixel;
    which window a strip gets comes from the caller's generator.
    """
    step = 61
    gen = torch.Generator().manual_seed(61)
    tex = torch.randn(4096 * step + height * width, generator=gen)
    return tex.unfold(0, height * width, step)[:4096]


# ---------------------------------------------------------------------------------------------
# Synthesis


def _uniform(lo_hi, n: int, gen: torch.Generator) -> torch.Tensor:
    lo, hi = float(lo_hi[0]), float(lo_hi[1])
    return lo + (hi - lo) * torch.rand(n, generator=gen)


def _randint(lo_hi, shape, gen: torch.Generator) -> torch.Tensor:
    lo, hi = int(lo_hi[0]), int(lo_hi[1])
    return torch.randint(lo, hi + 1, shape, generator=gen)


class StripSynth:
    """Renders digit strings into strips with the variation the config asks for."""

    def __init__(self, data: DataConfig):
        self.data = data
        self.bank = glyph_bank(data)
        lo, hi = data.gap
        if lo > hi or data.margin[0] > data.margin[1] or data.margin[0] < 0:
            raise UserError("data.gap and data.margin must be [low, high] with low <= high")

    def random_strings(self, lengths: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """(B,) lengths -> (B, L) digits with -1 past each length."""
        lmax = int(lengths.max())
        digits = torch.randint(0, 10, (len(lengths), lmax), generator=gen)
        return torch.where(torch.arange(lmax)[None] < lengths[:, None], digits, -1)

    def sample(
        self, lengths: torch.Tensor, gen: torch.Generator, augment: bool = False
    ) -> StripBatch:
        """Strips of random digits with the given lengths."""
        return self.render(self.random_strings(lengths, gen), gen, augment)

    def render(
        self, digits: torch.Tensor, gen: torch.Generator, augment: bool = False
    ) -> StripBatch:
        """(B, L) digit ids (-1 = none) -> strips. Every random draw is batched.

        ``augment``: also the whole-strip variation (``vary_strips``, paper shading), which
        the training stream gets and fixed sets (validation, test, probes, exports) do not.
        """
        d = self.data
        bank = self.bank
        b, lmax = digits.shape
        r, k, _, v, wg, h = bank.columns.shape
        valid = digits >= 0  # (B, L)
        rows = torch.arange(b)
        # One typeface (font, size, stroke) and blur level per strip, a variant per glyph.
        rendering = torch.randint(0, r, (b,), generator=gen)
        level = torch.randint(0, k, (b,), generator=gen)
        variant = torch.randint(0, v, (b, lmax), generator=gen)
        flat = ((rendering * k + level)[:, None] * 10 + digits.clamp(min=0)) * v + variant
        widths = bank.widths.reshape(-1)[flat] * valid  # (B, L)
        gaps = _randint(d.gap, (b, lmax), gen) * valid
        margins = _randint(d.margin, (b, 2), gen)
        advance = (widths + gaps).clamp(min=0) * valid
        last = (valid.sum(1) - 1).clamp(min=0)  # the last glyph's gap is not in the strip
        advance[rows, last] = widths[rows, last]
        starts = margins[:, :1] + torch.cumsum(advance, 1) - advance  # (B, L)
        strip_w = starts[rows, last] + widths[rows, last] + margins[:, 1]
        strip_w = torch.maximum(strip_w, margins.sum(1) + 1)
        wmax = int(strip_w.max())
        # Add every glyph's columns onto a column-major canvas (B * W, H) in one index_add_.
        canvas_w = wmax + wg
        canvas = torch.zeros(b * canvas_w, h)
        glyphs = bank.columns.reshape(-1, wg, h)[flat[valid]]  # (G, Wg, H) uint8
        first_col = rows[:, None] * canvas_w + starts  # (B, L)
        idx = first_col[valid][:, None] + torch.arange(wg)  # (G, Wg)
        canvas.index_add_(0, idx.reshape(-1), glyphs.reshape(-1, h).float())
        ink = canvas.view(b, canvas_w, h).transpose(1, 2).mul(1 / 255.0).clamp_(max=1.0)
        if augment:
            ink = vary_strips(ink, strip_w, d, gen)  # (B, H, W + Wg), 1 = full ink
        # Per-strip appearance: paper level (shaded when augmenting), ink contrast, noise.
        paper = _uniform(d.background, b, gen)[:, None, None]
        contrast = _uniform(d.contrast, b, gen)[:, None, None]
        noise_sd = _uniform(d.noise, b, gen)[:, None]
        if augment:
            paper = paper * _shading(strip_w, canvas_w, d.shading, gen)[:, None, :]  # (B, 1, W)
        pixels = paper - paper * contrast * ink
        if float(noise_sd.max()) > 0:
            windows = _noise_windows(h, canvas_w)
            pick = torch.randint(0, windows.shape[0], (b,), generator=gen)
            pixels = pixels + (noise_sd * windows[pick]).view(b, h, canvas_w)
        pixels.clamp_(0.0, 1.0)
        outside = torch.arange(canvas_w) >= strip_w[:, None]  # (B, W + Wg)
        pixels.masked_fill_(outside[:, None, :], 1.0)
        images = pixels[:, :, :wmax].contiguous()  # (B, H, W)
        spans = torch.stack([starts, starts + widths], -1) * valid[..., None]
        labels = ["".join(DIGITS[i] for i in row if i >= 0) for row in digits.tolist()]
        return StripBatch(images, strip_w, labels, spans)


def _levels(lo_hi) -> list[float]:
    """Three levels across a [low, high] range (one when it is a single value)."""
    lo, hi = float(lo_hi[0]), float(lo_hi[1])
    return [lo] if hi - lo < 1e-6 else [lo, (lo + hi) / 2, hi]


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
    level = _uniform(d.ink_level, b, gen)
    scale = _uniform(d.strip_scale, b, gen)
    shift = _uniform([-d.strip_shift, d.strip_shift], b, gen)
    amp = _uniform([0.0, d.wave], b, gen)
    period = _uniform([3.0 * h, 8.0 * h], b, gen)  # px along the strip
    phase = _uniform([0.0, 2 * math.pi], b, gen)
    levels = _levels(d.resample)
    resampled = torch.randint(0, len(levels), (b,), generator=gen)

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
    for i, f in enumerate(levels):
        rows = resampled == i
        if f >= 1.0 - 1e-6 or not bool(rows.any()):
            continue
        small = F.interpolate(
            ink[rows][:, None], size=(max(4, round(h * f)), max(1, round(w * f))), mode="area"
        )
        ink[rows] = F.interpolate(small, size=(h, w), mode="bilinear", align_corners=False)[:, 0]
    return ink.clamp_(0.0, 1.0)


def _shading(widths: torch.Tensor, canvas_w: int, amount: float, gen: torch.Generator):
    """(B, W) paper factor: 1 at one end of the strip, down to 1 - a at the other
    (a drawn in [0, amount], the direction at random): uneven light on the page."""
    b = len(widths)
    a = _uniform([0.0, amount], b, gen)
    flip = torch.rand(b, generator=gen) < 0.5
    ramp = (torch.arange(canvas_w)[None] / widths[:, None].clamp(min=1)).clamp(max=1.0)
    ramp = torch.where(flip[:, None], 1.0 - ramp, ramp)
    return 1.0 - a[:, None] * ramp


def set_seed(base: int, purpose: str, length: int) -> int:
    """A stable seed for the fixed set of one purpose ("val", "test") and length."""
    digest = hashlib.sha256(f"{base}/{purpose}/{length}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 62) - 1)


def fixed_set(synth: StripSynth, purpose: str, length: int, n: int) -> StripBatch:
    """The fixed strips of one length: identical for every reader, run and machine."""
    gen = torch.Generator().manual_seed(set_seed(synth.data.eval_seed, purpose, length))
    return synth.sample(torch.full((n,), length, dtype=torch.long), gen)


class TrainStream:
    """An endless stream of training batches drawn from the seen lengths."""

    def __init__(self, synth: StripSynth, seen: list[int], batch_size: int, seed: int):
        self.synth = synth
        self.seen = torch.tensor(seen, dtype=torch.long)
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> StripBatch:
        """A batch of training strips, with the whole-strip variation (augmentation)."""
        pick = torch.randint(0, len(self.seen), (self.batch_size,), generator=self.generator)
        return self.synth.sample(self.seen[pick], self.generator, augment=True)

    def state(self) -> torch.Tensor:
        return self.generator.get_state()

    def load_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)
