"""The error of an exact % over strips that share source samples.

Strips composed from a small pool of samples (``scripts/handwritten_strips.py``: 1,600 test
strips of 500 digits, each strip's samples in the folder's ``samples.csv``) are not
independent: a digit the reader misreads fails every strip that holds it, so an interval that
counts strips (the Wilson interval of the per-length table) is too narrow. ``jackknife``
deletes each sample's strips in turn and recomputes, over every sample (the delete-one-group
jackknife). A strip holding several samples is left out of several replicates, so its figure
errs wide, as the strip count errs narrow: the truth lies between the two.

``measure`` gives an evaluation's figures (``SharedSamples``: eval.json records them under
``RECORD``, the report says them beside the evaluation's table: report.findings), ``line``
the line ``attnlab eval`` prints below its table.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

SAMPLES = "samples.csv"  # filename, samples (space-separated indices): handwritten_strips.py
RECORD = "shared_samples"  # eval.json's extra key: SharedSamples.record()


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


@dataclass(frozen=True)
class SharedSamples:
    """What an evaluation of strips that share samples measured: eval.json's
    ``extra["shared_samples"]`` (``record``), the report's line (``report.findings``)."""

    file: str  # the samples.csv read
    strips: int
    samples: int  # the distinct samples the strips read hold
    exact: float  # the exact share, 0-1
    se_by_sample: float  # the delete-one-sample jackknife's standard error, 0-1
    se_by_strip: float  # the standard error counting strips as independent, 0-1

    @property
    def too_narrow(self) -> bool:
        """The strip count's error is below the samples' as printed (no rounding noise)."""
        return round(self.se_by_sample * 100, 2) > round(self.se_by_strip * 100, 2)

    def record(self) -> dict[str, float | int | str]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: object) -> SharedSamples | None:
        """The record eval.json holds; None for one without it or a malformed one."""
        if not isinstance(record, dict) or set(record) != {f.name for f in fields(cls)}:
            return None
        try:
            return cls(
                file=str(record["file"]),
                strips=int(record["strips"]),
                samples=int(record["samples"]),
                exact=float(record["exact"]),
                se_by_sample=float(record["se_by_sample"]),
                se_by_strip=float(record["se_by_strip"]),
            )
        except (TypeError, ValueError):
            return None


def measure(folder: str | Path | None, correct: dict[str, bool]) -> SharedSamples | str | None:
    """The error by sample of an evaluation of ``folder`` whose strips (``correct``, by
    source name) share the samples its ``samples.csv`` names. None for a folder without one;
    a line saying why none is given where the file cannot be read or does not name every
    strip read."""
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
    if math.isnan(se):
        return f"{path}: the strips read hold fewer than two samples: no error by sample given"
    return SharedSamples(
        file=str(path),
        strips=len(values),
        samples=len({sample for s in values for sample in members[s]}),
        exact=mean,
        se_by_sample=se,
        se_by_strip=strip_error(values),
    )


def line(measured: SharedSamples | str | None) -> str | None:
    """The one line ``attnlab eval`` prints below its table for what ``measure`` gave."""
    if measured is None or isinstance(measured, str):
        return measured
    m = measured
    narrow = "; the intervals above count strips and are too narrow" if m.too_narrow else ""
    return (
        f"these {m.strips} strips share {m.samples} source samples ({m.file}): exact "
        f"{m.exact * 100:.2f}%, standard error {m.se_by_sample * 100:.2f} points by the samples' "
        f"jackknife against {m.se_by_strip * 100:.2f} counting strips{narrow} (docs/own-strips.md)"
    )
