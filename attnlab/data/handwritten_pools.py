"""Handwritten samples as pools, and how a strip is composed of a pool's samples
(``attnlab.data.handwritten`` writes the strips).

**scikit-learn** (the default): ``load_digits`` holds 1,797 handwritten digits (8x8 grey,
0-16) scanned from 43 writers (UCI "Optical Recognition of Handwritten Digits");
scikit-learn is not an attnlab dependency, and only ``digits`` imports it. Each strip takes
distinct samples, each upscaled to about three quarters of the strip height, with small
random gaps, margins and vertical jitter (``strip``). Its samples are split by index: pool
``train`` draws from samples 0-1399, ``test`` from 1400-1796.

**An npz file** (``npz=PATH``, read and split into pools by
``attnlab.data.handwritten_npz``): strips are composed as a writer writes (``written``):
each digit cropped to its ink, a digit height of 28-40 px for the strip (digits 2.4-3.4 mm
high scanned at 300 dpi) with 6-8 px of paper above and below (strips 40-56 px high), gaps
from the writer's own spacing (sometimes touching or overlapping by a pixel or two), slight
baseline jitter, anti-aliased scaling, dark ink on light paper. The pool's ``record``
(``source.json``) names the file (its sha256), the split seed and the pools' sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from attnlab.data.handwritten_npz import BOX, TEST_SHARE, load_npz, split_pools
from attnlab.errors import UserError
from attnlab.io import file_digest

SPLIT = 1400  # samples [0, SPLIT) make training strips, [SPLIT, 1797) test strips
DIGIT_HEIGHT = (28, 40)  # px of a BOX-high digit on an npz strip: 2.4-3.4 mm at 300 dpi
MARGIN = (6, 8)  # px of paper above and below it: strips 40-56 px high
Glyphs = Callable[[str, int], tuple[list[torch.Tensor], list[str]]]
Compose = Callable[[list[torch.Tensor], torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class Pool:
    """One pool's samples and how strips are composed of them."""

    ink: list[torch.Tensor]  # each sample's ink, (h, w) in [0, 1], 1 = full ink
    labels: list[str]
    index: list[int]  # each sample's index in its source (samples.csv)
    compose: Compose  # (ink of a strip's samples, generator) -> (H, W) grey, 1 = paper
    record: dict[str, Any] | None = None  # source.json: what the pool was drawn from


def digits(pool: str, size: int) -> tuple[list[torch.Tensor], list[str]]:
    """The pool's scikit-learn samples as ink (size, w) in [0, 1], cropped to their inked
    columns, and their labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:
        raise UserError("handwritten strips need scikit-learn: pip install scikit-learn") from err
    data = load_digits()
    images = torch.from_numpy(data.images).float() / 16.0  # (1797, 8, 8), 1 = full ink
    labels = [str(int(t)) for t in data.target]
    keep = range(SPLIT) if pool == "train" else range(SPLIT, len(labels))
    up = F.interpolate(images[list(keep), None], size=(size, size), mode="bicubic")[:, 0]
    up = up.clamp(0, 1)  # (N, size, size)
    out = []
    for g in up:
        cols = torch.nonzero(g.amax(0) > 0.1).flatten()
        out.append(g[:, int(cols[0]) : int(cols[-1]) + 1])
    return out, [labels[i] for i in keep]


def strip(ink: list[torch.Tensor], height: int, gen: torch.Generator) -> torch.Tensor:
    """Glyphs side by side on paper: (height, W) grey in [0, 1], 1 = paper."""

    def draw(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    size = ink[0].shape[0]
    gaps = [draw(0, 4) for _ in ink[1:]] + [0]
    left, right = draw(2, 8), draw(2, 8)
    width = left + sum(g.shape[1] + gap for g, gap in zip(ink, gaps, strict=True)) + right
    canvas = torch.zeros(height, width)
    x = left
    for g, gap in zip(ink, gaps, strict=True):
        top = (height - size) // 2 + draw(-2, 2)
        w = g.shape[1]
        canvas[top : top + size, x : x + w] = torch.maximum(canvas[top : top + size, x : x + w], g)
        x += w + gap
    return _on_paper(canvas, gen, 0.7, 0.03)


def _on_paper(canvas: torch.Tensor, gen: torch.Generator, contrast: float, noise: float):
    """Ink (H, W) in [0, 1] as dark ink on light paper: (H, W) grey, 1 = white paper."""
    paper = 0.85 + 0.15 * float(torch.rand(1, generator=gen))
    strength = contrast + (1 - contrast) * float(torch.rand(1, generator=gen))
    grain = noise * torch.randn(*canvas.shape, generator=gen)
    return (paper - paper * strength * canvas + grain).clamp(0, 1)


def sklearn_pool(pool: str, height: int, glyphs: Glyphs | None = None) -> Pool:
    """The scikit-learn pool (or ``glyphs``' stand-ins) composed by ``strip`` at ``height``."""
    ink, labels = (glyphs or digits)(pool, round(0.75 * height))
    first = 0 if pool == "train" else SPLIT
    return Pool(
        ink, labels, [first + j for j in range(len(ink))], lambda g, gen: strip(g, height, gen)
    )


def crop(image: np.ndarray) -> torch.Tensor:
    """A white-on-black uint8 digit as ink (h, w) in [0, 1], cropped to its inked rows and
    columns."""
    ink = torch.from_numpy(image.astype(np.float32) / 255.0)
    rows = torch.nonzero(ink.amax(1) > 0).flatten()
    cols = torch.nonzero(ink.amax(0) > 0).flatten()
    return ink[int(rows[0]) : int(rows[-1]) + 1, int(cols[0]) : int(cols[-1]) + 1]


def written(ink: list[torch.Tensor], gen: torch.Generator) -> torch.Tensor:
    """Cropped MNIST digits as one writer writes them, scanned: (H, W) grey, 1 = paper.

    The strip's digit height (DIGIT_HEIGHT: a BOX-high digit's) and margins (MARGIN) are
    drawn once; each digit is scaled by it (anti-aliased) times 0.92-1.0, centred on the line
    with -2..2 px of jitter; the writer's spacing is 4-20% of the digit height, each gap that
    plus normal noise of 6%, never less than -2 px (digits touch or overlap by a pixel or
    two); 4-12 px of paper left and right."""

    def uniform(lo: float, hi: float) -> float:
        return lo + (hi - lo) * float(torch.rand(1, generator=gen))

    def draw(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    size, top, bottom = draw(*DIGIT_HEIGHT), draw(*MARGIN), draw(*MARGIN)
    height, spacing = top + size + bottom, uniform(0.04, 0.2) * size
    x, placed = draw(4, 12), []
    for i, g in enumerate(ink):
        g = _scaled(g, size / BOX * uniform(0.92, 1.0))
        if i:
            x += max(-2, round(spacing + 0.06 * size * float(torch.randn(1, generator=gen))))
        y = top + (size - g.shape[0]) // 2 + draw(-2, 2)
        placed.append((x, min(max(y, 0), height - g.shape[0]), g))
        x += g.shape[1]
    canvas = torch.zeros(height, x + draw(4, 12))  # (H, W)
    for x, y, g in placed:
        h, w = g.shape
        canvas[y : y + h, x : x + w] = torch.maximum(canvas[y : y + h, x : x + w], g)
    return _on_paper(canvas, gen, 0.75, 0.02)


def _scaled(ink: torch.Tensor, scale: float) -> torch.Tensor:
    """Ink (h, w) scaled by ``scale``, anti-aliased (bilinear, ``antialias=True``)."""
    size = (max(1, round(ink.shape[0] * scale)), max(1, round(ink.shape[1] * scale)))
    out = F.interpolate(ink[None, None], size=size, mode="bilinear", antialias=True)
    return out[0, 0].clamp(0, 1)


def npz_pool(path: Path, pool: str, split_seed: int) -> Pool:
    """The npz file's pool (``split_pools``), each sample cropped, composed by ``written``."""
    images, labels = load_npz(path)
    pools = split_pools(labels, split_seed)
    keep = pools[pool]
    record = {
        "source": "npz",
        "file": str(path.resolve()),
        "sha256": file_digest(path),
        "split_seed": split_seed,
        "test_share_of_each_digit": TEST_SHARE,
        "pool": pool,
        "pool_samples": {name: len(ids) for name, ids in pools.items()},
        "digit_height_px": list(DIGIT_HEIGHT),
        "strip_height_px": [DIGIT_HEIGHT[0] + 2 * MARGIN[0], DIGIT_HEIGHT[1] + 2 * MARGIN[1]],
    }
    ink = [crop(images[i]) for i in keep]
    return Pool(ink, [str(int(labels[i])) for i in keep], keep, written, record)
