"""Paired differences between two variants read on the same strips: comparisons.csv.

Every fixed evaluation set is drawn from ``data.eval_seed``, so two runs evaluated on it read
the same strips, and a difference can be measured strip by strip. For variants A and B of
one training range and evaluation, per length and for the seen and unseen totals:

- the difference A - B in exact accuracy and in CER (corpus CER of each seed's run, as in
  the tables), averaged over seeds;
- a 95% paired bootstrap interval: each resample draws the seed pairs with replacement and,
  within each length, the strips with replacement; a drawn strip counts for A and for B
  together (the pairing), and for every seed pair alike (the same strips);
- McNemar's exact test of exact accuracy: strips read right by A and wrong by B (b) against
  the reverse (c), over every seed pair, two-sided binomial p-value.

Seeds are paired by seed value where both variants have it, otherwise in seed order (the
`pairing` column says which). A pairing of evaluations that did not read the same strips is
refused (``report.same_strips``: CompareRefused). Which variants are compared is chosen by
``report.pairs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attnlab.evaluation.metrics import TOTAL
from attnlab.report.run_info import RunInfo
from attnlab.report.same_strips import CompareRefused, check_same_strips, readings

N_BOOT = 2000
BOOT_SEED = 0

COLUMNS = [
    "train",
    "eval",
    "a",
    "b",
    "length",
    "split",
    "n_pairs",
    "n_strips",
    "pairing",
    "exact_a",
    "exact_b",
    "exact_diff",
    "exact_diff_lo",
    "exact_diff_hi",
    "cer_a",
    "cer_b",
    "cer_diff",
    "cer_diff_lo",
    "cer_diff_hi",
    "mcnemar_b",
    "mcnemar_c",
    "mcnemar_p",
]
METHOD = (
    "Paired differences A - B on the same strips (every run reads the fixed test set drawn "
    f"from data.eval_seed). Interval: 95% bootstrap ({N_BOOT} resamples of the seed pairs and, "
    "within each length, of the strips, each strip counting for A and B together). CER is "
    "each seed's corpus CER (edits / characters). McNemar: exact two-sided binomial test "
    "of b (A right, B wrong) against c (A wrong, B right) over all seed pairs."
)


@dataclass
class Side:
    """One variant's runs in one evaluation, their readings by strip."""

    variant: str
    runs: list[RunInfo]


def _pairs(a: Side, b: Side) -> tuple[list[tuple[RunInfo, RunInfo]], str]:
    by_a = {r.seed: r for r in a.runs}
    by_b = {r.seed: r for r in b.runs}
    common = sorted((s for s in by_a if s in by_b), key=lambda s: (s is None, s))
    if common:
        return [(by_a[s], by_b[s]) for s in common], "by seed " + ",".join(map(str, common))
    sa = sorted(a.runs, key=lambda r: (r.seed is None, r.seed))
    sb = sorted(b.runs, key=lambda r: (r.seed is None, r.seed))
    n = min(len(sa), len(sb))
    text = ", ".join(f"{x.seed}/{y.seed}" for x, y in zip(sa[:n], sb[:n], strict=True))
    return list(zip(sa[:n], sb[:n], strict=True)), f"in seed order (A/B: {text})"


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: 2 P(X <= min(b, c)), X ~ Binomial(b + c, 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    logs = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
        for i in range(k + 1)
    ]
    top = max(logs)
    tail = math.exp(top) * sum(math.exp(x - top) for x in logs)
    return min(1.0, 2.0 * tail)


def _cell(
    ca: np.ndarray,
    cb: np.ndarray,
    ea: np.ndarray,
    eb: np.ndarray,
    chars: np.ndarray,
    strata: np.ndarray,
    rng: np.random.Generator,
    n_boot: int,
) -> dict[str, float]:
    """Paired statistics of one cell. ca/cb (K, N) exact 0/1, ea/eb (K, N) edits, chars (N,),
    strata (N,) the length of each strip (resampled within its length)."""
    k, n = ca.shape
    d_exact = ca - cb  # (K, N)
    d_edits = ea - eb  # (K, N)
    out = {
        "exact_a": float(ca.mean()),
        "exact_b": float(cb.mean()),
        "exact_diff": float(d_exact.mean()),
        "cer_a": float((ea.sum(axis=1) / chars.sum()).mean()),
        "cer_b": float((eb.sum(axis=1) / chars.sum()).mean()),
    }
    out["cer_diff"] = out["cer_a"] - out["cer_b"]
    if n_boot > 0:
        w = np.zeros((n_boot, n))  # (R, N) multinomial strip counts, within each length
        for s in np.unique(strata):
            idx = np.flatnonzero(strata == s)
            w[:, idx] = rng.multinomial(len(idx), np.full(len(idx), 1 / len(idx)), size=n_boot)
        u = rng.multinomial(k, np.full(k, 1 / k), size=n_boot) / k  # (R, K) seed weights
        exact = ((w @ d_exact.T) / n * u).sum(axis=1)  # (R,)
        cer = ((w @ d_edits.T) / (w @ chars)[:, None] * u).sum(axis=1)
        out["exact_diff_lo"], out["exact_diff_hi"] = np.percentile(exact, [2.5, 97.5]).tolist()
        out["cer_diff_lo"], out["cer_diff_hi"] = np.percentile(cer, [2.5, 97.5]).tolist()
    else:
        out.update(exact_diff_lo=math.nan, exact_diff_hi=math.nan)
        out.update(cer_diff_lo=math.nan, cer_diff_hi=math.nan)
    b = int(((ca == 1) & (cb == 0)).sum())
    c = int(((ca == 0) & (cb == 1)).sum())
    out.update(mcnemar_b=b, mcnemar_c=c, mcnemar_p=mcnemar_p(b, c))
    return out


def compare(
    train: str, eval_name: str, seen: list[int], a: Side, b: Side, n_boot: int = N_BOOT
) -> pd.DataFrame:
    """comparisons.csv rows of A - B: per length, then the seen and unseen totals."""
    pairs, pairing = _pairs(a, b)
    if not pairs:
        raise CompareRefused(f"{a.variant} and {b.variant}: no runs to pair in eval/{eval_name}")
    lengths: list[int] | None = None
    frames = []
    for ra_run, rb_run in pairs:
        ra, rb = readings(ra_run, eval_name), readings(rb_run, eval_name)
        common = check_same_strips(ra_run, rb_run, eval_name, ra, rb)
        lengths = common if lengths is None else [n for n in lengths if n in common]
        frames.append((ra, rb))
    first = pairs[0][0]
    for (ra_run, _), (ra, _) in zip(pairs[1:], frames[1:], strict=True):
        # every seed pair read the same strips as the first one
        common = check_same_strips(first, ra_run, eval_name, frames[0][0], ra)
        lengths = [n for n in lengths if n in common]
    order = frames[0][0]
    order = order[order["length"].isin(lengths)].sort_values("length", kind="stable").index
    stack = {
        key: np.stack([f[side].loc[order, col].to_numpy(dtype=float) for f in frames])
        for key, side, col in (
            ("ca", 0, "correct"),
            ("cb", 1, "correct"),
            ("ea", 0, "edits"),
            ("eb", 1, "edits"),
        )
    }  # each (K, N)
    chars = frames[0][0].loc[order, "chars"].to_numpy(dtype=float)
    strata = frames[0][0].loc[order, "length"].to_numpy(dtype=int)
    rng = np.random.default_rng(BOOT_SEED)
    seen_set = set(seen)
    cells = [(int(n), "seen" if n in seen_set else "unseen", strata == n) for n in lengths]
    for split in ("seen", "unseen"):
        mask = np.isin(strata, [n for n in lengths if (n in seen_set) == (split == "seen")])
        if mask.any():
            cells.append((TOTAL, split, mask))
    rows = []
    for length, split, mask in cells:
        stats = _cell(
            stack["ca"][:, mask],
            stack["cb"][:, mask],
            stack["ea"][:, mask],
            stack["eb"][:, mask],
            chars[mask],
            strata[mask],
            rng,
            n_boot,
        )
        rows.append(
            {
                "train": train,
                "eval": eval_name,
                "a": a.variant,
                "b": b.variant,
                "length": length,
                "split": split,
                "n_pairs": len(pairs),
                "n_strips": int(mask.sum()),
                "pairing": pairing,
                **stats,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def sides(group_runs: list[RunInfo], eval_name: str) -> dict[str, Side]:
    """The variants of one training range that have `eval_name`, with their runs."""
    out: dict[str, Side] = {}
    for run in group_runs:
        if eval_name in run.evals:
            label = run.variant or run.reader_name
            out.setdefault(label, Side(label, [])).runs.append(run)
    return out
