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

    python scripts/handwritten_strips.py hw/train --images train --lengths 1-8 \\
        --per-length 2500
    python scripts/handwritten_strips.py hw/test --images test --lengths 1-16 \\
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
import sys
from pathlib import Path

from attnlab.data import handwritten
from attnlab.errors import UserError, one_line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("out", type=Path, help="folder to write (PNG files + labels.csv)")
    p.add_argument("--images", choices=handwritten.POOLS, required=True, help="sample pool")
    p.add_argument("--lengths", default="1-16", help="LO-HI digits per strip (inclusive)")
    p.add_argument("--per-length", type=int, default=200, help="strips of each length")
    p.add_argument("--height", type=int, default=32, help="strip height in px (data.height)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--groups",
        type=int,
        default=0,
        help="split the pool's samples into this many disjoint groups, each strip composed of "
        "one group's samples (0: one group, the pool)",
    )
    p.add_argument(
        "--group-by",
        choices=("block", "random"),
        default="block",
        help="groups of consecutive samples (block: closest to writers) or drawn from --seed",
    )
    args = p.parse_args(argv)
    try:
        lengths = handwritten.parse_lengths(args.lengths)
        said = handwritten.write_strips(
            args.out,
            args.images,
            lengths,
            args.per_length,
            args.height,
            args.seed,
            args.groups,
            args.group_by,
        )
    except UserError as err:
        print(f"handwritten_strips: error: {one_line(err)}", file=sys.stderr)
        return 2
    print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main())
