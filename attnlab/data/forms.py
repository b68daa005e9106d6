"""The digit forms some typefaces have, drawn from a font's plain glyphs: marked zeros (a dot
or a slash), footless ones (Arial's 1) and old-style figures (Georgia's). The glyph bank
(``attnlab.data.glyphs``) gives each to a share of its renderings.

A glyph is (H, w) ink in [0, 1] (float64, as ``glyphs.render_chars`` draws it). Every form is
computed in float64 with thresholds on the glyph's own values, so that it is the same on
every CPU (``attnlab.data.warp``).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.data.warp import resize_linear

DIGITS = "0123456789"


def mark_zero(glyph: torch.Tensor, how: str) -> torch.Tensor:
    """A zero (H, w) ink in [0, 1] with a dot in its counter or a slash across it, drawn in
    its own stroke width: the zeros of many monospaced and programming typefaces."""
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
    ink = np.rint(glyph.double().numpy() * 255).clip(0, 255).astype(np.uint8)
    image = Image.fromarray(ink)
    draw = ImageDraw.Draw(image)
    cx, cy, tall = (w - 1) / 2, (top + bottom) / 2, bottom - top
    if how == "dot":
        rx, ry = max(0.6, 0.45 * stroke), max(0.8, 0.12 * tall)
        draw.ellipse((cx - rx, cy - ry, cx + rx, cy + ry), fill=255)
    else:
        start = (0.8 * (w - 1), top + 0.15 * tall)
        draw.line((*start, 0.2 * (w - 1), bottom - 0.15 * tall), fill=255, width=stroke)
    return torch.from_numpy(np.asarray(image, dtype=np.float64) / 255.0)


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
        small = resize_linear(g[top:baseline].double().numpy(), new_h, new_w)
        bottom = baseline if d in _SMALL else baseline + round(0.3 * cap)
        bottom = min(bottom, h)
        placed = np.zeros((h, new_w))
        placed[bottom - min(new_h, bottom) : bottom] = small[new_h - min(new_h, bottom) :]
        out.append(torch.from_numpy(placed.clip(0, 1)))
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
    cols = torch.arange(glyph.shape[1], dtype=torch.float64)
    out = glyph.clone()
    for r in range(r_ref + 1, bottom + 1):
        out[r, (cols - (ref[0] + slope * (r - r_ref))).abs() > ref[1] / 2 + 1] = 0
    return out if float((glyph - out).amax()) >= 0.5 else glyph  # no foot: as it was
