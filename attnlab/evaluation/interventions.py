"""Interventions on strips, and the numbers they give: the computations behind ``attnlab probe``.

Three questions about a reader that read a strip correctly (so output step ``t`` read glyph
``t``, the strip's ``t``-th glyph from the left):

- occlusion: paint paper over one glyph (every pixel row of its span ``[start, end)``, in the
  strip's own paper level, see ``paper_level``) and read again with teacher forcing on the
  original reading: how much does the probability of each read digit drop?
- glyph swap: render the same strip with one digit replaced (same typeface, size, variant,
  blur, paper, contrast and noise; ``rerender``): does the reading change at that step only?
- saliency: does the attention rank the columns as a gradient-times-input saliency does?

Everything here is a function of tensors, arrays and tables; ``attnlab.evaluation.probe`` batches,
reads and writes. ``PROBE_METRICS`` declares the numbers of a probe's summary.csv once, for
the probe and for the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab.data.strips import StripBatch, StripSynth, set_seed
from attnlab.evaluation.metrics import TOTAL, Metric
from attnlab.models.base import Reader

PROBE_PURPOSE = "probe"  # the fixed strips of the probe: their own seeds, not the test sets
CONDITIONS = ("attended", "true", "random", "none")  # which glyph is painted over


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


# ---------------------------------------------------------------------------------------------
# Strips that can be rendered again with other digits


@dataclass
class ProbeSet:
    """The fixed probe strips of one length, with what it takes to render them again."""

    strips: StripBatch
    digits: torch.Tensor  # (N, L) digit ids
    state: torch.Tensor  # the generator state right after the digits were drawn


def probe_set(synth: StripSynth, length: int, n: int, purpose: str = PROBE_PURPOSE) -> ProbeSet:
    """``fixed_set(synth, purpose, length, n)``, keeping the digits and the generator state."""
    gen = torch.Generator().manual_seed(set_seed(synth.data.eval_seed, purpose, length))
    digits = synth.random_strings(torch.full((n,), length, dtype=torch.long), gen)
    state = gen.get_state()
    return ProbeSet(synth.render(digits, gen), digits, state)


def rerender(synth: StripSynth, ps: ProbeSet, digits: torch.Tensor) -> StripBatch:
    """The same strips with other digits: every draw of ``StripSynth.render`` (typeface, size,
    blur, variants, gaps, margins, paper, contrast, noise) depends on the shape of the digits
    only, so replaying the generator gives the same strip with the new digits' glyphs. Glyphs
    right of a changed one shift by the difference of the two glyphs' widths."""
    if digits.shape != ps.digits.shape:
        raise ValueError(f"rerender: digits {tuple(digits.shape)} vs {tuple(ps.digits.shape)}")
    gen = torch.Generator()
    gen.set_state(ps.state)
    return synth.render(digits, gen)


# ---------------------------------------------------------------------------------------------
# Occlusion


def paper_level(images: torch.Tensor, widths: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """(B,) each strip's paper: the median of its real pixels in no glyph's span (margins and
    gaps), or of all its real pixels when every column is in a glyph."""
    out = torch.empty(len(images))
    for i in range(len(images)):
        w = int(widths[i])
        free = torch.ones(w, dtype=torch.bool)
        for a, b in spans[i].tolist():
            free[a:b] = False
        region = images[i, :, :w]
        out[i] = (region[:, free] if bool(free.any()) else region).median()
    return out


def occlusion_variants(image: torch.Tensor, spans: torch.Tensor, paper: float) -> torch.Tensor:
    """(H, W) strip, (L, 2) glyph spans -> (L + 1, H, W): variant 0 unchanged, variant g + 1
    with glyph g painted over (all rows of its pixel columns) in ``paper``."""
    variants = image[None].repeat(len(spans) + 1, 1, 1)
    for g, (a, b) in enumerate(spans.tolist()):
        variants[g + 1, :, a:b] = paper
    return variants


def attended_glyph(weights: np.ndarray, spans: np.ndarray, stride: int) -> tuple[int, int, bool]:
    """One step's weights over encoder columns (T,) -> (glyph, peak column, on a glyph).

    The peak column covers pixels ``[c*stride, (c+1)*stride)``; its glyph is the one whose span
    overlaps those pixels most (the nearer centre on a tie). A peak on paper between glyphs
    or in a margin gets the nearest glyph, and ``on a glyph`` False.
    """
    c = int(np.argmax(weights))
    lo, hi = c * stride, (c + 1) * stride
    spans = np.asarray(spans).reshape(-1, 2)
    overlap = np.clip(np.minimum(spans[:, 1], hi) - np.maximum(spans[:, 0], lo), 0, None)
    centre = (lo + hi) / 2
    distance = np.abs((spans[:, 0] + spans[:, 1]) / 2 - centre)
    if overlap.max() > 0:
        best = np.lexsort((distance, -overlap))[0]
        return int(best), c, True
    gap = np.maximum(spans[:, 0] - centre, centre - spans[:, 1])
    return int(np.argmin(gap)), c, False


def random_glyph(length: int, step: int, avoid: int, rng: np.random.Generator) -> int:
    """A glyph other than the step's own (and than ``avoid``, the attended one, when another
    is left); -1 when the strip has one glyph only."""
    others = [g for g in range(length) if g not in (step, avoid)]
    others = others or [g for g in range(length) if g != step]
    return int(rng.choice(others)) if others else -1


def occlusion_rows(
    label: str,
    p_read: np.ndarray,
    p_variants: np.ndarray,
    readings: list[str],
    glyphs: dict[str, list[int]],
) -> list[dict]:
    """One row per (step, condition) of one strip.

    ``p_read`` (L + 1,): teacher-forced probability of each read digit (then EOS) of the
    strip read alone; ``p_variants`` (L + 1, L + 1) and ``readings``: the same of variant 0
    (nothing painted) and of each variant g + 1 (glyph g painted), read in one batch;
    ``glyphs``: condition -> the glyph painted at each step (-1: none; "none" needs none).
    The drop is ``p_read - p_occluded`` at the step; ``drop_earlier`` and ``drop_later`` its
    mean over the other digit steps whose glyphs lie left (right) of the painted one; the
    later ones are read from glyphs that moved up one place, since the painted glyph is no
    longer there to count. ``digit_changed``: free decoding reads another digit (or none)
    at the step.
    """
    n = len(label)
    rows = []
    for cond, per_step in glyphs.items():
        for t in range(n):
            g = -1 if cond == "none" else per_step[t]
            if cond != "none" and g < 0:
                continue
            v = g + 1
            drops = p_read[:n] - p_variants[v, :n]
            steps = np.arange(n)
            earlier = drops[(steps < g) & (steps != t)]
            later = drops[(steps > g) & (steps != t)]
            reading = readings[v]
            rows.append(
                {
                    "step": t,
                    "digit": label[t],
                    "condition": cond,
                    "glyph": g,
                    "p_read": float(p_read[t]),
                    "p_occluded": float(p_variants[v, t]),
                    "drop": float(drops[t]),
                    "drop_earlier": float(earlier.mean()) if earlier.size else math.nan,
                    "drop_later": float(later.mean()) if later.size else math.nan,
                    "reading": reading,
                    "digit_changed": len(reading) <= t or reading[t] != label[t],
                    "reading_changed": reading != label,
                }
            )
    return rows


# ---------------------------------------------------------------------------------------------
# Saliency


def column_saliency(
    reader: Reader,
    images: torch.Tensor,
    widths: torch.Tensor,
    texts: list[str],
    paper: torch.Tensor,
    stride: int,
) -> list[np.ndarray]:
    """Per strip (L, T): for each digit step, |sum over a column's pixels of d log p / d x
    times (x - paper)|, the first-order size of the change in the step's log-probability if
    that encoder column were painted paper. All steps of all strips in one backward pass."""
    rows = [(i, t) for i, text in enumerate(texts) for t in range(len(text))]
    if not rows:
        return [np.zeros((0, 0)) for _ in texts]
    strip = torch.tensor([i for i, _ in rows])
    step = torch.tensor([t for _, t in rows], device=images.device)
    x = images[strip].detach().clone().requires_grad_(True)
    with torch.enable_grad():
        p = reader.digit_probs(x, widths[strip], [texts[i] for i, _ in rows])
        logp = p[torch.arange(len(rows), device=p.device), step].clamp_min(1e-30).log()
        (grad,) = torch.autograd.grad(logp.sum(), x)
    sal = (grad * (x.detach() - paper.to(x.device)[strip, None, None])).sum(1)  # (R, W)
    w = sal.shape[1]
    cols = -(-w // stride)
    sal = torch.nn.functional.pad(sal, (0, cols * stride - w)).view(len(rows), cols, stride)
    sal = sal.sum(-1).abs().cpu().numpy()
    out, start = [], 0
    for i, text in enumerate(texts):
        t_real = -(-int(widths[i]) // stride)
        out.append(sal[start : start + len(text), :t_real])
        start += len(text)
    return out


def rank(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's of the average ranks); NaN when either is flat."""
    ra, rb = rank(a), rank(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra**2).sum() * (rb**2).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else math.nan


# ---------------------------------------------------------------------------------------------
# Numbers


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
