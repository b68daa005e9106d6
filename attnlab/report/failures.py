"""Failure shares of an evaluation written before the current failure classes.

An older ``metrics_by_length.csv`` has the old classes' columns (``analysis.OLD_FAILURE_MODES``:
stopped_early, skipped_ahead, misread, other_error) and none of ``analysis.FAILURE_MODES``;
its ``readings.csv`` holds every strip's truth and reading, from which the current classes
are recomputed (``analysis.failure_mode``), so old and new evaluations are reported in the
same words. The other old columns are left as they were (they are not report metrics).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnlab.evaluation.analysis import FAILURE_MODES, failure_mode
from attnlab.evaluation.metrics import TOTAL


def recompute_failure_shares(table: pd.DataFrame, readings_csv: Path) -> None:
    """In place, when ``table`` (a metrics_by_length.csv, length as text) lacks a class of
    FAILURE_MODES: every class, as the share of its row's strips, from ``readings_csv``: per
    length, and per split total over the lengths the table puts in that split. Nothing is
    added when readings.csv is missing, unreadable, or does not hold the table's strips
    (the report then shows the missing classes as not measured)."""
    if all(m in table.columns for m in FAILURE_MODES) or not readings_csv.is_file():
        return
    try:
        strips = pd.read_csv(
            readings_csv, dtype={"truth": str, "reading": str}, keep_default_na=False
        )
        lengths = strips["truth"].str.len()
        modes = pd.Series(
            [failure_mode(t, r) for t, r in zip(strips["truth"], strips["reading"], strict=True)]
        )
    except (OSError, ValueError, KeyError):
        return
    rows = table["length"].astype(str).str.strip()
    split_of = {int(n): s for n, s in zip(rows, table["split"], strict=True) if n != TOTAL}
    shares: dict[str, list[float]] = {m: [] for m in FAILURE_MODES}
    for length, split, n in zip(rows, table["split"], table["n"], strict=True):
        if length == TOTAL:
            mine = lengths.map(lambda x, s=split: split_of.get(x) == s)
        else:
            mine = lengths == int(length)
        if int(mine.sum()) != int(n):  # not the strips this row counted
            return
        for m in FAILURE_MODES:
            shares[m].append(float((modes[mine] == m).mean()))
    for m in FAILURE_MODES:  # misread too: the old column counted shifted readings as well
        table[m] = shares[m]
