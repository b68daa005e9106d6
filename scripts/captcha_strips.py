"""Labelled strips that nobody here drew: digit strings rendered by the third-party
``captcha`` package (its own fonts, colours, noise dots, curves and warps).

Needs ``pip install captcha`` (not an attnlab dependency). The folder gets PNG files and
``labels.csv`` (``filename,label``: the columns attnlab reads). Strings are drawn from
``--seed`` (Python's ``random``, which the captcha package also draws its colours, noise
and warps from), so a training set and a test set drawn at other seeds share no image:

    python scripts/captcha_strips.py cap/train --lengths 1-8 --per-length 2500
    python scripts/captcha_strips.py cap/test --lengths 1-10 --per-length 50 \\
        --seed 1

``--width-per-char`` sets the image width per digit (the package draws every string into a
fixed canvas; a canvas that grows with the string keeps the digits' size, as a strip's does).
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path


def lengths(text: str) -> list[int]:
    """``"1-8"`` -> [1, ..., 8]; ``"3"`` -> [3]."""
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def write(out: Path, spans: list[int], per_length: int, seed: int, height: int, per_char: int):
    """``per_length`` captchas of each length in ``spans`` into ``out`` (PNG + labels.csv)."""
    from captcha.image import ImageCaptcha

    out.mkdir(parents=True, exist_ok=False)
    random.seed(seed)  # the package draws from the random module too
    rows = [("filename", "label")]
    for n in spans:
        maker = ImageCaptcha(width=max(2 * height, per_char * n + 20), height=height)
        for i in range(per_length):
            label = "".join(random.choice("0123456789") for _ in range(n))
            name = f"len{n:02d}_{i:05d}.png"
            maker.generate_image(label).convert("L").save(out / name)
            rows.append((name, label))
    tmp = out / "labels.csv.tmp"
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    tmp.rename(out / "labels.csv")
    return len(rows) - 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="a new folder")
    p.add_argument("--lengths", default="1-8", help="inclusive range, e.g. 1-8")
    p.add_argument("--per-length", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--height", type=int, default=60, help="image height, px")
    p.add_argument("--width-per-char", type=int, default=32, help="image width per digit, px")
    a = p.parse_args()
    n = write(a.out, lengths(a.lengths), a.per_length, a.seed, a.height, a.width_per_char)
    print(f"{n} captchas in {a.out}")


if __name__ == "__main__":
    main()
