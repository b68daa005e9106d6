"""Readings -> numbers: exact-string accuracy, CER, error kinds, attention alignment.

Everything here is pure (numpy/pandas/rapidfuzz); the numbers end up quoted in reports,
so each function states exactly what it counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from rapidfuzz.distance import Levenshtein

from attnlab.evaluation.analysis import FAILURE_MODES, expected_calibration_error, failure_mode


@dataclass(frozen=True)
class Metric:
    """One per-length metric, declared once: the evaluation table, metrics_by_length.csv/.md,
    the report's summary.csv/.md and its plots all read this list.

    ``unit`` "%" means the value is a fraction in [0, 1] shown as a percent. ``interval``
    names the columns of its 95% interval within one evaluation. Over seeds every metric is
    averaged (``seeds="mean"``) with a band, or summed (``seeds="sum"``, counts).
    """

    name: str
    label: str
    unit: str = ""
    digits: int = 1
    interval: tuple[str, str] | None = None
    seeds: str = "mean"
    plot: bool = False  # the report draws it against length, one line per reader
    lower_is_better: bool = False
    table: bool = True  # shown in Markdown tables (every metric is in the CSV files)

    @property
    def columns(self) -> list[str]:
        return [self.name, *(self.interval or ())]

    def fmt(self, value: float, lo: float | None = None, hi: float | None = None) -> str:
        """The value (with its interval when given) as shown in tables."""
        if value is None or pd.isna(value):
            return "n/a"
        scale = 100.0 if self.unit == "%" else 1.0
        digits = 0 if self.unit == "count" and float(value).is_integer() else self.digits
        text = f"{scale * float(value):.{digits}f}"
        if lo is not None and hi is not None and not (pd.isna(lo) or pd.isna(hi)):
            text += f" [{scale * float(lo):.{self.digits}f}, {scale * float(hi):.{self.digits}f}]"
        return text

    @property
    def heading(self) -> str:
        unit = f" {self.unit}" if self.unit and self.unit != "count" else ""
        return f"{self.label}{unit}" + (" [95% CI]" if self.interval else "")


METRICS: tuple[Metric, ...] = (
    Metric("exact_acc", "exact", "%", 1, ("exact_lo", "exact_hi"), plot=True),
    Metric("cer", "CER", "%", 2, ("cer_lo", "cer_hi"), plot=True, lower_is_better=True),
    Metric("sub", "substitutions", "count", 1, lower_is_better=True),
    Metric("ins", "insertions", "count", 1, lower_is_better=True),
    Metric("del", "deletions", "count", 1, lower_is_better=True),
    Metric("ref_chars", "reference chars", "count", 0, table=False),
    Metric("len_err", "length errors", "%", 1, lower_is_better=True),
    Metric("mean_conf", "mean confidence", "", 3),
    Metric("align", "alignment", "%", 1, plot=True),
    Metric("entropy", "attention entropy", "nats", 3, plot=True, lower_is_better=True),
    # eval.oracle_length=true: the same strips read with EOS at exactly the true length.
    Metric("exact_oracle", "exact, oracle length", "%", 1, plot=True),
    # How the failures failed, as shares of all strips (analysis.failure_mode).
    Metric("skipped_digit", "skipped a digit", "%", 1, lower_is_better=True),
    Metric("stopped_short", "stopped short", "%", 1, lower_is_better=True),
    Metric("ran_long", "ran long", "%", 1, lower_is_better=True),
    Metric("misread", "misread", "%", 1, lower_is_better=True),
    Metric("other", "other", "%", 1, lower_is_better=True),
    Metric("ece", "ECE", "", 3, plot=True, lower_is_better=True),
)
METRIC = {m.name: m for m in METRICS}
KEYS = ["length", "split", "n"]
TABLE_COLUMNS = KEYS + [c for m in METRICS for c in m.columns]

TOTAL = "all"  # value of `length` in the seen/unseen total rows

# Bootstrap resamples are drawn in chunks so that (chunk, N) index arrays stay small.
_BOOT_CHUNK_ELEMS = 4_000_000


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (z=1.96: 95 %).

    Used instead of the normal approximation because accuracies near 0 or 1 on a few
    hundred strips are common here, and Wilson stays inside [0, 1] and is not degenerate there.
    """
    if n <= 0:
        return (math.nan, math.nan)
    if not 0 <= k <= n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (lo, hi)


def edit_ops(truth: str, reading: str) -> tuple[int, int, int]:
    """(substitutions, insertions, deletions) turning `truth` into `reading`.

    Insertion: the reading has an extra character; deletion: the reading misses one.
    The sum is the Levenshtein distance (rapidfuzz picks one minimal script).
    """
    sub = ins = dele = 0
    for op in Levenshtein.editops(truth, reading):
        if op.tag == "replace":
            sub += 1
        elif op.tag == "insert":
            ins += 1
        elif op.tag == "delete":
            dele += 1
    return (sub, ins, dele)


def bootstrap_cer_interval(
    dist: np.ndarray, ref_len: np.ndarray, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """2.5/97.5 percentiles of corpus CER = sum(dist)/sum(ref_len) over strip resamples.

    Strips (not characters) are resampled with replacement, because errors within a strip
    are not independent. Seeded numpy Generator: same inputs and seed, same interval.
    """
    dist = np.asarray(dist, dtype=np.float64).ravel()
    ref_len = np.asarray(ref_len, dtype=np.float64).ravel()
    if dist.shape != ref_len.shape:
        raise ValueError(f"bootstrap_cer_interval: shapes differ {dist.shape} vs {ref_len.shape}")
    n = dist.size
    if n == 0 or n_boot <= 0 or ref_len.sum() <= 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOT_CHUNK_ELEMS // n)
    cers = np.empty(n_boot, dtype=np.float64)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))  # (chunk, N)
        with np.errstate(invalid="ignore", divide="ignore"):
            cers[start:stop] = dist[idx].sum(axis=1) / ref_len[idx].sum(axis=1)
    if np.isnan(cers).all():
        return (math.nan, math.nan)
    lo, hi = np.nanpercentile(cers, [2.5, 97.5])
    return (float(lo), float(hi))


def spans_to_columns(spans: np.ndarray, stride: int) -> np.ndarray:
    """Pixel-column spans [start, end) -> encoder-column spans covering them.

    Encoder column c covers pixels [c*stride, (c+1)*stride), so a glyph covers columns
    [floor(start/stride), ceil(end/stride)).
    """
    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    return np.stack([spans[:, 0] // stride, -(-spans[:, 1] // stride)], axis=1)


def alignment_hits(weights: np.ndarray, spans: np.ndarray) -> tuple[int, int]:
    """(hits, steps_counted): digit steps whose most-weighted column lies on their glyph.

    weights (S, T): one reading, rows = output steps, columns = encoder columns.
    spans (L, 2): true glyphs' [start, end) in the same column units as `weights`.
    The first min(S, L) steps are counted (the EOS step has no glyph). Meant for correct
    readings only, where step i really is the reading of glyph i.
    """
    weights = np.asarray(weights)
    spans = np.asarray(spans).reshape(-1, 2)
    steps = min(weights.shape[0], spans.shape[0])
    if steps == 0:
        return (0, 0)
    peak = weights[:steps].argmax(axis=1)  # (steps,)
    hit = (peak >= spans[:steps, 0]) & (peak < spans[:steps, 1])
    return (int(hit.sum()), int(steps))


def attention_entropy(weights: np.ndarray, n_steps: int) -> float:
    """Mean Shannon entropy (nats) of the first n_steps weight rows; 0*log 0 = 0.

    log(T) for uniform attention over T columns, 0 for attention on one column.
    NaN when no rows are counted.
    """
    w = np.asarray(weights, dtype=np.float64)[: max(0, n_steps)]
    if w.shape[0] == 0:
        return math.nan
    logs = np.log(np.where(w > 0, w, 1.0))  # zeros contribute 0
    return float((-(w * logs).sum(axis=1)).mean())


def _summary_row(
    length: object, split: str, g: pd.DataFrame, n_boot: int, seed: int, ece_bins: int
) -> dict:
    n = len(g)
    k = int(g["exact"].sum())
    lo, hi = wilson_interval(k, n)
    ref = int(g["ref_chars"].sum())
    dist = g["sub"] + g["ins"] + g["del"]
    cer = float(dist.sum()) / ref if ref > 0 else math.nan
    cer_lo, cer_hi = bootstrap_cer_interval(
        dist.to_numpy(), g["ref_chars"].to_numpy(), n_boot=n_boot, seed=seed
    )
    steps = int(g["align_steps"].sum())
    ent = g["entropy"].dropna()
    return {
        "length": length,
        "split": split,
        "n": n,
        "exact_acc": k / n,
        "exact_lo": lo,
        "exact_hi": hi,
        "cer": cer,
        "cer_lo": cer_lo,
        "cer_hi": cer_hi,
        "sub": int(g["sub"].sum()),
        "ins": int(g["ins"].sum()),
        "del": int(g["del"].sum()),
        "ref_chars": ref,
        "len_err": float(g["len_wrong"].mean()),
        "mean_conf": float(g["confidence"].mean()),
        "align": int(g["align_hits"].sum()) / steps if steps > 0 else math.nan,
        "entropy": float(ent.mean()) if len(ent) else math.nan,
        "exact_oracle": float(g["exact_oracle"].mean())
        if g["exact_oracle"].notna().all()
        else math.nan,
        **{mode: float((g["mode"] == mode).mean()) for mode in FAILURE_MODES},
        "ece": expected_calibration_error(g["confidence"], g["exact"], ece_bins),
    }


def per_length_table(
    records: pd.DataFrame,
    seen: Iterable[int],
    n_boot: int = 1000,
    seed: int = 0,
    ece_bins: int = 10,
) -> pd.DataFrame:
    """One row per string length, then a `seen` and an `unseen` total row (length "all").

    records: one row per strip with columns length, truth, reading, confidence,
    align_hits, align_steps (0 when not applicable), entropy (NaN without attention).
    CER is corpus level (total edit distance / total truth characters), not a mean of
    per-strip rates, so long strips weigh by their characters. Columns: TABLE_COLUMNS.
    """
    seen_set = {int(x) for x in seen}
    if len(records) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in TABLE_COLUMNS})
    missing = {
        "length",
        "truth",
        "reading",
        "confidence",
        "align_hits",
        "align_steps",
        "entropy",
    } - set(records.columns)
    if missing:
        raise ValueError(f"per_length_table: records lack columns {sorted(missing)}")
    df = pd.DataFrame(
        {
            "length": records["length"].astype(int).to_numpy(),
            "confidence": records["confidence"].astype(float).to_numpy(),
            "align_hits": records["align_hits"].astype(int).to_numpy(),
            "align_steps": records["align_steps"].astype(int).to_numpy(),
            "entropy": records["entropy"].astype(float).to_numpy(),
        }
    )
    truths = [str(t) for t in records["truth"]]
    readings = [str(r) for r in records["reading"]]
    ops = np.array([edit_ops(t, r) for t, r in zip(truths, readings, strict=True)], dtype=np.int64)
    df["sub"], df["ins"], df["del"] = ops[:, 0], ops[:, 1], ops[:, 2]
    df["ref_chars"] = [len(t) for t in truths]
    df["exact"] = [t == r for t, r in zip(truths, readings, strict=True)]
    df["mode"] = [failure_mode(t, r) for t, r in zip(truths, readings, strict=True)]
    oracle = records["oracle_reading"] if "oracle_reading" in records else None
    df["exact_oracle"] = (
        np.nan
        if oracle is None
        else [t == o if isinstance(o, str) else np.nan for t, o in zip(truths, oracle, strict=True)]
    )
    df["len_wrong"] = [len(t) != len(r) for t, r in zip(truths, readings, strict=True)]
    df["split"] = ["seen" if x in seen_set else "unseen" for x in df["length"]]

    rows = [
        _summary_row(int(length), str(g["split"].iloc[0]), g, n_boot, seed, ece_bins)
        for length, g in df.groupby("length", sort=True)
    ]
    for split in ("seen", "unseen"):
        g = df[df["split"] == split]
        if len(g):
            rows.append(_summary_row(TOTAL, split, g, n_boot, seed, ece_bins))
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    table["length"] = table["length"].astype(object)
    table["split"] = table["split"].astype(object)
    return table


def quick_scores(labels: list[str], texts: list[str]) -> tuple[float, float]:
    """Exact-string accuracy and corpus CER (edit distance / reference characters)."""
    exact = float(np.mean([t == r for t, r in zip(labels, texts, strict=True)]))
    dist = sum(Levenshtein.distance(t, r) for t, r in zip(labels, texts, strict=True))
    return exact, dist / max(1, sum(len(t) for t in labels))


def length_label(length: object, split: str) -> str:
    return f"{split} total" if length == TOTAL else str(length)


def table_markdown(table: pd.DataFrame, title: str | None = None) -> str:
    """Markdown rendering of a per_length_table, one column per metric in METRICS (intervals
    in brackets); metrics with no value on any row (e.g. alignment without weights) are left
    out."""
    shown = [m for m in METRICS if m.table and m.name in table and table[m.name].notna().any()]
    out = []
    for r in table.to_dict("records"):
        row = {
            "length": length_label(r["length"], r["split"]),
            "split": r["split"],
            "n": str(r["n"]),
        }
        for m in shown:
            lo, hi = (r.get(c) for c in m.interval) if m.interval else (None, None)
            row[m.heading] = m.fmt(r[m.name], lo, hi)
        out.append(row)
    body = ""
    if out:
        frame = pd.DataFrame(out)
        align = ["left", "left"] + ["right"] * (frame.shape[1] - 2)
        body = frame.to_markdown(index=False, disable_numparse=True, colalign=align)
    if title:
        return f"### {title}\n\n{body}\n"
    return f"{body}\n"
