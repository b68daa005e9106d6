"""Labelled strips that are not the generator's: handwritten digits composed into strips.

Needs scikit-learn (``pip install scikit-learn``; not an attnlab dependency): its bundled
``load_digits`` holds 1,797 handwritten digits (8x8 grey, 0-16) scanned from 43 writers
(UCI "Optical Recognition of Handwritten Digits"). Each strip takes distinct samples, each
upscaled to about three quarters of the strip height, with small random gaps, margins and
vertical jitter: dark ink on light paper. The folder gets PNG files and ``labels.csv``
(``filename,label``), as ``attnlab data export`` writes it.

The samples are split by index: ``--images train`` draws from samples 0-1399, ``--images
test`` from 1400-1796, so no handwritten sample of a test strip is in a training strip:

    python scripts/handwritten_strips.py /work/data/hw/train --images train --lengths 1-8 \\
        --per-length 2500
    python scripts/handwritten_strips.py /work/data/hw/test --images test --lengths 1-16 \\
        --per-length 200 --seed 1
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", type=Path, help="folder to write (PNG files + labels.csv)")
    p.add_argument("--images", choices=("train", "test"), required=True, help="sample pool")
    p.add_argument("--lengths", default="1-16", help="LO-HI digits per strip (inclusive)")
    p.add_argument("--per-length", type=int, default=200, help="strips of each length")
    p.add_argument("--height", type=int, default=32, help="strip height in px (data.height)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    lo, hi = (int(v) for v in args.lengths.split("-"))
    gen = torch.Generator().manual_seed(args.seed)
    ink, labels = glyphs(args.images, round(0.75 * args.height))
    if (args.out / "labels.csv").exists():
        raise SystemExit(f"{args.out}/labels.csv exists: choose another folder")
    args.out.mkdir(parents=True, exist_ok=True)
    lines = ["filename,label"]
    n = (hi - lo + 1) * args.per_length
    for i in range(n):
        length = lo + i // args.per_length
        pick = torch.randperm(len(ink), generator=gen)[:length].tolist()  # distinct samples
        label = "".join(labels[j] for j in pick)
        pixels = strip([ink[j] for j in pick], args.height, gen).numpy()
        name = f"strip_{i:0{len(str(n))}d}_{label}.png"
        Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L").save(args.out / name)
        lines.append(f"{name},{label}")
    (args.out / "labels.csv").write_text("\n".join(lines) + "\n")
    print(f"wrote {n} strips (lengths {lo}-{hi}, {args.images} samples) to {args.out}")


if __name__ == "__main__":
    main()
