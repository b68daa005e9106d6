"""The numbers of a probe (``attnlab probe``): ``PROBE_METRICS`` declares the columns of its
summary.csv once, for the probe and for the report (attnlab.report.probes), and
``summary_table`` computes them from the rows of occlusion.csv, swap.csv and saliency.csv,
each with a 95% bootstrap interval over strips (``cluster_bootstrap``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from attnlab.evaluation.metrics import TOTAL, Metric


def _m(name: str, label: str, unit: str = "", digits: int = 2) -> Metric:
    return Metric(name, label, unit, digits, (f"{name}_lo", f"{name}_hi"))


# Every interval is a 95% bootstrap interval over strips (steps of a strip are not independent).
PROBE_METRICS: tuple[Metric, ...] = (
    # Mean drop of the read digit's probability at a step when a glyph is painted over.
    _m("drop_attended", "drop: attended glyph"),
    _m("drop_true", "drop: true glyph"),
    _m("drop_random", "drop: random glyph"),
    # The random glyph split by side: one before the step removes a glyph the step's
    # reading counts on (the step's glyph moves up one place); one after it does not.
    _m("drop_random_before", "drop: random glyph before step"),
    _m("drop_random_after", "drop: random glyph after step"),
    _m("drop_none", "drop: nothing", digits=3),
    _m("excess", "attended minus random"),
    _m("excess_true", "true minus random"),
    # Mean drop at the earlier steps (glyphs left of the occluded one: nothing moved there)
    # when the attended (true) glyph is occluded: how local the evidence is.
    _m("other_attended", "drop at earlier steps: attended"),
    _m("other_true", "drop at earlier steps: true"),
    # Share of steps whose freely decoded digit changes when the glyph is occluded.
    _m("flip_attended", "digit changed: attended", "%", 1),
    _m("flip_true", "digit changed: true", "%", 1),
    _m("flip_random", "digit changed: random", "%", 1),
    _m("peak_on_true", "peak on the step's glyph", "%", 1),
    # Glyph swaps: the reading changes at the swapped step and nowhere else / reads the new digit.
    _m("swap_only", "swap changes its step only", "%", 1),
    _m("swap_new", "swap reads the new digit", "%", 1),
    _m("spearman", "Spearman: attention, saliency"),
)
PROBE_METRIC = {m.name: m for m in PROBE_METRICS}
SUMMARY_KEYS = ["length", "split", "n_strips", "n_steps", "n_swaps"]
SUMMARY_COLUMNS = SUMMARY_KEYS + [c for m in PROBE_METRICS for c in m.columns]


def cluster_bootstrap(
    values: np.ndarray, clusters: np.ndarray, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean of ``values`` and the 2.5/97.5 percentiles of the means of
    ``n_boot`` resamples of whole clusters (strips) with replacement. NaN values are left
    out; no values give NaNs, and ``n_boot`` 0 gives no interval."""
    values = np.asarray(values, dtype=np.float64)
    clusters = np.asarray(clusters)
    keep = ~np.isnan(values)
    values, clusters = values[keep], clusters[keep]
    if values.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.mean())
    if n_boot <= 0:
        return mean, math.nan, math.nan
    _, inverse = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inverse, weights=values)
    counts = np.bincount(inverse).astype(np.float64)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    means = sums[pick].sum(1) / counts[pick].sum(1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return mean, float(min(lo, mean)), float(max(hi, mean))


def _cond(occ: pd.DataFrame, cond: str) -> pd.DataFrame:
    return occ[occ["condition"] == cond] if not occ.empty else occ


def summary_row(
    occ: pd.DataFrame, swaps: pd.DataFrame, sal: pd.DataFrame, n_boot: int, seed: int
) -> dict[str, float]:
    """Every metric of ``PROBE_METRICS`` with its interval, from the rows of one length (or of
    every length of a split): occlusion.csv, swap.csv and saliency.csv rows."""
    empty = pd.DataFrame(columns=["strip", "value"])

    def col(frame: pd.DataFrame, column: str) -> pd.DataFrame:
        if frame.empty:
            return empty
        return pd.DataFrame({"strip": frame["strip"], "value": frame[column].astype(float)})

    att, true, rnd = _cond(occ, "attended"), _cond(occ, "true"), _cond(occ, "random")
    keys = ["length", "strip", "step"]

    def paired(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
        if a.empty or b.empty:
            return empty
        m = a[keys + ["drop"]].merge(b[keys + ["drop"]], on=keys, suffixes=("_a", "_b"))
        return pd.DataFrame({"strip": m["strip"], "value": m["drop_a"] - m["drop_b"]})

    sources = {
        "drop_attended": col(att, "drop"),
        "drop_true": col(true, "drop"),
        "drop_random": col(rnd, "drop"),
        "drop_none": col(_cond(occ, "none"), "drop"),
        "excess": paired(att, rnd),
        "excess_true": paired(true, rnd),
        "drop_random_before": col(rnd[rnd["glyph"] < rnd["step"]], "drop") if len(rnd) else empty,
        "drop_random_after": col(rnd[rnd["glyph"] > rnd["step"]], "drop") if len(rnd) else empty,
        "other_attended": col(att, "drop_earlier"),
        "other_true": col(true, "drop_earlier"),
        "flip_attended": col(att, "digit_changed"),
        "flip_true": col(true, "digit_changed"),
        "flip_random": col(rnd, "digit_changed"),
        "peak_on_true": empty if att.empty else col(att.assign(hit=att.glyph == att.step), "hit"),
        "swap_only": col(swaps, "only_step"),
        "swap_new": col(swaps, "reads_new"),
        "spearman": col(sal, "spearman"),
    }
    row: dict[str, float] = {}
    for m in PROBE_METRICS:
        frame = sources[m.name]
        # strips of different lengths are different clusters
        clusters = frame["strip"].astype(str).to_numpy()
        mean, lo, hi = cluster_bootstrap(frame["value"].to_numpy(), clusters, n_boot, seed)
        row.update({m.name: mean, f"{m.name}_lo": lo, f"{m.name}_hi": hi})
    return row


def summary_table(
    occ: pd.DataFrame,
    swaps: pd.DataFrame,
    sal: pd.DataFrame,
    lengths: list[int],
    seen: list[int],
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """summary.csv: one row per length probed, then one per split (length ``all``)."""
    rows = []

    def part(frame: pd.DataFrame, sel) -> pd.DataFrame:
        if frame.empty:
            return frame
        out = frame[frame["length"].isin(sel)]
        return out.assign(strip=out["length"].astype(str) + "#" + out["strip"].astype(str))

    groups = [(n, "seen" if n in seen else "unseen", [n]) for n in sorted(lengths)]
    for split in ("seen", "unseen"):
        members = [n for n, s, _ in groups if s == split]
        if members:
            groups.append((TOTAL, split, members))
    for length, split, members in groups:
        o, w, s = part(occ, members), part(swaps, members), part(sal, members)
        digit_steps = _cond(o, "true")
        rows.append(
            {
                "length": length,
                "split": split,
                "n_strips": int(o["strip"].nunique()) if not o.empty else 0,
                "n_steps": len(digit_steps),
                "n_swaps": len(w),
                **summary_row(o, w, s, n_boot, seed),
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
