"""Exact % of an evaluation whose strips share source samples, with a jackknife over them.

Strips composed from a small pool of samples (``handwritten_strips.py``: 1,600 test strips of
500 digits) are not independent: a digit the reader misreads fails every strip that holds
it, so an interval that counts strips (the Wilson interval ``attnlab eval`` prints) is too
narrow. This deletes each sample's strips in turn and recomputes, over every sample
(the delete-one-group jackknife). A strip holding several samples is left out of several
replicates, so the figure errs wide; the strip count errs narrow; the truth lies between.

    python scripts/sample_jackknife.py hw/test9/samples.csv RUN/eval/folder-test9-*/readings.csv
    python scripts/sample_jackknife.py hw/test9/samples.csv A/.../readings.csv B/.../readings.csv

With two evaluations of the same strips it gives B - A, paired. ``samples.csv`` is the one
``handwritten_strips.py`` writes (``filename`` and ``samples``, space-separated indices);
``readings.csv`` is the one ``attnlab eval`` writes (``source`` and ``correct``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from attnlab.evaluation.shared_samples import jackknife, read_members, strip_error


class BadInput(Exception):
    """One line naming the file and what is wrong with it."""


def read_samples(path: Path) -> dict[str, list[str]]:
    members = read_members(path)
    if members is None:
        raise BadInput(f"{path}: needs the columns filename and samples (handwritten_strips.py)")
    return members


def read_correct(path: Path, members: dict[str, list[str]]) -> dict[str, float]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"source", "correct"} <= set(rows[0]):
        raise BadInput(f"{path}: needs the columns source and correct (attnlab eval)")
    missing = [row["source"] for row in rows if row["source"] not in members]
    if missing:
        raise BadInput(f"{path}: strip {missing[0]} is not in samples.csv ({len(missing)} such)")
    return {row["source"]: float(row["correct"] == "True") for row in rows}


def report(samples: Path, readings: list[Path]) -> str:
    members = read_samples(samples)
    first = read_correct(readings[0], members)
    values, what = first, f"{readings[0]}"
    if len(readings) == 2:
        second = read_correct(readings[1], members)
        if set(second) != set(first):
            raise BadInput(f"{readings[1]}: not the strips of {readings[0]}: cannot be paired")
        values = {s: second[s] - first[s] for s in first}
        what = f"B - A, B = {readings[1]}"
    mean, se = jackknife(values, members)
    strips = len(values)
    pool = len({s for strip in values for s in members[strip]})
    figure = f"{mean * 100:+.2f} points" if len(readings) == 2 else f"exact {mean * 100:.2f}%"
    return (
        f"{what}: {figure} over {strips} strips of {pool} samples; standard error "
        f"{se * 100:.2f} points by the samples' jackknife, {strip_error(values) * 100:.2f} "
        f"counting strips; about [{(mean - 1.96 * se) * 100:.1f}, {(mean + 1.96 * se) * 100:.1f}]"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("samples", type=Path, help="the test folder's samples.csv")
    parser.add_argument("readings", type=Path, nargs="+", help="readings.csv: A, or A and B")
    args = parser.parse_args(argv)
    if len(args.readings) > 2:
        parser.error("one readings.csv, or two to pair")
    try:
        print(report(args.samples, args.readings))
    except (BadInput, OSError) as e:
        print(f"sample_jackknife: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
