"""Labelled strips that are not the generator's: handwritten digits composed into strips.

scikit-learn's bundled ``load_digits`` holds 1,797 handwritten digits (8x8 grey, 0-16)
scanned from 43 writers (UCI "Optical Recognition of Handwritten Digits"); scikit-learn is
not an attnlab dependency, and only ``digits`` imports it. Each strip takes distinct samples,
each upscaled to about three quarters of the strip height, with small random gaps, margins
and vertical jitter: dark ink on light paper. ``write_strips`` fills a folder with PNG files,
``labels.csv`` (``filename,label,group``: the columns ``data=folder`` reads) and
``samples.csv`` (each strip's pool, group and sample indices).

The samples are split by index: pool ``train`` draws from samples 0-1399, ``test`` from
1400-1796, so no sample of a test strip is in a training strip. Composed strips reuse their
samples, so a held-out share of one pool's strips is made of samples the reader trained on;
``groups=K`` splits the pool's samples into K disjoint groups and composes each strip of one
group's samples, so holding out whole groups (``data.val_share``) holds out strips of
samples no training strip holds. ``group_by="block"`` makes groups of consecutive samples
(consecutive samples share a hand: the closest to writers the data allows), ``"random"``
draws them from the seed. ``scripts/handwritten_strips.py`` is the entry point.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from attnlab.errors import UserError
from attnlab.io import write_text

SPLIT = 1400  # samples [0, SPLIT) make training strips, [SPLIT, 1797) test strips
POOLS = ("train", "test")
Glyphs = Callable[[str, int], tuple[list[torch.Tensor], list[str]]]


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
    paper = 0.85 + 0.15 * float(torch.rand(1, generator=gen))
    contrast = 0.7 + 0.3 * float(torch.rand(1, generator=gen))
    noise = 0.03 * torch.randn(height, width, generator=gen)
    return (paper - paper * contrast * canvas + noise).clamp(0, 1)


def partition(
    n: int, groups: int, longest: int, gen: torch.Generator, by: str = "block"
) -> list[list[int]]:
    """Sample positions 0..n-1 in ``groups`` disjoint groups of (nearly) equal size: runs of
    consecutive samples (``by="block"``) or drawn from ``gen`` (``"random"``); one group of
    all samples when ``groups`` is 0."""
    if groups <= 0:
        return [list(range(n))]
    if n // groups < longest:
        raise UserError(
            f"--groups {groups}: {n // groups} samples a group, fewer than the {longest} "
            f"digits of the longest strip (distinct samples); give fewer groups"
        )
    if by == "block":
        edges = [k * n // groups for k in range(groups + 1)]
        return [list(range(edges[k], edges[k + 1])) for k in range(groups)]
    order = torch.randperm(n, generator=gen).tolist()
    return [sorted(order[k::groups]) for k in range(groups)]


def parse_lengths(text: str) -> tuple[int, int]:
    """``LO-HI`` (inclusive) as two ints, LO >= 1."""
    try:
        lo, hi = (int(v) for v in text.split("-"))
    except ValueError:
        lo, hi = 0, -1
    if not 1 <= lo <= hi:
        raise UserError(f"--lengths {text}: give LO-HI digits, 1 <= LO <= HI (e.g. 1-8)")
    return lo, hi


def write_strips(
    out: Path,
    pool: str,
    lengths: tuple[int, int],
    per_length: int,
    height: int = 32,
    seed: int = 0,
    groups: int = 0,
    group_by: str = "block",
    glyphs: Glyphs | None = None,
) -> str:
    """Compose ``per_length`` strips of each length into ``out`` (PNG files, labels.csv,
    samples.csv) from ``glyphs`` (default: scikit-learn's ``digits``); one line saying what
    was written. A folder that already holds labels.csv is refused."""
    lo, hi = lengths
    if (out / "labels.csv").exists():
        raise UserError(f"{out}/labels.csv exists: choose another folder")
    gen = torch.Generator().manual_seed(seed)
    ink, labels = (glyphs or digits)(pool, round(0.75 * height))
    first = range(SPLIT) if pool == "train" else range(SPLIT, SPLIT + len(ink))
    parts = partition(len(ink), groups, hi, torch.Generator().manual_seed(seed), group_by)
    names = [pool] if groups <= 0 else [f"{pool}-{k:03d}" for k in range(len(parts))]
    out.mkdir(parents=True, exist_ok=True)
    lines, samples = ["filename,label,group"], ["filename,pool,group,samples"]
    n = (hi - lo + 1) * per_length
    for i in range(n):
        length = lo + i // per_length
        k = i % len(parts)  # the groups in turn: each as many strips of each length
        if groups <= 0:  # the pool's composition of old: the same strips for a seed
            pick = torch.randperm(len(ink), generator=gen)[:length].tolist()  # distinct samples
        else:
            pick = [parts[k][j] for j in torch.randperm(len(parts[k]), generator=gen)[:length]]
        label = "".join(labels[j] for j in pick)
        pixels = strip([ink[j] for j in pick], height, gen).numpy()
        name = f"strip_{i:0{len(str(n))}d}_{label}.png"
        Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L").save(out / name)
        lines.append(f"{name},{label},{names[k]}")
        samples.append(f"{name},{pool},{names[k]},{' '.join(str(first[j]) for j in pick)}")
    write_text(out / "samples.csv", "\n".join(samples) + "\n")
    write_text(out / "labels.csv", "\n".join(lines) + "\n")
    return (
        f"wrote {n} strips (lengths {lo}-{hi}, {pool} samples, {len(parts)} group(s) of "
        f"disjoint samples) to {out}"
    )
