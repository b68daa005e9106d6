"""Augmentation for real images (``data.augment``, ``data=folder`` only): the variation a
photographed, scanned or generated strip has and a clean synthetic one lacks, each named
so that a user turns on what fits the strips (the torchvision / albumentations set that
text-recognition trainers use, in grey).

Geometry and stroke act on the ink (1 = full ink), before the paper is shaded:

- ``affine``: a small rotation (±3°), shear (±0.25), scale (0.9-1.1) and shift (±2 px);
- ``perspective``: the four corners moved by up to 6% of the height (a page photographed
  at a slant), through the homography they define;
- ``erode`` / ``dilate``: strokes thinned or thickened by one pixel (3 x 3 min / max).

Light and sensor act on the grey pixels, after the shading:

- ``contrast``: contrast scaled in [0.5, 1.2] about the strip's mean and brightness moved by
  ±0.15 (colour jitter, once the colours are grey);
- ``blur``: a Gaussian of sigma in [0.3, 1.2] px;
- ``noise``: Gaussian pixel noise of std in [0, 0.08].

Every operation acts on each strip's own columns (``widths``), never on the padded batch:
the affine map turns about the strip's own middle, the perspective moves the strip's own
corners, the contrast takes the strip's own mean, and the filters see past a strip's last
column what they would see at the edge of the strip alone. So a strip gets the same result
for the same draws whether it is batched alone or beside a longer one, and the padding
stays paper. Each operation is a draw (``Op.draw``: its random numbers for a batch) and an
action on them (``apply``), so that the same draws can be applied to any sub-batch
(``take``).

Each named operation reaches a strip with probability ``CHANCE``; every draw comes from the
stream's generator, in the fixed order of ``INK`` then ``PIXELS`` whatever the order named,
and none is drawn for an operation that is not named, so ``data.augment=[]`` leaves a
stream exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from attnlab.config.data import AUGMENT_NAMES
from attnlab.data.augment import _sample, edge_filled, outside_columns
from attnlab.data.ranges import uniform

INK = ("affine", "perspective", "erode", "dilate")
PIXELS = ("contrast", "blur", "noise")
NAMES = INK + PIXELS
assert NAMES == AUGMENT_NAMES, "attnlab.config.data.AUGMENT_NAMES lists these operations"
CHANCE = 0.5  # of a named operation reaching an augmented strip

# An operation's draws for a batch: each tensor batch first, (B, ...); a 3-D one is a
# per-pixel field (B, H, W) over the padded canvas.
Params = dict[str, torch.Tensor]


class Op(NamedTuple):
    """One named operation: its draws for a batch of B strips on an H x W canvas, and what
    it does with them to x (B, H, W) whose strips are ``widths`` (B,) columns wide."""

    draw: Callable[[int, int, int, torch.Generator], Params]
    apply: Callable[[torch.Tensor, torch.Tensor, Params], torch.Tensor]


def _chosen(b: int, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(b, generator=gen) < CHANCE  # (B,)


def _full(x: torch.Tensor, widths: torch.Tensor | None) -> torch.Tensor:
    """Each strip's width: ``widths``, or the whole canvas when none are given."""
    if widths is None:
        return torch.full((len(x),), x.shape[-1], dtype=torch.long)
    return widths.to(torch.long)


def _draw_affine(b: int, h: int, w: int, gen: torch.Generator) -> Params:
    rot = torch.deg2rad(uniform([-3.0, 3.0], b, gen))
    shear = uniform([-0.25, 0.25], b, gen)
    scale = uniform([0.9, 1.1], b, gen)
    dx, dy = uniform([-2.0, 2.0], b, gen), uniform([-2.0, 2.0], b, gen)
    return {"rot": rot, "shear": shear, "scale": scale, "dx": dx, "dy": dy}


def _affine(ink: torch.Tensor, widths: torch.Tensor, p: Params) -> torch.Tensor:
    """Ink (B, H, W) rotated, sheared, scaled and shifted about each strip's own middle."""
    b, h, w = ink.shape
    cx = ((widths.float() - 1) / 2)[:, None, None]  # (B, 1, 1) the strip's middle column
    ys = torch.arange(h, dtype=torch.float32)[None, :, None] - (h - 1) / 2  # (1, H, 1)
    xs = torch.arange(w, dtype=torch.float32)[None, None, :] - cx  # (B, 1, W)
    c, s = torch.cos(p["rot"])[:, None, None], torch.sin(p["rot"])[:, None, None]
    k, z = p["scale"][:, None, None], p["shear"][:, None, None]
    x0, y0 = xs - p["dx"][:, None, None], ys - p["dy"][:, None, None]  # undo the shift
    src_x = (c * x0 + s * y0) / k - z * y0 + cx  # (B, H, W)
    src_y = (-s * x0 + c * y0) / k + (h - 1) / 2
    return _sample(ink, src_x, src_y)


def _homographies(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """(B, 3, 3) maps taking the four points ``src`` (B, 4, 2) to ``dst`` (B, 4, 2), in
    float64 (the 8 x 8 systems are solved once per strip)."""
    s, d = src.double(), dst.double()
    x, y, u, v = s[..., 0], s[..., 1], d[..., 0], d[..., 1]  # (B, 4)
    one, zero = torch.ones_like(x), torch.zeros_like(x)
    rows_u = torch.stack([x, y, one, zero, zero, zero, -u * x, -u * y], -1)  # (B, 4, 8)
    rows_v = torch.stack([zero, zero, zero, x, y, one, -v * x, -v * y], -1)
    a = torch.cat([rows_u, rows_v], 1)  # (B, 8, 8)
    rhs = torch.cat([u, v], 1)[..., None]  # (B, 8, 1)
    h = torch.linalg.solve(a, rhs)[..., 0]
    return torch.cat([h, torch.ones_like(h[:, :1])], 1).view(-1, 3, 3)


def _draw_perspective(b: int, h: int, w: int, gen: torch.Generator) -> Params:
    return {"corners": (torch.rand(b, 4, 2, generator=gen) * 2 - 1).view(b, 8)}  # (B, 8)


def _perspective(ink: torch.Tensor, widths: torch.Tensor, p: Params) -> torch.Tensor:
    """Ink (B, H, W) seen from a slant: each of the strip's own corners moved by up to 6% of
    the height."""
    b, h, w = ink.shape
    corners = torch.zeros(b, 4, 2)  # (B, 4, 2) top left, top right, bottom right, bottom left
    corners[:, 1:3, 0] = (widths.float() - 1)[:, None]
    corners[:, 2:, 1] = h - 1.0
    moved = corners + p["corners"].view(b, 4, 2) * 0.06 * h
    back = _homographies(moved, corners)  # output -> source
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    pts = torch.stack([xs, ys, torch.ones_like(xs)], 0).double().view(3, -1)  # (3, H*W)
    src = back @ pts  # (B, 3, H*W)
    src = (src[:, :2] / src[:, 2:]).float().view(b, 2, h, w)
    return _sample(ink, src[:, 0], src[:, 1])


def _morph(ink: torch.Tensor, thicker: bool, widths: torch.Tensor | None = None) -> torch.Tensor:
    """Ink (B, H, W) through a 3 x 3 max (thicker) or min (thinner) filter over each
    strip's own columns (past them, as past the canvas, nothing counts)."""
    x = ink if thicker else -ink
    x = x.masked_fill(outside_columns(_full(ink, widths), ink.shape[-1]), float("-inf"))
    y = F.max_pool2d(x[:, None], 3, stride=1, padding=1)[:, 0]
    return y if thicker else -y


def _no_draws(b: int, h: int, w: int, gen: torch.Generator) -> Params:
    return {}


def _draw_contrast(b: int, h: int, w: int, gen: torch.Generator) -> Params:
    return {"k": uniform([0.5, 1.2], b, gen), "shift": uniform([-0.15, 0.15], b, gen)}


def _contrast(pixels: torch.Tensor, widths: torch.Tensor, p: Params) -> torch.Tensor:
    """Grey pixels (B, H, W) with contrast scaled about each strip's own mean (its columns
    only) and brightness moved."""
    b, h, w = pixels.shape
    inside = ~outside_columns(widths, w)  # (B, 1, W)
    total = (pixels * inside).sum(dim=(1, 2), keepdim=True)
    mean = total / (h * widths.clamp(min=1).float())[:, None, None]  # (B, 1, 1)
    k, shift = p["k"][:, None, None], p["shift"][:, None, None]
    return ((pixels - mean) * k + mean + shift).clamp_(0.0, 1.0)


def _draw_blur(b: int, h: int, w: int, gen: torch.Generator) -> Params:
    return {"sigma": uniform([0.3, 1.2], b, gen)}  # (B,)


def _blur(pixels: torch.Tensor, widths: torch.Tensor, p: Params) -> torch.Tensor:
    """Grey pixels (B, H, W), each strip blurred by a Gaussian of its own sigma, edges
    replicated at the strip's own last column (paper stays paper at the border)."""
    radius = 3
    x = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-(x[None] ** 2) / (2 * p["sigma"][:, None] ** 2))
    k = k / k.sum(1, keepdim=True)  # (B, 2r+1)
    b, h, w = pixels.shape
    edged = edge_filled(pixels, widths)
    padded = F.pad(edged[None], (radius, radius, radius, radius), mode="replicate")[0]
    rows = F.conv2d(padded[None], k.view(b, 1, 1, -1), groups=b)  # (1, B, H+2r, W)
    out = F.conv2d(rows, k.view(b, 1, -1, 1), groups=b)  # (1, B, H, W)
    return out[0].clamp_(0.0, 1.0)


def _draw_noise(b: int, h: int, w: int, gen: torch.Generator) -> Params:
    std = uniform([0.0, 0.08], b, gen)
    return {"std": std, "field": torch.randn((b, h, w), generator=gen)}  # (B,), (B, H, W)


def _noise(pixels: torch.Tensor, widths: torch.Tensor, p: Params) -> torch.Tensor:
    """Grey pixels (B, H, W) plus Gaussian noise of a std drawn per strip in [0, 0.08]."""
    return (pixels + p["std"][:, None, None] * p["field"]).clamp_(0.0, 1.0)


OPS: dict[str, Op] = {
    "affine": Op(_draw_affine, _affine),
    "perspective": Op(_draw_perspective, _perspective),
    "erode": Op(_no_draws, lambda ink, widths, p: _morph(ink, False, widths)),
    "dilate": Op(_no_draws, lambda ink, widths, p: _morph(ink, True, widths)),
    "contrast": Op(_draw_contrast, _contrast),
    "blur": Op(_draw_blur, _blur),
    "noise": Op(_draw_noise, _noise),
}
assert tuple(OPS) == NAMES


def take(params: Params, index, width: int) -> Params:
    """The draws of the strips ``index`` of a batch, for a canvas ``width`` columns wide
    (per-pixel fields cropped): the same draws, applied to a sub-batch."""
    return {k: (v[index][..., :width] if v.dim() == 3 else v[index]) for k, v in params.items()}


def apply(name: str, x: torch.Tensor, widths: torch.Tensor | None, params: Params) -> torch.Tensor:
    """The operation ``name`` with the draws ``params`` on x (B, H, W), on each strip's own
    ``widths`` columns (None: the whole canvas); the padding is paper before and after (ink
    0 for ``INK``, pixel 1 for ``PIXELS``)."""
    widths = _full(x, widths)
    paper = 0.0 if name in INK else 1.0
    outside = outside_columns(widths, x.shape[-1])  # (B, 1, W)
    if name in INK:
        x = x.masked_fill(outside, paper)
    return OPS[name].apply(x, widths, params).masked_fill_(outside, paper)


def once(name: str, x: torch.Tensor, gen: torch.Generator, widths=None) -> torch.Tensor:
    """The operation ``name`` on every strip of x (B, H, W), drawn from ``gen``."""
    b, h, w = x.shape
    return apply(name, x, widths, OPS[name].draw(b, h, w, gen))


def affine(ink: torch.Tensor, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Ink (B, H, W) rotated, sheared, scaled and shifted a little about each strip's middle."""
    return once("affine", ink, gen, widths)


def perspective(ink: torch.Tensor, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Ink (B, H, W) seen from a slant: each corner moved by up to 6% of the height."""
    return once("perspective", ink, gen, widths)


def contrast(pixels: torch.Tensor, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Grey pixels (B, H, W) with contrast scaled about each strip's mean and brightness moved."""
    return once("contrast", pixels, gen, widths)


def blur(pixels: torch.Tensor, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Grey pixels (B, H, W), each strip blurred by a Gaussian of its own sigma."""
    return once("blur", pixels, gen, widths)


def noise(pixels: torch.Tensor, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Grey pixels (B, H, W) plus Gaussian noise of a std drawn per strip in [0, 0.08]."""
    return once("noise", pixels, gen, widths)


def _apply(x, names, order, widths, gen: torch.Generator) -> torch.Tensor:
    b, h, w = x.shape
    for name in order:
        if name not in names:
            continue
        hit = _chosen(b, gen)  # drawn for every strip, so draws do not depend on hits
        changed = apply(name, x, widths, OPS[name].draw(b, h, w, gen))
        x = torch.where(hit[:, None, None], changed, x)
    return x


def vary_ink(ink: torch.Tensor, names, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Ink (B, H, W) in [0, 1] through the named geometry and stroke operations, each on
    every strip's own ``widths`` (B,) columns (None: the whole canvas); when one is named,
    the padding is 0 (paper) before and after."""
    names = set(names)
    if names & set(INK):
        ink = ink.masked_fill(outside_columns(_full(ink, widths), ink.shape[-1]), 0.0)
    return _apply(ink, names, INK, widths, gen).clamp_(0.0, 1.0)


def vary_pixels(pixels: torch.Tensor, names, gen: torch.Generator, widths=None) -> torch.Tensor:
    """Grey pixels (B, H, W) in [0, 1] (1 = paper) through the named light and sensor ones,
    each on every strip's own ``widths`` (B,) columns; when one is named, the padding is
    paper (1) after."""
    names = set(names)
    pixels = _apply(pixels, names, PIXELS, widths, gen)
    if names & set(PIXELS):
        pixels = pixels.masked_fill(outside_columns(_full(pixels, widths), pixels.shape[-1]), 1.0)
    return pixels


__all__ = [
    "CHANCE",
    "INK",
    "NAMES",
    "OPS",
    "PIXELS",
    "Op",
    "apply",
    "take",
    "vary_ink",
    "vary_pixels",
]
