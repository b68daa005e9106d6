"""Labelled strips that are not the generator's: handwritten digits composed into strips,
written as a folder ``data=folder`` reads (``scripts/handwritten_strips.py`` is the entry
point). Where the samples come from and how a strip is composed of them is
``attnlab.data.handwritten_pools``'s (scikit-learn's ``load_digits``, or an npz file read by
``attnlab.data.handwritten_npz``).

No sample of a test strip is in a training strip. ``write_strips`` fills a new folder, whole
or not at all (``attnlab.io.folders.atomic_dir``), with PNG files, ``labels.csv``
(``filename,label,group``: the columns ``data=folder`` reads) and ``samples.csv`` (each
strip's pool, group and sample indices in its source); for an npz file, ``source.json``
records the file (its sha256), the split seed and the pools' sizes. Composed strips reuse
their samples, so a held-out share of one pool's strips is made of samples the reader
trained on; ``groups=K`` splits the pool's samples into K disjoint groups and composes each
strip of one group's samples, so holding out whole groups (``data.val_share``) holds out
strips of samples no training strip holds. ``group_by="block"`` makes groups of consecutive
samples (scikit-learn's consecutive samples share a hand: the closest to writers the data
allows), ``"random"`` draws them from the seed (for an npz file, the only choice: its
samples are in label order, so each group gets every digit alike).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from attnlab.data.handwritten_pools import (
    DIGIT_HEIGHT,
    MARGIN,
    Glyphs,
    Pool,
    npz_pool,
    sklearn_pool,
)
from attnlab.errors import UserError
from attnlab.io import write_json, write_text
from attnlab.io.folders import atomic_dir

POOLS = ("train", "test")


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
