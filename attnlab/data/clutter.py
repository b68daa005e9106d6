"""Captcha-like clutter of attnlab's own making (``data.clutter``): a share of the synthetic
training strips drawn as the strips users bring look (captchas, handwriting photographed or
scanned), for pretraining a reader that reads them out of the box. No third-party captcha
image and no handwritten digit is used: every pixel is drawn here from the glyph bank.

A cluttered strip differs from a plain one in four ways:

- its glyphs, each on its own: rotated, scaled, lifted, bent elastically (Simard et al.
  2003), leaning with the strip's slant, inked at their own tone, with gaps that let them
  overlap and room at each end (``attnlab.data.clutter_glyphs``: ``draw_layout``, ``bend``);
- its strokes: thickened by 0, 1 or 2 px (``STROKE``'s shares: a 2 x 2 or 3 x 3 maximum);
- its paper (``paint``): a grey level derived from a colour's (``PAPER``), a linear gradient
  across it in a random direction (``GRADIENT``) and ``BLOTCHES`` soft blotches lighter or
  darker (``BLOTCH``), with the ink ``CONTRAST`` below the paper; noise curves crossing
  the strip (0-3, ``CURVES``: a cubic Bezier in height along the strip plus a sine, each
  ``THICK`` px wide, in the ink's tone or their own) and noise dots (``DOTS`` per square of
  the strip's height, 1-3 px);
- photographic damage: the perspective of a page photographed at a slant, a Gaussian blur,
  pixel noise and JPEG at a quality drawn from ``QUALITY`` (``attnlab.data.photo`` and
  ``attnlab.data.augment.jpeg``), each reaching a strip with its own chance (``DAMAGE``).

Every draw comes from the stream's generator, per strip, and every shape (gradient,
blotches, curves, dots, perspective, blur, JPEG blocks) is laid on the strip's own columns
(``widths``), so a strip is drawn alike batched alone or beside a longer one, and the
padding stays paper. The glyphs' spans stay true: a glyph's span is its ink's columns after
``bend``. Nothing is drawn when ``data.clutter`` is 0 or for the fixed sets (validation,
test, probes), so those and a stream without clutter are exactly as they were.
``data.clutter`` acts where synthetic strips are drawn for training: the synthetic stream,
and the ``data.mix`` share of a ``data=folder`` batch.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from attnlab.data import photo
from attnlab.data.augment import jpeg, outside_columns
from attnlab.data.clutter_glyphs import resizer
from attnlab.data.ranges import uniform

# Strokes, paper and ink (grey, 1 = white).
STROKE = (0.65, 0.3, 0.05)  # shares of strips thickened by 0, 1 and 2 px
PAPER = (0.65, 1.0)
GRADIENT = 0.25  # the most the paper changes across the strip
BLOTCHES, BLOTCH = 5, 0.2  # blotches per strip, each at most this lighter or darker
CONTRAST = (0.4, 0.9)  # ink below the paper
CURVES = (0.3, 0.35, 0.25, 0.1)  # shares of strips crossed by 0, 1, 2 and 3 curves
THICK = (0.6, 1.6)  # px at height 32
DOTS, MAX_DOTS = 10.0, 160  # at most DOTS dots per (height x height) square
DAMAGE = {"perspective": 0.4, "blur": 0.35, "jpeg": 0.4}  # chance of each reaching a strip
BLUR = (0.3, 1.0)  # px
NOISE = 0.04  # the most pixel noise (std)
QUALITY = (20.0, 80.0)
TEXTURE = 4096  # columns of the fixed noise texture a strip's pixel noise is cut from


def paint(ink: torch.Tensor, widths: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Ink (N, H, W) of N cluttered strips (1 = full ink; ``widths`` (N,) columns each) ->
    grey pixels (N, H, W), 1 = paper: thickened, on cluttered paper, crossed by curves and
    dots, damaged. Every draw from ``gen``, in a fixed order."""
    n, h, w = ink.shape
    widths = widths.to(torch.long)
    stroke = torch.multinomial(torch.tensor(STROKE), n, replacement=True, generator=gen)
    paper, base = _paper(widths, h, w, gen)  # (N, H, W), (N,) its darkest level but blotches
    ink_grey = (base - uniform(CONTRAST, n, gen)).clamp(min=0.0)  # (N,)
    noise_ink, noise_grey = _noise_ink(widths, h, w, ink_grey, base, gen)
    hits = {k: torch.rand(n, generator=gen) < p for k, p in DAMAGE.items()}
    corners = photo.OPS["perspective"].draw(n, h, w, gen)
    sigma = uniform(BLUR, n, gen)
    noise_sd = uniform([0.0, NOISE], n, gen)
    field = _grain(h, w, torch.randint(0, TEXTURE, (n,), generator=gen))  # (N, H, W)
    quality = uniform(QUALITY, n, gen).round()

    ink = _thicken(ink, stroke, widths)
    slanted = hits["perspective"]
    pixels = paper + (ink_grey[:, None, None] - paper) * ink.clamp(0.0, 1.0)
    pixels = pixels + (noise_grey[:, None, None] - pixels) * noise_ink.clamp(0.0, 1.0)
    if bool(slanted.any()):  # the whole strip seen from a slant (white past its corners)
        part = photo.take(corners, slanted, w)
        dark = photo.apply("perspective", 1.0 - pixels[slanted], widths[slanted], part)
        pixels[slanted] = 1.0 - dark
    blurred = hits["blur"]
    if bool(blurred.any()):
        params = {"sigma": sigma[blurred]}
        pixels[blurred] = photo.apply("blur", pixels[blurred], widths[blurred], params)
    pixels = (pixels + noise_sd[:, None, None] * field).clamp_(0.0, 1.0)
    squeezed = hits["jpeg"]
    if bool(squeezed.any()):
        pixels[squeezed] = jpeg(pixels[squeezed], quality[squeezed], widths[squeezed])
    return pixels.masked_fill_(outside_columns(widths, w), 1.0)


@functools.lru_cache(maxsize=4)
def _texture(h: int) -> torch.Tensor:
    """(H, TEXTURE) one fixed N(0, 1) texture, the same in every process."""
    return torch.randn(h, TEXTURE, generator=torch.Generator().manual_seed(62))


def _grain(h: int, w: int, start: torch.Tensor) -> torch.Tensor:
    """(N, H, W) pixel noise: the texture's columns from ``start`` (N,) on, wrapping, so a
    strip's noise on its own columns does not depend on the canvas's width."""
    cols = (start[:, None] + torch.arange(w)[None]) % TEXTURE  # (N, W)
    return _texture(h)[:, cols].permute(1, 0, 2)


def _paper(widths: torch.Tensor, h: int, w: int, gen: torch.Generator):
    """(N, H, W) paper: a level, a linear gradient in a random direction and soft blotches,
    laid on each strip's own columns; and (N,) the level at the gradient's darker end.
    Smooth, so computed on 4 x 4 blocks (their centres) and resized up bilinearly."""
    n = len(widths)
    level = uniform(PAPER, n, gen)
    change = uniform([0.0, GRADIENT], n, gen)
    angle = uniform([0.0, 2 * math.pi], n, gen)
    at = torch.rand(n, BLOTCHES, 2, generator=gen)  # (N, K, 2) fractions of width, height
    radius = (0.3 + 0.9 * torch.rand(n, BLOTCHES, generator=gen)) * h  # px
    amount = (torch.rand(n, BLOTCHES, generator=gen) * 2 - 1) * BLOTCH
    hc, wc = -(-h // 4), -(-w // 4) + 1  # a block past the canvas: no edge reached early
    wide = widths.float().clamp(min=1)[:, None, None]  # (N, 1, 1)
    px = (4 * torch.arange(wc, dtype=torch.float32) + 1.5)[None, None, :]  # (1, 1, Wc) columns
    py = (4 * torch.arange(hc, dtype=torch.float32) + 1.5)[None, :, None]  # (1, Hc, 1) rows
    dx, dy = torch.cos(angle)[:, None, None], torch.sin(angle)[:, None, None]
    ramp = (dx * (px / wide - 0.5) + dy * (py / h - 0.5)) / (dx.abs() + dy.abs())  # ±0.5
    paper = level[:, None, None] - change[:, None, None] * (ramp + 0.5)  # (N, Hc, Wc)
    for k in range(BLOTCHES):
        cx = (at[:, k, 0] * widths.float())[:, None, None]
        cy = (at[:, k, 1] * h)[:, None, None]
        r = radius[:, k, None, None]
        d2 = (px - cx) ** 2 + (py - cy) ** 2
        paper = paper + amount[:, k, None, None] * torch.exp(-d2 / (2 * r * r))
    rows, cols = resizer(hc, 4 * hc, "bilinear", False), resizer(wc, 4 * wc, "bilinear", False)
    paper = (rows[:h] @ paper @ cols[:w].T).contiguous()  # (N, H, W)
    return paper.clamp_(0.45, 1.0), level - change


def _noise_ink(widths, h: int, w: int, ink_grey, base, gen: torch.Generator):
    """(N, H, W) ink of the noise curves and dots, and its grey (N,): the glyphs' ink's or,
    for a share of strips, its own between it and the paper (never darker than the glyphs,
    which stay the darkest marks of a strip)."""
    n = len(widths)
    own = torch.rand(n, generator=gen) < 0.4
    lighter = ink_grey + 0.6 * torch.rand(n, generator=gen) * (base - ink_grey).clamp(min=0.0)
    grey = torch.where(own, lighter, ink_grey)
    curves = _curves(widths, h, w, gen)
    dots = _dots(widths, h, w, gen)
    return torch.maximum(curves, dots), grey


def _curves(widths: torch.Tensor, h: int, w: int, gen: torch.Generator) -> torch.Tensor:
    """(N, H, W) ink of 0-3 curves crossing each strip: along a stretch [x0, x1] of its own
    columns, heights a cubic Bezier of four control heights plus a sine, anti-aliased."""
    n, c = len(widths), len(CURVES) - 1
    count = torch.multinomial(torch.tensor(CURVES), n, replacement=True, generator=gen)
    if n == 0:
        return torch.zeros(n, h, w)
    x0 = 0.3 * torch.rand(n, c, generator=gen)
    x1 = 0.7 + 0.3 * torch.rand(n, c, generator=gen)
    ctrl = (0.15 + 0.7 * torch.rand(n, c, 4, generator=gen)) * h  # px
    amp = 0.15 * h * torch.rand(n, c, generator=gen)
    period = (0.5 + 2.5 * torch.rand(n, c, generator=gen)) * h
    phase = 2 * math.pi * torch.rand(n, c, generator=gen)
    thick = (THICK[0] + (THICK[1] - THICK[0]) * torch.rand(n, c, generator=gen)) * (h / 32)
    wide = widths.float().clamp(min=1)[:, None, None]  # (N, 1, 1)
    xs = torch.arange(w, dtype=torch.float32)[None, None, :]  # (1, 1, W)

    def height(x):  # (N, C, W) px
        t = ((x / wide - x0[..., None]) / (x1 - x0)[..., None]).clamp(0.0, 1.0)
        b = torch.stack([(1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t**3], -1)
        wave = amp[..., None] * torch.sin(2 * math.pi * x / period[..., None] + phase[..., None])
        return (b * ctrl[:, :, None, :]).sum(-1) + wave

    y = height(xs)
    slope = height(xs + 0.5) - height(xs - 0.5)
    along = (xs / wide >= x0[..., None]) & (xs / wide <= x1[..., None])  # (N, C, W)
    shown = torch.arange(c)[None, :] < count[:, None]  # (N, C)
    # |row - y| / sqrt(1 + slope^2): the distance across the curve; ink within its width.
    scale = torch.rsqrt(1 + slope * slope) * (along & shown[..., None])  # (N, C, W), 0: none
    ys = torch.arange(h, dtype=torch.float32)[None, None, :, None]  # (1, 1, H, 1)
    ink = torch.zeros(n, h, w)
    for i in range(int(count.max())):  # curve by curve: (N, H, W) at a time
        dist = (ys[:, 0] - y[:, i, None, :]).abs_().mul_(scale[:, i, None, :])
        reach = (thick[:, i, None, None] / 2 + 0.5) * (scale[:, i, None, :] > 0)
        ink = torch.maximum(ink, (reach - dist).clamp_(0.0, 1.0))
    return ink


def _dots(widths: torch.Tensor, h: int, w: int, gen: torch.Generator) -> torch.Tensor:
    """(N, H, W) ink of noise dots, 1-3 px, up to DOTS per (height x height) square of a
    strip, at places on its own columns."""
    n = len(widths)
    density = DOTS * torch.rand(n, generator=gen)
    at = torch.rand(n, MAX_DOTS, 2, generator=gen)
    size = torch.randint(1, 4, (n,), generator=gen)
    count = (density * widths.float() / h).round().long().clamp(max=MAX_DOTS)  # (N,)
    shown = torch.arange(MAX_DOTS)[None] < count[:, None]  # (N, K)
    col = (at[..., 0] * widths[:, None].float()).long().clamp(max=w - 1)
    row = (at[..., 1] * h).long().clamp(max=h - 1)
    strip = torch.arange(n)[:, None].expand(n, MAX_DOTS)
    dots = torch.zeros(n, h, w)
    dots[strip[shown], row[shown], col[shown]] = 1.0
    return _grown(dots, size - 1)


def _thicken(ink: torch.Tensor, stroke: torch.Tensor, widths: torch.Tensor) -> torch.Tensor:
    """Ink (N, H, W) with strokes 0, 1 or 2 px thicker (``stroke`` (N,)): a 2 x 2 or 3 x 3
    maximum over each strip's own columns."""
    return _grown(ink.masked_fill(outside_columns(widths, ink.shape[-1]), 0.0), stroke)


def _grown(x: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
    """x (N, H, W) with each strip's marks grown by ``by`` (N,) px: 0 (as it is), 1 (the
    maximum over each 2 x 2 block, down and right) or 2 (over each 3 x 3 block, centred);
    separable, and computed for the strips that grow only."""
    out = x.clone()
    for grow in (1, 2):
        rows = by == grow
        if bool(rows.any()):
            out[rows] = _max_filter(x[rows], grow + 1)
    return out


def _max_filter(x: torch.Tensor, k: int) -> torch.Tensor:
    """x (N, H, W) through a k x k maximum (k = 2: this pixel and the next; k = 3: centred),
    zero outside: a running maximum along the rows, then along the columns."""
    lo = (k - 1) // 2
    hi = k - 1 - lo
    p = F.pad(x, (lo, hi, lo, hi))
    h, w = x.shape[1:]
    cols = p[:, :, 0:w]
    for d in range(1, k):
        cols = torch.maximum(cols, p[:, :, d : d + w])
    out = cols[:, 0:h]
    for d in range(1, k):
        out = torch.maximum(out, cols[:, d : d + h])
    return out
