"""Labelled strips that are not the generator's: handwritten digits composed into strips.

Two sources of digits (``attnlab/data/handwritten_pools.py`` says how each is composed):

- ``--npz PATH``: a file of real handwritten digits, ``images`` uint8 (N, 28, 28), white ink
  on black (MNIST's form), and ``labels`` (N,) 0-9, read where it is (never copied), such
  as the project's 2,500 MNIST digits, ``../shared/data/handwritten_digits.npz``. Its samples
  are split by sample, stratified by digit: a fifth of each digit (50 of 250) is pool
  ``test``, the other 2,000 pool ``train``, fixed by ``--split-seed`` (0; recorded in the
  folder's ``source.json`` with the file's sha256; give every folder of one measurement the
  same). Strips are composed as a writer writes: each digit cropped to its ink, 28-40 px
  high (2.4-3.4 mm at 300 dpi) on strips 40-56 px high, the writer's own gaps (sometimes
  touching), slight baseline jitter, dark ink on light paper. Groups are drawn at random,
  each holding every digit alike (the file is in label order: ``--group-by block`` is
  refused), and ``--height`` does not apply (the strips take their height as scanned).
  Do not train, validate or choose on MNIST digits other than the file's: the rest of MNIST
  is the project's independent test.
- scikit-learn (the default; ``pip install scikit-learn``, not an attnlab dependency): its
  bundled ``load_digits`` holds 1,797 handwritten digits (8x8 grey, 0-16) scanned from 43
  writers (UCI "Optical Recognition of Handwritten Digits"), each upscaled to about three
  quarters of ``--height``, with small random gaps, margins and vertical jitter. Its samples
  are split by index: ``--images train`` draws from samples 0-1399, ``--images test`` from
  1400-1796.

The folder (new or empty; written whole or not at all) gets PNG files, ``labels.csv``
(``filename,label,group``: the columns attnlab reads) and ``samples.csv`` (which samples
each strip is composed of: its pool, group and sample indices in the source). No sample of a
test strip is in a training strip:

    # the npz file: train on the 2,000-digit pool, validate on held-out groups, test on
    # the 500-digit pool (another --seed, the same --split-seed)
    python scripts/handwritten_strips.py hw/train --npz ../shared/data/handwritten_digits.npz \\
        --images train --lengths 1-8 --per-length 2500 --groups 40
    python scripts/handwritten_strips.py hw/test --npz ../shared/data/handwritten_digits.npz \\
        --images test --lengths 1-8 --per-length 100 --seed 1
    attnlab train data=folder data.path=hw/train data.val_share=0.1
    attnlab eval RUN --folder hw/test

    # scikit-learn's digits
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

scikit-learn's data set says nothing of who wrote which sample, but its order does: an SVM on
single digits (``SVC(gamma=0.05)``, 1,003 samples of 0-1399) reads 98.2% of random held-out
samples of 0-1399 and only 92.6% of samples 1400-1796; trained on the rest of 0-1399, it
reads 93.7%, 93.1%, 96.3% and 97.1% of the consecutive blocks 0-349, 350-699, 700-1049,
1050-1399 (2026-12-04). Consecutive samples share a hand more than random ones, so for it
``--group-by block`` (its default) makes groups of consecutive samples, the closest to
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
    p.add_argument(
        "--npz",
        type=Path,
        default=None,
        help="digits from this npz file (images (N, 28, 28) uint8 white on black, labels); "
        "default: scikit-learn's",
    )
    p.add_argument(
        "--split-seed",
        type=int,
        default=0,
        help="with --npz: the seed of its train/test pools (the same for every folder)",
    )
    p.add_argument("--lengths", default="1-16", help="LO-HI digits per strip (inclusive)")
    p.add_argument("--per-length", type=int, default=200, help="strips of each length")
    p.add_argument("--height", type=int, default=None, help="strip height in px (scikit-learn: 32)")
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
        default=None,
        help="groups of consecutive samples (block, scikit-learn's default: closest to "
        "writers) or drawn from --seed (random, --npz's only choice)",
    )
    args = p.parse_args(argv)
    try:
        said = handwritten.write_strips(
            args.out,
            args.images,
            handwritten.parse_lengths(args.lengths),
            args.per_length,
            args.height,
            args.seed,
            args.groups,
            args.group_by,
            npz=args.npz,
            split_seed=args.split_seed,
        )
    except UserError as err:
        print(f"handwritten_strips: error: {one_line(err)}", file=sys.stderr)
        return 2
    print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main())
