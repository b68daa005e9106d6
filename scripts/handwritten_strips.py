"""Labelled strips that are not the generator's: handwritten digits composed into strips.

Needs scikit-learn (``pip install scikit-learn``; not an attnlab dependency): its bundled
``load_digits`` holds 1,797 handwritten digits (8x8 grey, 0-16) scanned from 43 writers
(UCI "Optical Recognition of Handwritten Digits"). Each strip takes distinct samples, each
upscaled to about three quarters of the strip height, with small random gaps, margins and
vertical jitter: dark ink on light paper. The folder gets PNG files, ``labels.csv``
(``filename,label,group``: the columns attnlab reads) and ``samples.csv`` (which samples
each strip is composed of: its pool, group and sample indices).

The samples are split by index: ``--images train`` draws from samples 0-1399, ``--images
test`` from 1400-1796, so no handwritten sample of a test strip is in a training strip:

    python scripts/handwritten_strips.py /work/data/hw/train --images train --lengths 1-8 \\
        --per-length 2500
    python scripts/handwritten_strips.py /work/data/hw/test --images test --lengths 1-16 \\
        --per-length 200 --seed 1

Composed strips reuse their samples: 11,200 strips of lengths 1-8 hold each of 1,400
samples about 36 times, so a held-out share of such a folder is made of samples the reader
trained on, and measures recall of them. Test them on the other pool (``data.val_path``),
or give ``--groups K``: the pool's samples are split into K disjoint groups and each strip
is composed of one group's samples only, so ``data.val_share``, which holds out whole
groups, holds out strips of samples no training strip holds. Without ``--groups`` the group
column names the pool (one group: strips of a pool share samples).

The data set says nothing of who wrote which sample, but its order does: an SVM on single
digits (``SVC(gamma=0.05)``, 1,003 samples of 0-1399) reads 98.2% of random held-out samples
of 0-1399 and only 92.6% of samples 1400-1796; trained on the rest of 0-1399, it reads
93.7%, 93.1%, 96.3% and 97.1% of the consecutive blocks 0-349, 350-699, 700-1049,
1050-1399 (2026-12-04). Consecutive samples share a hand more than random ones, so
``--group-by block`` (the default) makes groups of consecutive samples, the closest to
writers the data allows, and the test pool (1400-1796) is such a block. ``--group-by
random`` draws the groups from ``--seed``: held-out groups then share writers with the
training ones and read higher than the test pool does (scripts/README.md, the data-needs
curve).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

SPLIT = 1400  # samples [0, SPLIT) make training strips, [SPLIT, 1797) test strips


def glyphs(pool: str, size: int) -> tuple[list[torch.Tensor], list[str]]:
    """The pool's samples as ink (size, w) in [0, 1], cropped to their inked columns."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.from_numpy(digits.images).float() / 16.0  # (1797, 8, 8), 1 = full ink
    labels = [str(int(t)) for t in digits.target]
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
        raise SystemExit(
            f"--groups {groups}: {n // groups} samples a group, fewer than the {longest} "
            f"digits of the longest strip (distinct samples); give fewer groups"
        )
    if by == "block":
        edges = [k * n // groups for k in range(groups + 1)]
        return [list(range(edges[k], edges[k + 1])) for k in range(groups)]
    order = torch.randperm(n, generator=gen).tolist()
    return [sorted(order[k::groups]) for k in range(groups)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", type=Path, help="folder to write (PNG files + labels.csv)")
    p.add_argument("--images", choices=("train", "test"), required=True, help="sample pool")
    p.add_argument("--lengths", default="1-16", help="LO-HI digits per strip (inclusive)")
    p.add_argument("--per-length", type=int, default=200, help="strips of each length")
    p.add_argument("--height", type=int, default=32, help="strip height in px (data.height)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--groups", type=int, default=0,
        help="split the pool's samples into this many disjoint groups, each strip composed of "
        "one group's samples (0: one group, the pool)",
    )  # fmt: skip
    p.add_argument(
        "--group-by", choices=("block", "random"), default="block",
        help="groups of consecutive samples (block: closest to writers) or drawn from --seed",
    )  # fmt: skip
    args = p.parse_args()
    lo, hi = (int(v) for v in args.lengths.split("-"))
    gen = torch.Generator().manual_seed(args.seed)
    ink, labels = glyphs(args.images, round(0.75 * args.height))
    if (args.out / "labels.csv").exists():
        raise SystemExit(f"{args.out}/labels.csv exists: choose another folder")
    first = range(SPLIT) if args.images == "train" else range(SPLIT, SPLIT + len(ink))
    groups = partition(
        len(ink), args.groups, hi, torch.Generator().manual_seed(args.seed), args.group_by
    )
    names = (
        [args.images]
        if args.groups <= 0
        else [f"{args.images}-{k:03d}" for k in range(len(groups))]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    lines, samples = ["filename,label,group"], ["filename,pool,group,samples"]
    n = (hi - lo + 1) * args.per_length
    for i in range(n):
        length = lo + i // args.per_length
        k = i % len(groups)  # the groups in turn: each as many strips of each length
        members = groups[k]
        if args.groups <= 0:  # the pool's composition of old: the same strips for a seed
            pick = torch.randperm(len(ink), generator=gen)[:length].tolist()  # distinct samples
        else:
            pick = [members[j] for j in torch.randperm(len(members), generator=gen)[:length]]
        label = "".join(labels[j] for j in pick)
        pixels = strip([ink[j] for j in pick], args.height, gen).numpy()
        name = f"strip_{i:0{len(str(n))}d}_{label}.png"
        Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L").save(args.out / name)
        lines.append(f"{name},{label},{names[k]}")
        samples.append(f"{name},{args.images},{names[k]},{' '.join(str(first[j]) for j in pick)}")
    (args.out / "samples.csv").write_text("\n".join(samples) + "\n")
    (args.out / "labels.csv").write_text("\n".join(lines) + "\n")
    print(
        f"wrote {n} strips (lengths {lo}-{hi}, {args.images} samples, {len(groups)} group(s) of "
        f"disjoint samples) to {args.out}"
    )


if __name__ == "__main__":
    main()
