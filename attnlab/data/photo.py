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

Each named operation reaches a strip with probability ``CHANCE``; every draw comes from the
stream's generator, in the fixed order of ``INK`` then ``PIXELS`` whatever the order named,
and none is drawn for an operation that is not named, so ``data.augment=[]`` leaves a
stream exactly as it was.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.config.data import AUGMENT_NAMES
from attnlab.data.augment import _sample
from attnlab.data.ranges import uniform

INK = ("affine", "perspective", "erode", "dilate")
PIXELS = ("contrast", "blur", "noise")
NAMES = INK + PIXELS
assert NAMES == AUGMENT_NAMES, "attnlab.config.data.AUGMENT_NAMES lists these operations"
CHANCE = 0.5  # of a named operation reaching an augmented strip


def _chosen(b: int, gen: torch.Generator) -> torch.Tensor:
    return torch.rand(b, generator=gen) < CHANCE  # (B,)


def affine(ink: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Ink (B, H, W) rotated, sheared, scaled and shifted a little about the strip's middle."""
    b, h, w = ink.shape
    rot = torch.deg2rad(uniform([-3.0, 3.0], b, gen))
    shear = uniform([-0.25, 0.25], b, gen)
    scale = uniform([0.9, 1.1], b, gen)
    dx, dy = uniform([-2.0, 2.0], b, gen), uniform([-2.0, 2.0], b, gen)
    ys = torch.arange(h, dtype=torch.float32)[None, :, None] - (h - 1) / 2  # (1, H, 1)
    xs = torch.arange(w, dtype=torch.float32)[None, None, :] - (w - 1) / 2  # (1, 1, W)
    c, s = torch.cos(rot)[:, None, None], torch.sin(rot)[:, None, None]
    k, z = scale[:, None, None], shear[:, None, None]
    x0, y0 = xs - dx[:, None, None], ys - dy[:, None, None]  # output -> source: undo the shift
    src_x = (c * x0 + s * y0) / k - z * y0 + (w - 1) / 2  # (B, H, W)
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


def perspective(ink: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Ink (B, H, W) seen from a slant: each corner moved by up to 6% of the height."""
    b, h, w = ink.shape
    corners = torch.tensor([[0.0, 0.0], [w - 1.0, 0.0], [w - 1.0, h - 1.0], [0.0, h - 1.0]])
    moved = corners + (torch.rand(b, 4, 2, generator=gen) * 2 - 1) * 0.06 * h  # (B, 4, 2)
    back = _homographies(moved, corners.expand(b, 4, 2))  # output -> source
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    pts = torch.stack([xs, ys, torch.ones_like(xs)], 0).double().view(3, -1)  # (3, H*W)
    src = back @ pts  # (B, 3, H*W)
    src = (src[:, :2] / src[:, 2:]).float().view(b, 2, h, w)
    return _sample(ink, src[:, 0], src[:, 1])


def _morph(ink: torch.Tensor, thicker: bool) -> torch.Tensor:
    """Ink (B, H, W) through a 3 x 3 max (thicker) or min (thinner) filter."""
    x = ink[:, None] if thicker else -ink[:, None]
    y = F.max_pool2d(x, 3, stride=1, padding=1)[:, 0]
    return y if thicker else -y


def contrast(pixels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Grey pixels (B, H, W) with contrast scaled about each strip's mean and brightness moved."""
    b = len(pixels)
    k = uniform([0.5, 1.2], b, gen)[:, None, None]
    shift = uniform([-0.15, 0.15], b, gen)[:, None, None]
    mean = pixels.mean(dim=(1, 2), keepdim=True)
    return ((pixels - mean) * k + mean + shift).clamp_(0.0, 1.0)


def blur(pixels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Grey pixels (B, H, W), each strip blurred by a Gaussian of its own sigma, edges
    replicated (paper stays paper at the border)."""
    sigma = uniform([0.3, 1.2], len(pixels), gen)  # (B,)
    radius = 3
    x = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-(x[None] ** 2) / (2 * sigma[:, None] ** 2))
    k = k / k.sum(1, keepdim=True)  # (B, 2r+1)
    b, h, w = pixels.shape
    padded = F.pad(pixels[None], (radius, radius, radius, radius), mode="replicate")[0]
    rows = F.conv2d(padded[None], k.view(b, 1, 1, -1), groups=b)  # (1, B, H+2r, W)
    out = F.conv2d(rows, k.view(b, 1, -1, 1), groups=b)  # (1, B, H, W)
    return out[0].clamp_(0.0, 1.0)


def noise(pixels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Grey pixels (B, H, W) plus Gaussian noise of a std drawn per strip in [0, 0.08]."""
    std = uniform([0.0, 0.08], len(pixels), gen)[:, None, None]
    return (pixels + std * torch.randn(pixels.shape, generator=gen)).clamp_(0.0, 1.0)


_INK_OPS = {
    "affine": affine,
    "perspective": perspective,
    "erode": lambda ink, gen: _morph(ink, thicker=False),
    "dilate": lambda ink, gen: _morph(ink, thicker=True),
}
_PIXEL_OPS = {"contrast": contrast, "blur": blur, "noise": noise}


def _apply(x: torch.Tensor, names, ops: dict, order, gen: torch.Generator) -> torch.Tensor:
    for name in order:
        if name not in names:
            continue
        hit = _chosen(len(x), gen)  # drawn for every strip, so draws do not depend on hits
        changed = ops[name](x, gen)
        x = torch.where(hit[:, None, None], changed, x)
    return x


def vary_ink(ink: torch.Tensor, names, gen: torch.Generator) -> torch.Tensor:
    """Ink (B, H, W) in [0, 1] through the named geometry and stroke operations."""
    return _apply(ink, set(names), _INK_OPS, INK, gen).clamp_(0.0, 1.0)


def vary_pixels(pixels: torch.Tensor, names, gen: torch.Generator) -> torch.Tensor:
    """Grey pixels (B, H, W) in [0, 1] (1 = paper) through the named light and sensor ones."""
    return _apply(pixels, set(names), _PIXEL_OPS, PIXELS, gen)


__all__ = ["CHANCE", "INK", "NAMES", "PIXELS", "vary_ink", "vary_pixels"]
