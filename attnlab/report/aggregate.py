"""Seeds -> one row per (training lengths, reader, variant, evaluation, length, split).

Runs are grouped into variants first (`attnlab.report.variants`): only the seeds of one
configuration are aggregated, and a seed that appears twice counts once.

Every per-length metric of `attnlab.evaluation.metrics.METRICS` is aggregated over seeds, so
a metric added there reaches summary.csv without a change here. With `MIN_SEEDS_T` or more seeds the
band is a 95% Student-t interval of the mean; with fewer it is the min-max of the seeds; with
one seed there is no band (its columns stay empty, NaN), and the `interval` column (and every
table and plot) says which one it shows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from attnlab.evaluation.metrics import METRICS, TOTAL, Metric
from attnlab.report.reader_styles import reader_key
from attnlab.report.run_info import RunInfo
from attnlab.report.variants import assign_variants, counted, variant_key

MIN_SEEDS_T = 5  # from this many seeds on, the band is a t-interval; below it, min-max
KEYS = ["train", "reader", "variant", "eval", "length", "split"]

# Two-sided 95% Student-t quantiles t_{0.975, df}, df = 1..30, then 40, 60, 120 and infinity.
# Checked against a numerical integration of the t density to 4 decimals.
_T975 = {
    1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060,
    9: 2.2622, 10: 2.2281, 11: 2.2010, 12: 2.1788, 13: 2.1604, 14: 2.1448, 15: 2.1314,
    16: 2.1199, 17: 2.1098, 18: 2.1009, 19: 2.0930, 20: 2.0860, 21: 2.0796, 22: 2.0739,
    23: 2.0687, 24: 2.0639, 25: 2.0595, 26: 2.0555, 27: 2.0518, 28: 2.0484, 29: 2.0452,
    30: 2.0423, 40: 2.0211, 60: 2.0003, 120: 1.9799,
}  # fmt: skip
_Z975 = 1.9600


def band_columns(metric: Metric) -> tuple[str, str]:
    """The seed-band columns of a metric: its interval columns' names (exact_lo, exact_hi)
    where it has them, so summary.csv keeps the names of the evaluation tables, else
    ``<name>_lo``, ``<name>_hi``."""
    return metric.interval or (f"{metric.name}_lo", f"{metric.name}_hi")


# Columns of `aggregate`'s frame and of summary.csv. Rates are fractions in 0..1.
AGG_COLUMNS = [
    *KEYS,
    "n_seeds",
    *(c for m in METRICS for c in (m.name, *band_columns(m))),
    "interval",
]


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}: exact table for df <= 30, linear in 1/df between 30, 40, 60, 120 and inf."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df in _T975:
        return _T975[df]
    knots = [(30, _T975[30]), (40, _T975[40]), (60, _T975[60]), (120, _T975[120]), (None, _Z975)]
    for (d0, q0), (d1, q1) in zip(knots, knots[1:], strict=False):
        if d1 is None or df < d1:
            x0, x1, x = 1 / d0, (1 / d1 if d1 else 0.0), 1 / df
            return q0 + (q1 - q0) * (x0 - x) / (x0 - x1)
    return _Z975  # pragma: no cover


ONE_SEED = "none"  # the interval kind of one seed: no band, no interval


def interval_kind(n_seeds: int) -> str:
    if n_seeds <= 1:
        return ONE_SEED
    return "t95" if n_seeds >= MIN_SEEDS_T else "min-max"


def band_words(kind: str) -> str:
    words = {"t95": "95% t-interval of the mean", ONE_SEED: "none (1 seed)"}
    return words.get(kind, "min-max over seeds")


def seeds_text(counts: list[int]) -> str:
    """ "3 seeds", "1 seed", "2-5 seeds" for the seed counts of a line or a table column."""
    n = sorted(set(counts))
    if not n:
        return "no seeds"
    text = str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"
    return f"{text} seed{'' if n == [1] else 's'}"


def seed_band(values: np.ndarray, metric: Metric) -> tuple[float, float, float]:
    """(value, lo, hi) over the per-seed values of one metric (NaNs already dropped).

    Summed metrics (``seeds="sum"``) are totals and have no band. A t-interval of a rate is
    cut to [0, 1], where a rate lies.
    """
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    if metric.seeds == "sum":
        return float(values.sum()), math.nan, math.nan
    mean = float(values.mean())
    if interval_kind(n) == ONE_SEED:  # one value is no interval: [8.3, 8.3] would say it is
        return mean, math.nan, math.nan
    if interval_kind(n) == "min-max":
        return mean, float(values.min()), float(values.max())
    half = t_quantile_975(n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if metric.unit == "%":
        lo, hi = max(0.0, lo), min(1.0, hi)
    return mean, lo, hi


def length_key(length: object) -> tuple[int, int]:
    """Lengths in order, the split totals (length "all") last."""
    return (1, 0) if length == TOTAL else (0, int(length))


def train_key(label: str) -> tuple[int, str]:
    """Training ranges by their first length ("1-4" < "1-8" < "2,4,6"), "?" last."""
    m = re.match(r"\d+", label)
    return (int(m.group()) if m else 10**9, label)


def long_frame(runs: list[RunInfo], eval_name: str | None) -> pd.DataFrame:
    """One row per (run, evaluation, table row), with every metric as a float."""
    rows = []
    for run in counted(runs):
        for name in run.evals:
            if eval_name is not None and name != eval_name:
                continue
            for rec in run.eval_tables[name].to_dict("records"):
                raw = str(rec["length"]).strip()
                length = TOTAL if raw == TOTAL else int(raw)
                split = rec.get("split")
                if not isinstance(split, str):
                    split = "seen" if length in run.seen_lengths else "unseen"
                keys = [run.train, run.reader_name, run.variant, name, length, split]
                values = {m.name: pd.to_numeric(rec[m.name], errors="coerce") for m in METRICS}
                rows.append(
                    {**dict(zip(KEYS, keys, strict=True)), "run": str(run.path), "seed": run.seed}
                    | values
                )
    return pd.DataFrame(rows)


def ensure_variants(runs: list[RunInfo]) -> list[str]:
    """Assign variants when discovery has not yet (idempotent); returns the duplicate notes."""
    if any(not r.variant for r in runs):
        return assign_variants(runs)
    return []


def aggregate(runs: list[RunInfo], eval_name: str | None = None) -> pd.DataFrame:
    """Seed aggregate per (train, reader, variant, eval, length, split); columns `AGG_COLUMNS`.

    Every evaluation that counts is aggregated, whatever the run's status; a run that repeats
    the config and seed of another is left out (`variants.counted`). Per-length rows have an
    integer `length`; the totals of each split have `length == "all"` (as in
    metrics_by_length.csv). `n_seeds` counts distinct seeds; a metric's value is the seed
    mean (or sum) with its band in `band_columns(metric)`, as `interval` says. A metric a
    reader lacks (alignment without attention weights) stays NaN. With `eval_name`, only that
    evaluation is aggregated.
    """
    ensure_variants(runs)
    long = long_frame(runs, eval_name)
    if long.empty:
        return pd.DataFrame(columns=AGG_COLUMNS)
    out = []
    for keys, grp in long.groupby(KEYS, sort=False):
        n_seeds = grp["seed"].nunique(dropna=False)  # one run per seed: duplicates are out
        row = {**dict(zip(KEYS, keys, strict=True)), "n_seeds": n_seeds}
        for m in METRICS:
            value, lo, hi = seed_band(grp[m.name].dropna().to_numpy(dtype=float), m)
            row.update({m.name: value, **dict(zip(band_columns(m), (lo, hi), strict=True))})
        row["interval"] = interval_kind(n_seeds)
        out.append(row)
    agg = pd.DataFrame(out, columns=AGG_COLUMNS)
    order = sorted(
        range(len(agg)),
        key=lambda i: (
            train_key(agg.at[i, "train"]),
            reader_key(agg.at[i, "reader"]),
            variant_key(agg.at[i, "variant"]),
            agg.at[i, "eval"],
            length_key(agg.at[i, "length"]),
            agg.at[i, "split"] != "seen",
        ),
    )
    return agg.iloc[order].reset_index(drop=True)


@dataclass
class TrainGroup:
    """The runs trained on one set of lengths, with their aggregate rows: one page section."""

    train: str
    seen: list[int]
    runs: list[RunInfo]
    agg: pd.DataFrame = field(repr=False)

    @property
    def evals(self) -> list[str]:
        return sorted(self.agg["eval"].unique()) if not self.agg.empty else []


def train_groups(runs: list[RunInfo], agg: pd.DataFrame) -> list[TrainGroup]:
    """One group per training range of `runs`, in `train_key` order."""
    groups = []
    for train in sorted({r.train for r in runs}, key=train_key):
        members = [r for r in counted(runs) if r.train == train]
        seen = next((r.seen_lengths for r in members if r.seen_lengths), [])
        rows = agg[agg["train"] == train].reset_index(drop=True)
        groups.append(TrainGroup(train, seen, members, rows))
    return groups
