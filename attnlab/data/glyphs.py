"""Glyphs: the characters of ``data.charset`` (the ten digits by default) rendered in a font
(``attnlab.data.fonts``), the digit forms some typefaces have (marked zeros, footless ones,
old-style figures), and the glyph bank every strip is drawn from.

A font lacks a character when it draws no ink for it or its placeholder (.notdef, drawn for
code points no font maps); a rendering (font, size, stroke) enters the bank only if it has
every character of the charset, and a character that no font has is refused in one line.
The bank holds every character of every such rendering in geometric variants (scale,
stretch, shear, rotation, vertical shift) and blur levels, built once per process from a
fixed seed: it is part of the data definition, the same on every machine (fonts shipped
inside Python packages: Pillow, matplotlib, ReportLab and the font packages).
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.config import DataConfig
from attnlab.data.fonts import load_font, resolve_fonts
from attnlab.data.ranges import levels
from attnlab.errors import UserError

DIGITS = "0123456789"


# Code points no font maps: a font draws its placeholder (.notdef: a box, or nothing) for
# them, as it does for every character it lacks. U+FFFF is a noncharacter; U+F0001 is in
# Supplementary Private Use Area-A (the BMP's private-use U+E000 is a glyph in Fira Mono).
NOT_CHARACTERS = "\uffff\U000f0001"


def _render(font, ch: str, size: int, stroke: int, height: int) -> torch.Tensor | None:
    """One character tight-cropped to its ink columns (height, w) in [0, 1]; None: no ink."""
    import numpy as np
    from PIL import Image, ImageDraw

    baseline = round(0.8 * height)
    canvas = Image.new("L", (3 * size + 4 * stroke + 8, height), 0)
    ImageDraw.Draw(canvas).text(
        (4 + stroke, baseline), ch, font=font, fill=255, anchor="ls",
        stroke_width=stroke, stroke_fill=255,
    )  # fmt: skip
    ink = torch.from_numpy(np.asarray(canvas, dtype=np.float32) / 255.0)
    cols = torch.nonzero(ink.sum(0) > 0.05).flatten()
    if len(cols) == 0:
        return None
    return ink[:, int(cols[0]) : int(cols[-1]) + 1]


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)


def render_chars(
    source: str, size: int, stroke: int, height: int, charset: str = DIGITS
) -> list[torch.Tensor | None]:
    """Each character of ``charset`` tight-cropped (height, w) as ink in [0, 1], or None
    where the font lacks it: no ink, or the font's placeholder (what it draws for
    ``NOT_CHARACTERS``). A font that draws one and the same glyph for every character of
    the charset lacks them all (a placeholder box of its own)."""
    font = load_font(source, size)
    placeholders = [_render(font, c, size, stroke, height) for c in NOT_CHARACTERS]
    glyphs = [_render(font, c, size, stroke, height) for c in charset]
    glyphs = [None if any(_same(g, p) for p in placeholders) else g for g in glyphs]
    drawn = [g for g in glyphs if g is not None]
    if len(charset) > 1 and len(drawn) == len(charset):
        if all(_same(g, drawn[0]) for g in drawn[1:]):
            return [None] * len(charset)
    return glyphs


def render_digits(source: str, size: int, stroke: int, height: int) -> list[torch.Tensor] | None:
    """Ten tight-cropped glyphs (height, w) as ink in [0, 1]; None if the font lacks digits."""
    glyphs = render_chars(source, size, stroke, height, DIGITS)
    return None if any(g is None for g in glyphs) else glyphs


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


def oldstyle_figures(
    glyphs: list[torch.Tensor], baseline: int, charset: str = DIGITS
) -> list[torch.Tensor]:
    """The glyphs (H, w) of ``charset`` standing on ``baseline`` -> the digits' old-style
    forms: small ones shrunk to 70% of the height onto the baseline, descending ones shrunk
    to 90% and moved down by 30% of the height (clipped at the image's bottom); 6, 8 and
    every character that is not a digit unchanged."""
    out = []
    for c, g in zip(charset, glyphs, strict=True):
        d = DIGITS.index(c) if c in DIGITS else -1
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


def _stem(row: torch.Tensor) -> tuple[float, int] | None:
    """(centre, width) of the widest run of ink in a row of a glyph, or None."""
    cols = torch.nonzero(row > 0.5).flatten().tolist()
    if not cols:
        return None
    runs, start = [], cols[0]
    for a, b in zip(cols, [*cols[1:], None], strict=True):
        if b != a + 1:
            runs.append((start, a))
            start = b
    lo, hi = max(runs, key=lambda r: r[1] - r[0])
    return (lo + hi) / 2, hi - lo + 1


def footless_one(glyph: torch.Tensor) -> torch.Tensor:
    """A one (H, w) ink in [0, 1] without the foot (base serif or slab) it stands on, as
    Arial and Helvetica draw it: in the bottom fifth of its height only the stem is kept,
    followed along its slant (oblique and italic ones too). A one without a foot is returned
    as it is."""
    rows = torch.nonzero(glyph.amax(1) > 0.5).flatten()
    if len(rows) < 8:
        return glyph
    top, bottom = int(rows[0]), int(rows[-1])
    tall = bottom - top + 1
    r_mid, r_ref = top + tall // 2, bottom - max(1, round(0.2 * tall))  # r_ref: above a foot
    mid, ref = _stem(glyph[r_mid]), _stem(glyph[r_ref])
    if mid is None or ref is None or r_ref <= r_mid:
        return glyph
    slope = (ref[0] - mid[0]) / (r_ref - r_mid)  # columns the stem moves per row
    cols = torch.arange(glyph.shape[1], dtype=torch.float32)
    out = glyph.clone()
    for r in range(r_ref + 1, bottom + 1):
        out[r, (cols - (ref[0] + slope * (r - r_ref))).abs() > ref[1] / 2 + 1] = 0
    return out if float((glyph - out).amax()) >= 0.5 else glyph  # no foot: as it was


def _variant_params(n: int, v: int, scale, stretch, shear, rotation, v_offset: int, gen):
    """(N, V, 5) scale, shear, rotation (degrees), vertical shift (px) and stretch of every
    variant of N glyphs, each drawn from its configured [low, high] range; variant 0 is the
    glyph unchanged."""
    u = torch.rand(n, v, 5, generator=gen)
    lo = torch.tensor([scale[0], shear[0], rotation[0], -v_offset, stretch[0]])
    hi = torch.tensor([scale[1], shear[1], rotation[1], v_offset, stretch[1]])
    p = lo.float() + u * (hi - lo).float()
    p[:, 0] = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0])
    return p


def _elastic_fields(n: int, v: int, elastic: float, gen: torch.Generator) -> torch.Tensor:
    """(N, V, 2, 4, 4) coarse displacements (x, y) in pixels, each within +-``elastic``, of
    every variant of N glyphs; variant 0 is not warped. Smoothly upsampled over the glyph,
    they bend strokes (Simard et al.'s elastic distortion, smooth at a glyph's scale)."""
    d = (torch.rand(n, v, 2, 4, 4, generator=gen) * 2 - 1) * elastic
    d[:, 0] = 0.0
    return d


def _affine_variants(
    glyphs: torch.Tensor, p: torch.Tensor, elastic: torch.Tensor | None = None
) -> torch.Tensor:
    """(N, H, Wg) glyphs and their (N, V, 5) ``_variant_params`` -> (N, V, H, Wg): each
    scaled, stretched horizontally, sheared, rotated and shifted vertically, then bent by
    its (N, V, 2, 4, 4) ``_elastic_fields`` when given."""
    n, h, wg = glyphs.shape
    v = p.shape[1]
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
    if elastic is not None:  # pixels -> normalised units, smooth over the glyph's box
        coarse = elastic.reshape(n * v, 2, 4, 4)
        field = F.interpolate(coarse, size=(h, wg), mode="bicubic", align_corners=True)
        scale_xy = torch.tensor([2.0 / wg, 2.0 / h]).view(1, 2, 1, 1)
        grid = grid + (field * scale_xy).permute(0, 2, 3, 1)
    out = F.grid_sample(src, grid, align_corners=False, padding_mode="zeros")
    return out.reshape(n, v, h, wg)


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
    """Every character of the charset (``data.charset``) in every font, size and stroke
    that renders all of them, in geometric variants and blur levels.

    Stored column-major, (..., Wg, H), so that placing a glyph adds whole columns.
    """

    columns: torch.Tensor  # (R, K, C, V, Wg, H) uint8 ink, left-aligned on the first ink column
    widths: torch.Tensor  # (R, K, C, V) int64 ink width of each glyph
    renderings: tuple[str, ...]  # "font@size/stroke" for each of the R renderings
    blur_levels: tuple[float, ...]  # the K blur sigmas


def _bank_key(data: DataConfig) -> tuple:
    fonts = tuple(resolve_fonts(data))
    return (
        data.height, fonts, tuple(data.font_sizes), tuple(data.stroke_widths), data.variants,
        tuple(data.scale), tuple(data.stretch), tuple(data.shear), tuple(data.rotation),
        data.v_offset, tuple(data.blur), float(data.marked_zeros), float(data.oldstyle),
        float(data.footless_ones), float(data.elastic), str(data.charset),
    )  # fmt: skip


def glyph_bank(data: DataConfig) -> GlyphBank:
    """The bank for this config: built once per process, and kept on disk for the next
    (``attnlab.data.bank_cache``; ``ATTNLAB_CACHE=off`` builds it every time)."""
    return _bank(_bank_key(data))


@functools.lru_cache(maxsize=4)
def _bank(key: tuple) -> GlyphBank:
    from attnlab.data import bank_cache, fonts, ranges

    code = (sys.modules[__name__], fonts, ranges)  # what draws it
    digest = bank_cache.bank_digest(key, code, key[1])  # key[1]: the font sources
    return bank_cache.load_or_build(digest, lambda: _build_bank(key), _shape(key))


def _px(size: int, height: int) -> int:
    """A font size of data.font_sizes (px at height 32) at this strip height."""
    return max(6, round(size * height / 32))


def _shape(key: tuple):
    """The shape of the bank of ``key`` (``bank_cache.Shape``): what a stored one must have."""
    from attnlab.data.bank_cache import Shape

    height, fonts, sizes, strokes, variants, blur, charset = (
        key[i] for i in (0, 1, 2, 3, 4, 10, 15)
    )
    names = {f"{Path(f).stem}@{_px(s, height)}/{k}" for f in fonts for s in sizes for k in strokes}
    return Shape(height, len(charset), variants, tuple(levels(blur)), frozenset(names))


_BANK_CHUNK = 256  # glyphs warped and blurred at a time


def _build_bank(key: tuple) -> GlyphBank:
    (height, fonts, sizes, strokes, variants, scale, stretch, shear, rotation, v_offset, blur,
     marked, oldstyle, footless, elastic, charset) = key  # fmt: skip
    if variants < 1:
        raise UserError(f"data.variants must be >= 1, got {variants}")
    base: list[torch.Tensor] = []
    names: list[str] = []
    zeros = torch.Generator().manual_seed(10)  # which renderings mark their zero, and how
    ones = torch.Generator().manual_seed(11)  # which renderings' ones lose their foot
    drawn: set[str] = set()  # the characters some rendering has
    for source in fonts:
        for size in sizes:
            px = _px(size, height)
            for stroke in strokes:
                chars = render_chars(source, px, stroke, height, charset)
                drawn.update(c for c, g in zip(charset, chars, strict=True) if g is not None)
                if any(g is None for g in chars):  # a strip is drawn in one typeface
                    continue
                glyphs: list[torch.Tensor] = list(chars)
                u, how, old = torch.rand(3, generator=zeros).tolist()
                if u < marked and "0" in charset:
                    i = charset.index("0")
                    glyphs[i] = mark_zero(glyphs[i], "dot" if how < 0.5 else "slash")
                if float(torch.rand(1, generator=ones)) < footless and "1" in charset:
                    i = charset.index("1")
                    glyphs[i] = footless_one(glyphs[i])
                if old < oldstyle:
                    glyphs = oldstyle_figures(glyphs, round(0.8 * height), charset)
                base.extend(glyphs)
                names.append(f"{Path(source).stem}@{px}/{stroke}")
    lacking = [c for c in charset if c not in drawn]
    if lacking:
        codes = ", ".join(f"U+{ord(c):04X}" for c in lacking)
        raise UserError(
            f"data.charset: no font of data.fonts renders {''.join(lacking)!r} ({codes}); "
            f"remove it from data.charset or add a font that has it to data.fonts"
        )
    if not names:
        raise UserError(
            f"data.fonts: no font renders all of data.charset={charset!r} together (a strip "
            f"is drawn in one typeface); add a font that has them all to data.fonts"
        )
    wg = math.ceil(1.5 * max(1.0, stretch[1]) * max(g.shape[1] for g in base)) + 4
    padded = torch.zeros(len(base), height, wg)
    for i, g in enumerate(base):  # centred, so that rotation and shear stay inside
        left = (wg - g.shape[1]) // 2
        padded[i, :, left : left + g.shape[1]] = g
    gen = torch.Generator().manual_seed(8)  # the bank is part of the data definition
    n, r = len(base), len(names)
    params = _variant_params(n, variants, scale, stretch, shear, rotation, v_offset, gen)
    fields = _elastic_fields(n, variants, elastic, gen) if elastic > 0 else None
    sigmas = levels(blur)  # the Gaussian sigmas a strip can be blurred with
    k = len(sigmas)
    # Glyphs in chunks, each kept as uint8 once done: the float transients of warping and
    # blurring stay a chunk's size, whatever the number of fonts.
    columns_of, widths_of = [], []
    for lo in range(0, n, _BANK_CHUNK):
        part = slice(lo, lo + _BANK_CHUNK)
        var = _affine_variants(padded[part], params[part], None if fields is None else fields[part])
        var = var.clamp_(0, 1).reshape(-1, height, wg)  # (c * V, H, Wg)
        aligned = [_left_align(_gaussian_blur(var, s)) for s in sigmas]
        columns_of.append(torch.stack([c.view(-1, variants, wg, height) for c, _ in aligned], 1))
        widths_of.append(torch.stack([w.view(-1, variants) for _, w in aligned], 1))
    widths = torch.cat(widths_of)  # (N, K, V)
    w_used = int(widths.max())
    columns = torch.cat([c[..., :w_used, :] for c in columns_of])  # (N, K, V, w_used, H)
    c = len(charset)
    columns = columns.reshape(r, c, k, variants, w_used, height).transpose(1, 2)
    widths = widths.reshape(r, c, k, variants).transpose(1, 2)
    return GlyphBank(columns.contiguous(), widths.contiguous(), tuple(names), tuple(sigmas))


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
