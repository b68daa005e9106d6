"""Labelled strips that are not the generator's: handwritten digits composed into strips.

Two sources of samples. **scikit-learn** (the default): ``load_digits`` holds 1,797
handwritten digits (8x8 grey, 0-16) scanned from 43 writers (UCI "Optical Recognition of
Handwritten Digits"); scikit-learn is not an attnlab dependency, and only ``digits`` imports
it. Each strip takes distinct samples, each upscaled to about three quarters of the strip
height, with small random gaps, margins and vertical jitter. Its samples are split by index:
pool ``train`` draws from samples 0-1399, ``test`` from 1400-1796.

**An npz file** (``npz=PATH``): ``images`` uint8 (N, 28, 28), white ink on black as MNIST
draws it (each digit scaled into a 20 x 20 box), and ``labels`` (N,) digits 0-9, such as the
project's 2,500 MNIST digits (``../shared/data/handwritten_digits.npz``; it is read where it
is, never copied). Its samples are split by sample, stratified by digit and fixed by
``split_seed``: a fifth of each digit (50 of 250) is pool ``test``, the rest pool ``train``.
Strips are composed as a writer writes (``written``): each digit cropped to its ink, a
digit height of 28-40 px for the strip (digits 2.4-3.4 mm high scanned at 300 dpi) with
6-8 px of paper above and below (strips 40-56 px high), gaps from the writer's own spacing
(sometimes touching or overlapping by a pixel or two), slight baseline jitter, anti-aliased
scaling, dark ink on light paper. ``source.json`` records the file (its sha256), the split
seed and the pools' sizes.

No sample of a test strip is in a training strip. ``write_strips`` fills a new folder, whole
or not at all (``attnlab.io.atomic_dir``), with PNG files, ``labels.csv``
(``filename,label,group``: the columns ``data=folder`` reads) and ``samples.csv`` (each
strip's pool, group and sample indices in its source). Composed strips reuse their samples,
so a held-out share of one pool's strips is made of samples the reader trained on;
``groups=K`` splits the pool's samples into K disjoint groups and composes each strip of one
group's samples, so holding out whole groups (``data.val_share``) holds out strips of
samples no training strip holds. ``group_by="block"`` makes groups of consecutive samples
(scikit-learn's consecutive samples share a hand: the closest to writers the data allows),
``"random"`` draws them from the seed (for an npz file, the only choice: its samples are in
label order, so each group gets every digit alike). ``scripts/handwritten_strips.py`` is
the entry point.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from attnlab.errors import UserError
from attnlab.io import atomic_dir, file_digest, write_json, write_text

SPLIT = 1400  # samples [0, SPLIT) make training strips, [SPLIT, 1797) test strips
POOLS = ("train", "test")
TEST_SHARE = 0.2  # of each digit of an npz file: its test pool (50 of 250)
FEWEST = 5  # samples of each digit an npz file must hold (one or more in each pool)
SIDE, BOX = 28, 20  # MNIST: each digit scaled into a 20 x 20 box of a 28 x 28 image
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


def load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``images`` (N, 28, 28) uint8, white on black, and ``labels`` (N,) 0-9 of an npz file,
    checked: anything else is one UserError line naming the file and what is wrong."""
    where = f"--npz {path}"
    if not path.is_file():
        raise UserError(f"{where}: {'not a file' if path.exists() else 'no such file'}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, AttributeError, TypeError) as err:
        raise UserError(f"{where}: not a NumPy .npz file of arrays ({err})") from err
    want = f"images (N, {SIDE}, {SIDE}) uint8 and labels (N,) integers 0-9"
    missing = [k for k in ("images", "labels") if k not in arrays]
    if missing:
        held = ", ".join(sorted(arrays)) or "nothing"
        raise UserError(f"{where}: no {' or '.join(missing)} array (it holds {held}); want {want}")
    images, labels = arrays["images"], arrays["labels"]
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (SIDE, SIDE):
        raise UserError(f"{where}: images is {images.dtype} {images.shape}; want {want}")
    if labels.shape != (len(images),) or not np.issubdtype(labels.dtype, np.integer):
        raise UserError(
            f"{where}: labels is {labels.dtype} {labels.shape} for {len(images)} images; "
            f"want {want}"
        )
    _check_samples(where, images, labels)
    return images, labels.astype(np.int64)


def _check_samples(where: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Labels 0-9, at least FEWEST of each digit, every image inked, white on black."""
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise UserError(f"{where}: labels run {labels.min()}-{labels.max()}; want digits 0-9")
    counts = np.bincount(labels, minlength=10)
    if counts.min() < FEWEST:
        d = int(counts.argmin())
        raise UserError(
            f"{where}: digit {d} has {counts[d]} sample(s); each of 0-9 needs {FEWEST} or more "
            f"(a fifth of each digit is the test pool)"
        )
    blank = np.flatnonzero(images.reshape(len(images), -1).max(1) == 0)
    if blank.size:
        raise UserError(f"{where}: image {blank[0]} holds no ink ({blank.size} such)")
    if np.median(images) > 127:
        raise UserError(f"{where}: images look dark on light; want white ink on black (MNIST)")


def split_pools(labels: np.ndarray, seed: int) -> dict[str, list[int]]:
    """Sample indices of each pool: TEST_SHARE of each digit (drawn from ``seed``) in
    ``test``, the rest in ``train``; disjoint, sorted, fixed by the seed."""
    gen = torch.Generator().manual_seed(seed)
    test: list[int] = []
    for d in range(10):
        of = np.flatnonzero(labels == d)
        k = max(1, round(TEST_SHARE * len(of)))
        test += of[torch.randperm(len(of), generator=gen)[:k].numpy()].tolist()
    held = set(test)
    return {"train": [i for i in range(len(labels)) if i not in held], "test": sorted(test)}


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


def partition(
    n: int,
    groups: int,
    longest: int,
    gen: torch.Generator,
    by: str = "block",
    labels: list[str] | None = None,
) -> list[list[int]]:
    """Sample positions 0..n-1 in ``groups`` disjoint groups of (nearly) equal size: runs of
    consecutive samples (``by="block"``) or drawn from ``gen`` (``"random"``; with
    ``labels``, dealt digit by digit, so each group holds every digit alike); one group of
    all samples when ``groups`` is 0."""
    if n < longest:
        raise UserError(
            f"--lengths: {n} samples in the pool, fewer than the {longest} digits of the "
            f"longest strip (distinct samples); give shorter lengths"
        )
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
    if labels is not None:
        order.sort(key=lambda j: labels[j])  # stable: each digit's samples in drawn order
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


def open_pool(
    pool: str,
    height: int | None,
    group_by: str | None,
    glyphs: Glyphs | None,
    npz: Path | None,
    split_seed: int,
) -> tuple[Pool, str]:
    """The pool of the source asked for and how its groups are formed; options that do not
    fit the source are refused."""
    if npz is None:
        return sklearn_pool(pool, height or 32, glyphs), group_by or "block"
    if height is not None:
        raise UserError(
            f"--height {height}: strips of --npz digits take their own height "
            f"({MARGIN[0] * 2 + DIGIT_HEIGHT[0]}-{MARGIN[1] * 2 + DIGIT_HEIGHT[1]} px, "
            f"as scanned); leave --height out"
        )
    if group_by == "block":
        raise UserError(
            "--group-by block: an npz file's samples are in label order, so a block would "
            "hold one digit; use --group-by random (each group every digit alike)"
        )
    return npz_pool(Path(npz), pool, split_seed), "random"


def write_strips(
    out: Path,
    pool: str,
    lengths: tuple[int, int],
    per_length: int,
    height: int | None = None,
    seed: int = 0,
    groups: int = 0,
    group_by: str | None = None,
    glyphs: Glyphs | None = None,
    npz: Path | None = None,
    split_seed: int = 0,
) -> str:
    """Compose ``per_length`` strips of each length into the new folder ``out`` (PNG files,
    labels.csv, samples.csv; source.json for an npz file) from scikit-learn's ``digits``
    (``glyphs``: stand-ins; ``height``: 32 by default) or from the ``npz`` file's pool
    (``split_seed`` fixes its pools); one line saying what was written. A folder that
    already holds files is refused."""
    lo, hi = lengths
    if (out / "labels.csv").exists():
        raise UserError(f"{out}/labels.csv exists: choose another folder")
    if out.is_dir() and any(out.iterdir()):
        raise UserError(f"{out} holds files: choose a new or empty folder")
    source, by = open_pool(pool, height, group_by, glyphs, npz, split_seed)
    strat = source.labels if source.record is not None else None
    parts = partition(len(source.ink), groups, hi, torch.Generator().manual_seed(seed), by, strat)
    names = [pool] if groups <= 0 else [f"{pool}-{k:03d}" for k in range(len(parts))]
    n = (hi - lo + 1) * per_length
    gen = torch.Generator().manual_seed(seed)

    def fill(work: Path) -> None:
        lines, samples = ["filename,label,group"], ["filename,pool,group,samples"]
        for i in range(n):
            length, k = lo + i // per_length, i % len(parts)  # the groups in turn
            if groups <= 0:  # the pool's composition of old: the same strips for a seed
                pick = torch.randperm(len(source.ink), generator=gen)[:length].tolist()
            else:
                pick = [parts[k][j] for j in torch.randperm(len(parts[k]), generator=gen)[:length]]
            label = "".join(source.labels[j] for j in pick)
            pixels = source.compose([source.ink[j] for j in pick], gen).numpy()
            name = f"strip_{i:0{len(str(n))}d}_{label}.png"
            Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L").save(work / name)
            lines.append(f"{name},{label},{names[k]}")
            ids = " ".join(str(source.index[j]) for j in pick)
            samples.append(f"{name},{pool},{names[k]},{ids}")
        if source.record is not None:
            write_json(work / "source.json", {**source.record, "seed": seed, "groups": groups})
        write_text(work / "samples.csv", "\n".join(samples) + "\n")
        write_text(work / "labels.csv", "\n".join(lines) + "\n")

    atomic_dir(out, fill)
    what = f"{pool} samples" if npz is None else f"{pool} samples of {npz}"
    return (
        f"wrote {n} strips (lengths {lo}-{hi}, {what}, {len(parts)} group(s) of "
        f"disjoint samples) to {out}"
    )
