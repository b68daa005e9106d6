"""Make the packaged reader again (``init_from=pretrained``, ``attnlab read IMG --run
pretrained``): train the recipe below on synthetic strips, then write its best.pt, slimmed,
to attnlab/weights/pretrained.pt with its record (pretrained.json: this command, what it
reads on the fixed synthetic test strips) and pin its digest in lock-pins.toml.

    python scripts/pretrain.py [--out DIR] [extra overrides...]

The recipe is attnlab.tasks.recipe.PACKAGED (the reader `attnlab train data=folder` trains
on strips read at 32 px), on the synthetic default data. On 2 CPU
cores it takes the time scripts/README.md gives; a GPU (train.device=cuda) is faster.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from attnlab.maintain.packaging import PACKAGED, package

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="outputs/pretrained", help="the training run's folder")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for the training")
    args = parser.parse_args()
    train = ["attnlab", "train", *PACKAGED, *args.overrides, f"hydra.run.dir={args.out}"]
    print("+", shlex.join(train), flush=True)
    done = subprocess.run([sys.executable, "-m", "attnlab.cli", *train[1:]])  # this Python's
    if done.returncode != 0:
        return done.returncode
    record = package(Path(args.out), shlex.join(train), ROOT / "lock-pins.toml")
    reads = record["reads"]
    print(
        f"attnlab/weights/pretrained.pt: {record['reader']} reader, {record['backbone']} "
        f"encoder, step {record['step']}, {record['params']} parameters; reads "
        f"{reads['exact_acc']:.2%} of {reads['strips']} fixed test strips exactly; sha256 "
        f"{record['sha256']} pinned in lock-pins.toml"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
