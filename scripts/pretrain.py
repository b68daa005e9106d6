"""Make a packaged reader again (``init_from=pretrained``, ``attnlab read IMG --run
pretrained-64``): train the recipe below on synthetic strips at one height, then write its
best.pt, slimmed, to attnlab/weights/pretrained-H.pt with its record (pretrained-H.json:
this command, what it trained on, what it reads on the fixed synthetic test strips) and pin
its digest in lock-pins.toml; or, with --into DIR, write both to DIR and pin nothing (a
candidate). --no-train packages the finished run at --out instead, after checking that this
same command trained it (its .hydra/overrides.yaml): a long pretraining started by hand,
or on another machine, is packaged as if this script had run it.

    python scripts/pretrain.py [--height H] [--out RUN] [--into DIR] [--seed S] \\
        [--minutes M] [--steps N] [--no-train] [extra overrides...]

The recipe is attnlab.maintain.packaging.pretrain_keys(H): the packaged reader of that
height (attnlab.tasks.recipe.PACKAGED), on what attnlab draws: the glyph bank's 69 faces,
bent glyphs, captcha-like clutter and photographic damage (MIXTURE; no captcha-package
image, no MNIST digit). --seed fixes the strips and the weights; --minutes is a budget in
wall time (train.minutes: the schedule is sized to it, --steps stays the ceiling), which
follows the clock and so is not repeatable bit for bit: give --steps alone for that. On 2
CPU cores (one thread, shared with other work) the 32-px steps of 128 strips go at about
2.4 a second and the 64-px ones at about 1.1 (drawing a cluttered strip costs about three
plain ones); the packaged readers trained 25 (32 px) and 80 (64 px) minutes. A GPU
(preset=gpu) is faster: scripts/gpu_check.sh runs the recipe there.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from attnlab.config.overrides import given_keys, override_value, unquoted
from attnlab.maintain.packaging import SEED, package, pretrain_keys
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
        *pretrain_keys(args.height),
        f"seed={args.seed}",
        *budget,
        *args.overrides,
        f"hydra.run.dir={args.out}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--height", type=int, default=pretrained.DEFAULT, choices=pretrained.HEIGHTS,
        help="the height of the reader to make",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help="the training run's folder")
    parser.add_argument(
        "--into",
        type=Path,
        default=None,
        help="write pretrained-H.pt and pretrained-H.json here and pin nothing "
        "(default: attnlab/weights/, its digest pinned in lock-pins.toml)",
    )
    parser.add_argument("--seed", type=int, default=SEED, help="the run's seed")
    parser.add_argument("--minutes", type=float, default=None, help="train.minutes: a budget")
    parser.add_argument("--steps", type=int, default=STEPS, help="train.steps: the ceiling")
    parser.add_argument(
        "--no-train", action="store_true",
        help="package the finished run at --out, which this same command trained",
    )  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for the training")
    args = parser.parse_args(argv)
    args.out = args.out or f"outputs/{pretrained.name_of(args.height)}"
    train = command(args)
    if args.no_train:
        differs = trained_otherwise(Path(args.out), train)
        if differs:
            print(f"pretrain.py: {args.out} was not trained by this command: {differs}")
            return 2
    else:
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
        f"{pretrained.checkpoint_of(args.height, folder)}: {record['reader']} reader, "
        f"{record['backbone']} encoder, step {record['step']}, {record['params']} parameters, "
        f"{spent.get('seconds') or 0:.0f} s of training; reads {reads['exact_acc']:.2%} of "
        f"{reads['strips']} fixed test strips exactly; sha256 {record['sha256']}"
        + (" pinned in lock-pins.toml" if pins is not None else "")
    )
    return 0


def trained_otherwise(run: Path, train: list[str]) -> str | None:
    """What differs between the overrides ``run`` was trained with (its
    .hydra/overrides.yaml) and the command ``train``'s (values compared as YAML reads them:
    80 and 80.0 are one budget); None when they agree."""
    import yaml

    saved = run / ".hydra" / "overrides.yaml"
    if not saved.is_file():
        return f"no {saved}"
    ran = yaml.safe_load(saved.read_text(encoding="utf-8")) or []
    wanted = [a for a in train[2:] if not a.startswith("hydra.run.dir=")]

    def keyed(args: list[str]) -> dict[str, object]:
        keys = given_keys(args)
        return {k: yaml.safe_load(str(unquoted(override_value(args, k)))) for k in keys}

    got, want = keyed(ran), keyed(wanted)
    if got == want:
        return None
    return ", ".join(
        f"{k}: {got.get(k, '(none)')} there, {want.get(k, '(none)')} here"
        for k in sorted(set(got) | set(want))
        if got.get(k) != want.get(k)
    )


if __name__ == "__main__":
    sys.exit(main())
