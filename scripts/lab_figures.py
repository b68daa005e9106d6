"""The lab handout's figures (docs/lab.md), regenerated from real runs.

Runs every command of the handout at one named budget into a folder, one training process at
a time (``hydra/launcher=basic``, ``train.threads=1``), then computes each figure the handout
quotes from the files those commands wrote (attnlab.maintain.labcommands runs them,
attnlab.maintain.labfigures computes the figures). The handout holds each figure between
markers (attnlab.maintain.labdoc)::

    <!-- lab:comparison -->
    ...
    <!-- /lab -->

    python scripts/lab_figures.py lab/             # run what is missing, print the figures
    python scripts/lab_figures.py lab/ --write     # ... and write them into docs/lab.md
    python scripts/lab_figures.py lab/ --check     # exit 1 naming each figure that differs

A step whose outputs are already in the folder is not run again, so ``--check`` on a finished
folder only recomputes. Run it from the repository's root. Needs scikit-learn for the
handwritten step (``pip install scikit-learn``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# the names the tests and older notebooks read from this script
from attnlab.maintain.labcommands import BUDGETS, commands, run_all  # noqa: F401
from attnlab.maintain.labdoc import read_blocks, stale, sync, write_blocks  # noqa: F401
from attnlab.maintain.labfigures import (  # noqa: F401
    FIGURES,
    at_length,
    diff_line,
    explorer_figure,
    fair_figure,
    figures,
    pct,
    split_totals,
)

HANDOUT = Path(__file__).resolve().parents[1] / "docs" / "lab.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder for the handout's runs")
    ap.add_argument("--budget", choices=sorted(BUDGETS), default="lab")
    ap.add_argument("--doc", "--readme", type=Path, default=HANDOUT, help="the handout")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the figures into the handout")
    mode.add_argument("--check", action="store_true", help="exit 1 if a handout figure differs")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    spent = run_all(args.out, BUDGETS[args.budget], print)
    if spent:
        steps = ", ".join(f"{k} {v:.0f} s" for k, v in spent.items())
        print(f"ran in {time.monotonic() - t0:.0f} s ({steps})")
    return sync(args.doc, figures(args.out), args.write, args.check)


if __name__ == "__main__":
    sys.exit(main())
