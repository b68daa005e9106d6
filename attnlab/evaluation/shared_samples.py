"""The error of an exact % over strips that share source samples.

Strips composed from a small pool of samples (``scripts/handwritten_strips.py``: 1,600 test
strips of 500 digits, each strip's samples in the folder's ``samples.csv``) are not
independent: a digit the reader misreads fails every strip that holds it, so an interval that
counts strips (the Wilson interval of the per-length table) is too narrow. ``jackknife``
deletes each sample's strips in turn and recomputes, over every sample (the delete-one-group
jackknife). A strip holding several samples is left out of several replicates, so its figure
errs wide, as the strip count errs narrow: the truth lies between the two.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

SAMPLES = "samples.csv"  # filename, samples (space-separated indices): handwritten_strips.py


def jackknife(values: dict[str, float], members: dict[str, list[str]]) -> tuple[float, float]:
    """The mean of ``values`` (one per strip) and its delete-one-sample jackknife standard
    error (nan with fewer than two replicates), ``members`` naming each strip's samples."""
    total, count = sum(values.values()), len(values)
    held: dict[str, list[str]] = {}
    for strip in values:
        for sample in set(members[strip]):
            held.setdefault(sample, []).append(strip)
    replicates = []
    for strips in held.values():
        left = count - len(strips)
        if left:
            replicates.append((total - sum(values[s] for s in strips)) / left)
    n = len(replicates)
    if n < 2:
        return total / count, math.nan
    mean = sum(replicates) / n
    return total / count, math.sqrt((n - 1) / n * sum((r - mean) ** 2 for r in replicates))


def read_members(path: Path) -> dict[str, list[str]] | None:
    """Each strip's samples from a ``samples.csv``; None where the file lacks the columns."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"filename", "samples"} <= set(rows[0]):
        return None
    return {row["filename"]: row["samples"].split() for row in rows}


def strip_error(values: dict[str, float]) -> float:
    """The standard error of the mean of ``values`` counting strips as independent."""
    n = len(values)
    mean = sum(values.values()) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values.values()) / max(n - 1, 1) / n)


def line(folder: str | Path | None, correct: dict[str, bool]) -> str | None:
    """One line for an evaluation of ``folder`` whose strips (``correct``, by source name)
    share samples its ``samples.csv`` names: the exact % with both errors. None for a folder
    without one; a line saying so where the file does not name every strip read."""
    if not folder or not (Path(folder) / SAMPLES).is_file() or not correct:
        return None
    path = Path(folder) / SAMPLES
    try:  # a side file: one that cannot be read costs this line, never the evaluation
        members = read_members(path)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        return f"{path} could not be read ({e}): no error by sample given"
    if members is None or any(s not in members for s in correct):
        return f"{path} does not name the samples of every strip read: no error by sample given"
    values = {s: float(ok) for s, ok in correct.items()}
    mean, se = jackknife(values, members)
    pool = len({sample for s in values for sample in members[s]})
    by_strip = strip_error(values)
    wider = round(se * 100, 2) > round(by_strip * 100, 2)  # as printed: no rounding noise
    narrow = "; the intervals above count strips and are too narrow" if wider else ""
    return (
        f"these {len(values)} strips share {pool} source samples ({path}): exact "
        f"{mean * 100:.2f}%, standard error {se * 100:.2f} points by the samples' jackknife "
        f"against {by_strip * 100:.2f} counting strips{narrow} (docs/own-strips.md)"
    )
