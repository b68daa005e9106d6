"""Make the packaged reader again (``init_from=pretrained``, ``attnlab read IMG --run
pretrained``): train the recipe below on synthetic strips, then write its best.pt, slimmed,
to attnlab/weights/pretrained.pt with its record (pretrained.json: this command, what it
trained on, what it reads on the fixed synthetic test strips) and pin its digest in
lock-pins.toml; or, with --into DIR, write both to DIR and pin nothing (a candidate).

    python scripts/pretrain.py [--out RUN] [--into DIR] [--seed S] [--minutes M] \\
        [--steps N] [extra overrides...]

The recipe is attnlab.maintain.packaging.PRETRAIN: the reader `attnlab train data=folder`
trains on strips read at 32 px (attnlab.tasks.recipe), on what attnlab draws: the glyph
bank's 69 faces, bent glyphs, captcha-like clutter and photographic damage (MIXTURE; no
captcha-package image, no MNIST digit). --seed fixes the strips and the weights; --minutes
is a budget in wall time (train.minutes: the schedule is sized to it, --steps stays the
ceiling), which follows the clock and so is not repeatable bit for bit: give --steps alone
for that. On 2 CPU cores (one thread, shared with other work) the steps go at about 2.4 a
second (8 minutes: ~1,100 steps of 128 strips; drawing a cluttered strip costs about three
plain ones), so the default 10,000 steps take about 70 minutes; a GPU (preset=gpu) is
faster: scripts/gpu_check.sh runs the recipe there.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from attnlab.maintain.packaging import PRETRAIN, SEED, package
from attnlab.runs import pretrained

ROOT = Path(__file__).resolve().parent.parent
STEPS = 10_000  # the ceiling of steps of 128 strips


def command(args: argparse.Namespace) -> list[str]:
    """The training command: the recipe, the seed, the budget, the caller's overrides."""
    budget = [f"train.steps={args.steps}"]
    if args.minutes is not None:
        budget.append(f"train.minutes={args.minutes}")
    return [
        "attnlab",
        "train",
        *PRETRAIN,
        f"seed={args.seed}",
        *budget,
        *args.overrides,
        f"hydra.run.dir={args.out}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="outputs/pretrained", help="the training run's folder")
    parser.add_argument(
        "--into",
        type=Path,
        default=None,
        help="write pretrained.pt and pretrained.json here and pin nothing "
        "(default: attnlab/weights/, its digest pinned in lock-pins.toml)",
    )
    parser.add_argument("--seed", type=int, default=SEED, help="the run's seed")
    parser.add_argument("--minutes", type=float, default=None, help="train.minutes: a budget")
    parser.add_argument("--steps", type=int, default=STEPS, help="train.steps: the ceiling")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for the training")
    args = parser.parse_args(argv)
    train = command(args)
    print("+", shlex.join(train), flush=True)
    done = subprocess.run([sys.executable, "-m", "attnlab.cli", *train[1:]])  # this Python's
    if done.returncode != 0:
        return done.returncode
    folder = args.into if args.into is not None else pretrained.FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    pins = None if args.into is not None else ROOT / "lock-pins.toml"
    record = package(Path(args.out), shlex.join(train), pins, folder)
    reads, spent = record["reads"], record["trained_on"].get("trained", {})
    print(
        f"{folder / pretrained.CHECKPOINT.name}: {record['reader']} reader, "
        f"{record['backbone']} encoder, step {record['step']}, {record['params']} parameters, "
        f"{spent.get('seconds') or 0:.0f} s of training; reads {reads['exact_acc']:.2%} of "
        f"{reads['strips']} fixed test strips exactly; sha256 {record['sha256']}"
        + (" pinned in lock-pins.toml" if pins is not None else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
