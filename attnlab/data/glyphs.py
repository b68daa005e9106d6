"""Glyphs: the characters of ``data.charset`` (the ten digits by default) rendered in a font
(``attnlab.data.fonts``), and the glyph bank every strip is drawn from: each rendering with
the digit forms some typefaces have (``attnlab.data.forms``), warped and blurred
(``attnlab.data.warp``), kept on disk by ``attnlab.data.bank_cache``.

A font lacks a character when it draws no ink for it or its placeholder (.notdef, drawn for
code points no font maps); a rendering (font, size, stroke) enters the bank only if it has
every character of the charset, and a character that no font has is refused in one line.
The bank holds every character of every such rendering in geometric variants (scale,
stretch, shear, rotation, vertical shift) and blur levels, built once per process from a
fixed seed: it is part of the data definition, the same on every machine (fonts shipped
inside Python packages: Pillow, matplotlib, ReportLab and the font packages). Its arithmetic
is float64, one elementwise step at a time, rounded to uint8 once (``attnlab.data.warp``):
no CPU's vector width or kernel choice moves a pixel of it.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np
import torch

from attnlab.config import DataConfig
from attnlab.data import bank_cache, forms, warp
from attnlab.data.bank_cache import GlyphBank, bank_key, px, shape_of
from attnlab.data.fonts import load_font
from attnlab.data.forms import DIGITS, footless_one, mark_zero, oldstyle_figures
from attnlab.data.ranges import levels
from attnlab.errors import UserError

__all__ = ["DIGITS", "GlyphBank", "glyph_bank", "render_chars", "render_digits"]


# Code points no font maps: a font draws its placeholder (.notdef: a box, or nothing) for
# them, as it does for every character it lacks. U+FFFF is a noncharacter; U+F0001 is in
# Supplementary Private Use Area-A (the BMP's private-use U+E000 is a glyph in Fira Mono).
NOT_CHARACTERS = "\uffff\U000f0001"


def _render(font, ch: str, size: int, stroke: int, height: int) -> torch.Tensor | None:
    """One character tight-cropped to its ink columns (height, w) in [0, 1] (float64);
    None: no ink. A column counts as ink when it holds over 0.05 of a full pixel."""
    from PIL import Image, ImageDraw

    baseline = round(0.8 * height)
    canvas = Image.new("L", (3 * size + 4 * stroke + 8, height), 0)
    ImageDraw.Draw(canvas).text(
        (4 + stroke, baseline),
        ch,
        font=font,
        fill=255,
        anchor="ls",
        stroke_width=stroke,
        stroke_fill=255,
    )
    levels_ = np.asarray(canvas, dtype=np.int64)  # 0..255
    cols = np.flatnonzero(levels_.sum(0) > 12)  # 0.05 of 255, in whole levels
    if len(cols) == 0:
        return None
    return torch.from_numpy(levels_[:, cols[0] : cols[-1] + 1] / 255.0)


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


def glyph_bank(data: DataConfig) -> GlyphBank:
    """The bank for this config: built once per process, and kept on disk for the next
    (``attnlab.data.bank_cache``; ``ATTNLAB_CACHE=off`` builds it every time)."""
    return _bank(bank_key(data))


@functools.lru_cache(maxsize=4)
def _bank(key: tuple) -> GlyphBank:
    from attnlab.data import fonts, ranges

    code = (sys.modules[__name__], forms, warp, fonts, ranges)  # what draws it
    digest = bank_cache.bank_digest(key, code, key[1])  # key[1]: the font sources
    return bank_cache.load_or_build(digest, lambda: build_bank(key), shape_of(key))


def _renderings(key: tuple) -> tuple[list[torch.Tensor], list[str]]:
    """Every character of every rendering (font, size, stroke) that has the whole charset,
    with its digit forms drawn for its share of renderings; and the renderings' names."""
    height, fonts, sizes, strokes = key[:4]
    marked, oldstyle, footless, charset = key[11], key[12], key[13], key[15]
    base: list[torch.Tensor] = []
    names: list[str] = []
    zeros = torch.Generator().manual_seed(10)  # which renderings mark their zero, and how
    ones = torch.Generator().manual_seed(11)  # which renderings' ones lose their foot
    drawn: set[str] = set()  # the characters some rendering has
    for source in fonts:
        for size in sizes:
            size_px = px(size, height)
            for stroke in strokes:
                chars = render_chars(source, size_px, stroke, height, charset)
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
                names.append(f"{Path(source).stem}@{size_px}/{stroke}")
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
    return base, names


# Float64 pixels warped and blurred at a time (256 KB, within a core's L2 cache), but at least
# one glyph's variants: the bank's arithmetic is per image, so the chunk changes no bit, only
# the time (the default bank at 64 px: 23 s of CPU, against 65-71 s 256 glyphs at a time).
_CHUNK_PIXELS = 1 << 15


def build_bank(key: tuple) -> GlyphBank:
    """The bank of ``key`` (``bank_cache.bank_key``), built: the same bit for bit on every
    CPU (``attnlab.data.warp``)."""
    (
        height,
        _,
        _,
        _,
        variants,
        scale,
        stretch,
        shear,
        rotation,
        v_offset,
        blur,
        _,
        _,
        _,
        elastic,
        charset,
    ) = key
    if variants < 1:
        raise UserError(f"data.variants must be >= 1, got {variants}")
    base, names = _renderings(key)
    wg = math.ceil(1.5 * max(1.0, stretch[1]) * max(g.shape[1] for g in base)) + 4
    padded = np.zeros((len(base), height, wg))
    for i, g in enumerate(base):  # centred, so that rotation and shear stay inside
        left = (wg - g.shape[1]) // 2
        padded[i, :, left : left + g.shape[1]] = g.double().numpy()
    gen = torch.Generator().manual_seed(8)  # the bank is part of the data definition
    n, r = len(base), len(names)
    params = warp.variant_params(n, variants, scale, stretch, shear, rotation, v_offset, gen)
    fields = warp.elastic_fields(n, variants, elastic, gen) if elastic > 0 else None
    sigmas = levels(blur)  # the Gaussian sigmas a strip can be blurred with
    k = len(sigmas)
    # Glyphs in chunks, each kept as uint8 once done: the float transients of warping and
    # blurring stay a chunk's size, whatever the number of fonts.
    chunk = max(1, _CHUNK_PIXELS // (variants * height * wg))
    columns_of: list[list[torch.Tensor]] = [[] for _ in sigmas]  # by sigma, then chunk
    widths_of: list[list[torch.Tensor]] = [[] for _ in sigmas]
    for lo in range(0, n, chunk):
        part = slice(lo, lo + chunk)
        bent = None if fields is None else fields[part]
        var = warp.affine_variants(padded[part], params[part], bent)
        var = np.clip(var, 0.0, 1.0).reshape(-1, height, wg)  # (c * V, H, Wg)
        for j, s in enumerate(sigmas):
            cols, ink_widths = warp.left_align(warp.to_ink(warp.gaussian_blur(var, s)))
            columns_of[j].append(cols)
            widths_of[j].append(ink_widths)
    # Joined once, at the end: a torch call per chunk cost more than the chunk's warping.
    widths = torch.stack([torch.cat(w).view(n, variants) for w in widths_of], 1)  # (N, K, V)
    w_used = int(widths.max())
    columns = torch.stack(
        [torch.cat(c).view(n, variants, wg, height)[..., :w_used, :] for c in columns_of], 1
    )  # (N, K, V, w_used, H)
    c = len(charset)
    columns = columns.reshape(r, c, k, variants, w_used, height).transpose(1, 2)
    widths = widths.reshape(r, c, k, variants).transpose(1, 2)
    return GlyphBank(columns.contiguous(), widths.contiguous(), tuple(names), tuple(sigmas))
