"""The glyphs of a cluttered strip (``data.clutter``, ``attnlab.data.clutter``), each on its
own: rotated (up to ``ROTATION`` degrees, the strip's own maximum drawn first), scaled
(``SCALE``), moved up or down (``LIFT`` px at height 32), bent by a smooth elastic field
(Simard et al. 2003; up to ``ELASTIC`` px at height 32, the strip's own amplitude drawn
first), leaning by the strip's slant (a shear of up to ``SLANT``, alike for every glyph, as
a writer's hand leans) and inked at its own tone (``TONE`` of full ink); the gaps between
them drawn from ``GAP`` px, so that glyphs overlap (negative gaps) or stand apart, and up to
``MARGIN`` px more room at each end (where the noise goes on: a reader learns that it is no
digit). ``draw_layout`` draws a batch's geometry from the stream's generator (a fixed number
of draws, whichever strips are cluttered); ``bend`` applies it to the glyph bank's glyphs;
a glyph's span is its ink's columns after bending (``INKED``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnlab.data.augment import _sample
from attnlab.data.ranges import uniform

# Glyphs (px at height 32; scaled with the height).
GAP = (-5, 6)  # px between neighbours, both included (< 0: overlapping)
MARGIN = 20  # the most px added to each end (captchas leave room, with noise in it)
ROTATION = 25.0  # degrees: a strip's maximum drawn in [0, ROTATION], each glyph's within it
SCALE = (0.85, 1.3)
LIFT = 2.5  # px up or down
ELASTIC = 2.0  # px: a strip's amplitude drawn in [0, ELASTIC]
SLANT = 0.25  # columns of lean per row, the strip's, drawn in [-SLANT, SLANT]
TONE = (0.8, 1.0)  # share of full ink a glyph is drawn with
INKED = 25.0  # of 255: a glyph column with more ink than this is part of the glyph


@dataclass
class Layout:
    """The glyph draws of a batch of B strips of at most L glyphs: which strips are
    cluttered, and each glyph's gap, geometry and tone (all (B, L) unless said)."""

    rows: torch.Tensor  # (B,) bool: the strips drawn with clutter
    margins: torch.Tensor  # (B, 2) int64 px added left and right
    gaps: torch.Tensor  # int64 px after each glyph
    rotation: torch.Tensor  # radians
    slant: torch.Tensor  # columns per row, alike along a strip
    scale: torch.Tensor
    lift: torch.Tensor  # px, > 0 moves the glyph down
    field: torch.Tensor  # (B, L, 2, 4, 4) elastic displacements, px
    tone: torch.Tensor


def draw_layout(b: int, length: int, h: int, share: float, gen: torch.Generator) -> Layout:
    """The glyph draws of B strips of up to ``length`` glyphs at height ``h`` px, a share
    ``share`` of them cluttered; a fixed number of draws, whichever strips are."""
    px = h / 32.0
    rows = torch.rand(b, generator=gen) < share
    margins = (torch.rand(b, 2, generator=gen) * MARGIN * px).long()
    gaps = (torch.randint(GAP[0], GAP[1] + 1, (b, length), generator=gen) * px).round().long()
    most = uniform([0.0, math.radians(ROTATION)], b, gen)[:, None]
    rotation = (torch.rand(b, length, generator=gen) * 2 - 1) * most
    slant = uniform([-SLANT, SLANT], b, gen)[:, None].expand(b, length)
    scale = SCALE[0] + (SCALE[1] - SCALE[0]) * torch.rand(b, length, generator=gen)
    lift = (torch.rand(b, length, generator=gen) * 2 - 1) * LIFT * px
    amp = uniform([0.0, ELASTIC * px], b, gen)[:, None, None, None, None]
    field = (torch.rand(b, length, 2, 4, 4, generator=gen) * 2 - 1) * amp
    tone = TONE[0] + (TONE[1] - TONE[0]) * torch.rand(b, length, generator=gen)
    return Layout(rows, margins, gaps, rotation, slant.contiguous(), scale, lift, field, tone)


def bend(glyphs: torch.Tensor, widths: torch.Tensor, valid: torch.Tensor, lay: Layout):
    """The glyphs of the cluttered strips bent as ``lay`` says.

    ``glyphs`` (G, Wg, H): the columns of the valid glyphs (``valid`` (B, L), row by row)
    in 0..255, each starting at its first inked column; ``widths`` (B, L) their ink widths.
    Returns the glyphs (G, Wg + 2P, H) as floats in 0..255, again each from its first inked
    column, and their widths (B, L)."""
    g, wg, h = glyphs.shape
    pad = math.ceil(0.5 * h * math.sin(math.radians(ROTATION)) + 0.15 * h) + 2
    out = F.pad(glyphs.float(), (0, 0, 0, 2 * pad))  # (G, Wg + 2P, H), left-aligned
    hit = lay.rows[:, None].expand_as(valid)[valid]  # (G,) glyphs of cluttered strips
    if not bool(hit.any()):
        return out, widths
    pick = valid & lay.rows[:, None]  # (B, L)
    inked = int(widths[pick].max())  # past it, every glyph's columns are empty
    img = F.pad(glyphs[hit, :inked].float().transpose(1, 2), (pad, pad))  # (g', H, w + 2P)
    img = _transform(img, widths[pick].float() / 2 + pad, pick, lay) * lay.tone[pick, None, None]
    cols, ink_w = _left_aligned(img)  # (g', w + 2P, H)
    out[hit, : cols.shape[1]] = cols
    out[hit, cols.shape[1] :] = 0.0
    widths = widths.clone()
    widths[pick] = ink_w
    return out, widths


def _transform(img: torch.Tensor, cx: torch.Tensor, pick: torch.Tensor, lay: Layout):
    """Glyph images (g, H, Wp) rotated, slanted, scaled and lifted about (``cx`` (g,), the
    middle row), then bent by their elastic fields."""
    n, h, w = img.shape
    rot, slant, scale = lay.rotation[pick], lay.slant[pick], lay.scale[pick]
    c, s = torch.cos(rot)[:, None, None], torch.sin(rot)[:, None, None]
    xs = torch.arange(w, dtype=torch.float32)[None, None, :] - cx[:, None, None]  # (g, 1, Wp)
    ys = torch.arange(h, dtype=torch.float32)[None, :, None] - (h - 1) / 2
    ys = ys - lay.lift[pick][:, None, None]  # (g, H, 1)
    u, v = c * xs + s * ys, -s * xs + c * ys  # the rotation undone
    u = u + slant[:, None, None] * v  # the lean undone (rows above the middle lean right)
    k = scale[:, None, None]
    # Smooth between the 4 x 4 nodes: bicubic (corners aligned), as two small matrices.
    rows, cols = resizer(4, h, "bicubic", True), resizer(4, w, "bicubic", True)
    bent = rows @ lay.field[pick] @ cols.T  # (g, 2, H, Wp)
    src_x = u / k + cx[:, None, None] + bent[:, 0]
    src_y = v / k + (h - 1) / 2 + bent[:, 1]
    return _sample(img, src_x, src_y).clamp_(0.0, 255.0)


def _left_aligned(img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Glyph images (g, H, Wp) -> their columns (g, Wp, H) from the first inked one (zero
    past the last) and their ink widths (g,)."""
    g, h, w = img.shape
    inked = img.amax(1) > INKED  # (g, Wp)
    cols = torch.arange(w)
    first = torch.where(inked, cols, w).amin(1).clamp(max=w - 1)
    last = torch.where(inked, cols, -1).amax(1)
    ink_w = (last - first + 1).clamp(min=1)
    src = (cols[None] + first[:, None]).clamp(max=w - 1)  # (g, Wp)
    moved = img.gather(2, src[:, None, :].expand(g, h, w))
    moved = moved.masked_fill(cols[None, None, :] >= ink_w[:, None, None], 0.0)
    return moved.transpose(1, 2).contiguous(), ink_w


# ---------------------------------------------------------------------------------------------
# Paper, ink, noise and damage of the cluttered strips


@functools.lru_cache(maxsize=64)
def resizer(n_in: int, n_out: int, mode: str, align: bool) -> torch.Tensor:
    """(n_out, n_in) the map ``F.interpolate`` (``mode``, ``align_corners``) makes of a line
    of n_in values: resizing an image is this on its rows and its columns (separable)."""
    unit = torch.eye(n_in).view(n_in, 1, n_in, 1)  # one image per input value lit
    out = F.interpolate(unit, size=(n_out, 1), mode=mode, align_corners=align)
    return out.view(n_in, n_out).T.contiguous()
