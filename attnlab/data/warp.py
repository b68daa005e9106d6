"""The glyph bank's arithmetic, the same bit for bit on every CPU: resampling, the geometric
variants (scale, stretch, shear, rotation, shift, elastic bending) and the blur levels.

The bank is part of the data definition (``attnlab.data.glyphs``), so no pixel of it may
depend on the machine. torch's float32 kernels (``F.interpolate``, ``affine_grid``,
``grid_sample``, ``conv2d``) do: their sums run in another order, with or without fused
multiply-adds, on another vector width (AVX2, AVX-512, ATen's scalar kernels, oneDNN's and
MKL's dispatch), and a pixel near a rounding edge then lands on the other side. Here every
value is float64 and every step is one elementwise NumPy operation (add, subtract, multiply,
divide, floor: each correctly rounded by IEEE 754, whatever the vector width), in a fixed
order; sums are written out term by term (never a reduction, a matrix product or a
convolution, whose order a library chooses), and the few transcendental values (the
rotations' cosines and sines, the Gaussian's weights) come from Python's ``math``. Ink is
rounded to uint8 once, at the end (``to_ink``), and every threshold is taken on those
integers.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _linear_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear resampling along one axis (half-pixel centres, as ``F.interpolate`` with
    ``align_corners=False``): for each output index its two input indices and the weight
    of the second."""
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    src = np.maximum(src, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, src - i0


def resize_linear(image: np.ndarray, new_h: int, new_w: int) -> np.ndarray:
    """(H, W) float64 -> (new_h, new_w), bilinear: rows first, then columns."""
    y0, y1, ty = _linear_taps(image.shape[0], new_h)
    x0, x1, tx = _linear_taps(image.shape[1], new_w)
    ty = ty[:, None]
    rows = image[y0] * (1.0 - ty) + image[y1] * ty
    return rows[:, x0] * (1.0 - tx) + rows[:, x1] * tx


def _cubic_taps(n_in: int, n_out: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Bicubic resampling along one axis (corners aligned, Keys' kernel with a = -0.75, as
    ``F.interpolate(mode="bicubic", align_corners=True)``): four input indices (clamped at
    the edges) and their four weights for each output index."""
    a = -0.75
    step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    src = np.arange(n_out, dtype=np.float64) * step
    i = np.floor(src).astype(np.int64)
    t = src - i

    def near(x):  # |x| <= 1
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    weights = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
    index = [np.clip(i + k, 0, n_in - 1) for k in (-1, 0, 1, 2)]
    return index, weights


def _taps_sum(index, weights, take) -> np.ndarray:
    """sum_k weights[k] * take(index[k]), term by term in k's order."""
    out = take(index[0]) * weights[0]
    for idx, w in zip(index[1:], weights[1:], strict=True):
        out = out + take(idx) * w
    return out


def _upsample_fields(coarse: np.ndarray, h: int, w: int) -> np.ndarray:
    """(M, 2, 4, 4) coarse displacements -> (M, 2, h, w), bicubic with corners aligned."""
    ys, wy = _cubic_taps(coarse.shape[2], h)
    xs, wx = _cubic_taps(coarse.shape[3], w)
    rows = _taps_sum(ys, [v[:, None] for v in wy], lambda i: coarse[:, :, i, :])
    return _taps_sum(xs, wx, lambda i: rows[:, :, :, i])


def variant_params(n, v, scale, stretch, shear, rotation, v_offset, gen) -> np.ndarray:
    """(N, V, 5) scale, shear, rotation (degrees), vertical shift (px) and stretch of every
    variant of N glyphs, each drawn from its configured [low, high] range; variant 0 is the
    glyph unchanged."""
    u = torch.rand(n, v, 5, generator=gen).numpy().astype(np.float64)
    lo = np.array([scale[0], shear[0], rotation[0], -v_offset, stretch[0]], dtype=np.float64)
    hi = np.array([scale[1], shear[1], rotation[1], v_offset, stretch[1]], dtype=np.float64)
    p = lo + u * (hi - lo)
    p[:, 0] = [1.0, 0.0, 0.0, 0.0, 1.0]
    return p


def elastic_fields(n: int, v: int, elastic: float, gen: torch.Generator) -> np.ndarray:
    """(N, V, 2, 4, 4) coarse displacements (x, y) in pixels, each within +-``elastic``, of
    every variant of N glyphs; variant 0 is not warped. Smoothly upsampled over the glyph,
    they bend strokes (Simard et al.'s elastic distortion, smooth at a glyph's scale)."""
    u = torch.rand(n, v, 2, 4, 4, generator=gen).numpy().astype(np.float64)
    d = (u * 2.0 - 1.0) * float(elastic)
    d[:, 0] = 0.0
    return d


def _each(values: np.ndarray, fn) -> np.ndarray:
    """``fn`` (from ``math``) of every value: NumPy's own vectorised cos, sin and exp differ
    by CPU in the last bit."""
    return np.array([fn(x) for x in values.ravel().tolist()], dtype=np.float64).reshape(
        values.shape
    )


def _sample(src: np.ndarray, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Bilinear sampling of (M, H, W) images at normalised (M, H, W) points (half-pixel
    centres, zero outside: ``grid_sample(align_corners=False, padding_mode="zeros")``)."""
    m, h, w = src.shape
    ix = ((gx + 1.0) * w - 1.0) / 2.0
    iy = ((gy + 1.0) * h - 1.0) / 2.0
    fx, fy = np.floor(ix), np.floor(iy)
    tx, ty = ix - fx, iy - fy
    # Every point off the image reads the zero border of a padded copy.
    x0, x1 = (np.clip(c, -1, w).astype(np.int64) + 1 for c in (fx, fx + 1.0))
    y0, y1 = (np.clip(c, -1, h).astype(np.int64) + 1 for c in (fy, fy + 1.0))
    padded = np.zeros((m, h + 2, w + 2))
    padded[:, 1:-1, 1:-1] = src
    # Gathered from the flat array by one index each: the same values as indexing
    # padded[k, y, x] with three index arrays, in half the time.
    flat = padded.reshape(-1)
    image = (np.arange(m) * (h + 2))[:, None, None]
    row0, row1 = (image + y0) * (w + 2), (image + y1) * (w + 2)
    top = flat.take(row0 + x0) * (1.0 - tx) + flat.take(row0 + x1) * tx
    low = flat.take(row1 + x0) * (1.0 - tx) + flat.take(row1 + x1) * tx
    return top * (1.0 - ty) + low * ty


def affine_variants(
    glyphs: np.ndarray, p: np.ndarray, elastic: np.ndarray | None = None
) -> np.ndarray:
    """(N, H, Wg) glyphs and their (N, V, 5) ``variant_params`` -> (N, V, H, Wg): each
    scaled, stretched horizontally, sheared, rotated and shifted vertically, then bent by
    its (N, V, 2, 4, 4) ``elastic_fields`` when given."""
    n, h, wg = glyphs.shape
    v = p.shape[1]
    scale, shear, wide = p[..., 0], p[..., 1], p[..., 4]
    rot = p[..., 2] * (math.pi / 180.0)
    shift = -2.0 * p[..., 3] / h  # pixels -> normalised height, output moves down by +px
    # Output->input map in normalised coordinates (x spans the width, y the height).
    aspect = wg / h
    cos, sin = _each(rot, math.cos), _each(rot, math.sin)
    a00 = (cos / scale / wide).reshape(-1, 1, 1)
    a01 = ((-sin + shear) / scale / aspect / wide).reshape(-1, 1, 1)
    a10 = (sin / scale * aspect).reshape(-1, 1, 1)
    a11 = (cos / scale).reshape(-1, 1, 1)
    a12 = shift.reshape(-1, 1, 1)
    x = ((2.0 * np.arange(wg) + 1.0) / wg - 1.0)[None, None, :]
    y = ((2.0 * np.arange(h) + 1.0) / h - 1.0)[None, :, None]
    gx = a00 * x + a01 * y
    gy = a10 * x + a11 * y + a12
    if elastic is not None:  # pixels -> normalised units, smooth over the glyph's box
        field = _upsample_fields(elastic.reshape(n * v, 2, 4, 4), h, wg)
        gx = gx + field[:, 0] * (2.0 / wg)
        gy = gy + field[:, 1] * (2.0 / h)
    src = np.broadcast_to(glyphs[:, None], (n, v, h, wg)).reshape(n * v, h, wg)
    return _sample(src, gx, gy).reshape(n, v, h, wg)


def gaussian_blur(images: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur of (N, H, W) images, zero outside (ink fades into paper)."""
    if sigma < 0.05:
        return images
    radius = max(1, math.ceil(2.5 * sigma))
    k = [math.exp(-(x * x) / (2 * sigma**2)) for x in range(-radius, radius + 1)]
    total = math.fsum(k)
    k = [w / total for w in k]
    n, h, w = images.shape
    padded = np.zeros((n, h, w + 2 * radius))
    padded[:, :, radius : radius + w] = images
    offsets = list(range(2 * radius + 1))
    rows = _taps_sum(offsets, k, lambda t: padded[:, :, t : t + w])
    padded = np.zeros((n, h + 2 * radius, w))
    padded[:, radius : radius + h] = rows
    return _taps_sum(offsets, k, lambda t: padded[:, t : t + h])


def to_ink(images: np.ndarray) -> np.ndarray:
    """Ink in [0, 1] -> uint8 0..255, rounded once (half to even)."""
    return np.rint(np.clip(images, 0.0, 1.0) * 255.0).astype(np.uint8)


INKED = 25  # a column is inked when one of its pixels is over this (0.1 of full ink)


def left_align(ink: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, H, Wg) uint8 ink -> columns (M, Wg, H) uint8 starting at the first inked column,
    zero past the last, and the ink widths (M,) int64."""
    m, h, wg = ink.shape
    inked = ink.max(axis=1) > INKED  # (M, Wg)
    cols = np.arange(wg)
    first = np.minimum(np.where(inked, cols, wg).min(-1), wg - 1)
    last = np.where(inked, cols, -1).max(-1)
    widths = np.maximum(last - first + 1, 1)
    src = np.minimum(cols + first[:, None], wg - 1)  # (M, Wg)
    aligned = np.take_along_axis(ink, np.broadcast_to(src[:, None, :], (m, h, wg)), axis=2)
    aligned = np.where(cols[None, None, :] < widths[:, None, None], aligned, 0).astype(np.uint8)
    columns = np.ascontiguousarray(aligned.transpose(0, 2, 1))
    return torch.from_numpy(columns), torch.from_numpy(widths.astype(np.int64))
