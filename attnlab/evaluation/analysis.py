"""Per-strip analyses behind the evaluation's diagnostics: how a reading failed, how well its
confidence is calibrated, and where the attention went at each step. Pure numpy and
rapidfuzz.
"""

from __future__ import annotations

import math

import numpy as np
from rapidfuzz.distance import Hamming, Levenshtein

# How a wrong reading failed, in the order the classes are tried (the first that applies).
# The lab asks how the readers fail beyond the seen lengths, so the length decides first:
# a reading that ends early or late says so, whatever else is wrong in it.
FAILURE_MODES = ("skipped_digit", "stopped_short", "ran_long", "misread", "other")
# The class names of evaluations written before these classes (metrics_by_length.csv columns
# and readings.csv's `mode`): their shares are recomputed from readings.csv (report.failures).
OLD_FAILURE_MODES = ("stopped_early", "skipped_ahead", "misread", "other_error")
FAILURE_LEGEND = {
    "skipped_digit": "one digit missing, not the last, everything else right",
    "stopped_short": "fewer digits than the truth otherwise (the reading ended before the "
    "strip's digits did; digits it read may be wrong too)",
    "ran_long": "more digits than the truth (digits it read may be wrong too)",
    "misread": "the right number of digits, some wrong, each in its place (substitutions only)",
    "other": "the right number of digits, but shifted: a digit dropped and another added is "
    "cheaper than substituting in place",
}


def failure_mode(truth: str, reading: str) -> str:
    """How a reading differs from the truth: "correct", or the first of FAILURE_MODES that
    applies (FAILURE_LEGEND says each in words).

    From the edit operations turning the truth into the reading (rapidfuzz's Levenshtein:
    substitutions, insertions, deletions), with n = len(truth), k = len(reading):

    - skipped_digit: one deletion and nothing else (distance 1, k = n - 1), of a digit other
      than the last: the reading is not the truth without its last digit;
    - stopped_short: k < n otherwise: at least n - k deletions whatever else;
      the truth without its last digit is here (the reading stopped one digit short);
    - ran_long: k > n: at least k - n insertions whatever else;
    - misread: k = n and the Levenshtein distance equals the Hamming distance: a cheapest
      script is substitutions only (this holds whichever cheapest script
      ``Levenshtein.editops`` would return);
    - other: k = n, and a script with a deletion and an insertion (a shift) is cheaper than
      substituting in place. Rare: a same-length reading that is shifted along the truth.
    """
    if reading == truth:
        return "correct"
    n, k = len(truth), len(reading)
    if k == n - 1 and reading != truth[:k] and Levenshtein.distance(truth, reading) == 1:
        return "skipped_digit"
    if k < n:
        return "stopped_short"
    if k > n:
        return "ran_long"
    if Levenshtein.distance(truth, reading) == Hamming.distance(truth, reading):
        return "misread"
    return "other"


def calibration_bins(
    confidence: np.ndarray, correct: np.ndarray, bins: int
) -> list[tuple[float, float, int]]:
    """Equal-mass bins (each holds about the same number of readings, sorted by confidence):
    (mean confidence, accuracy, count) per non-empty bin."""
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct, dtype=np.float64)
    if conf.size == 0:
        return []
    order = np.argsort(conf, kind="stable")
    out = []
    for idx in np.array_split(order, min(bins, conf.size)):
        if idx.size:
            out.append((float(conf[idx].mean()), float(ok[idx].mean()), int(idx.size)))
    return out


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int) -> float:
    """ECE = sum over equal-mass bins of (bin size / N) * |accuracy - mean confidence|."""
    parts = calibration_bins(confidence, correct, bins)
    n = sum(c for _, _, c in parts)
    if n == 0:
        return math.nan
    return float(sum(c / n * abs(acc - conf) for conf, acc, c in parts))


def threshold_rows(
    confidence: np.ndarray, correct: np.ndarray, thresholds: tuple[float, ...] = (0.5, 0.9, 0.99)
) -> list[dict[str, float]]:
    """What a user who rejects readings below a confidence threshold gets: the share of
    readings kept and the exact accuracy on those kept (NaN when none is kept)."""
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    rows = []
    for t in thresholds:
        kept = conf >= t
        rows.append(
            {
                "threshold": t,
                "kept": float(kept.mean()) if conf.size else math.nan,
                "exact_acc_kept": float(ok[kept].mean()) if kept.any() else math.nan,
                "n_kept": int(kept.sum()),
            }
        )
    return rows


def attention_pace(weights: np.ndarray, n_digits: int, true_length: int) -> np.ndarray:
    """(n, 2) per digit step i < min(n_digits, true_length): where the attention peak sits
    along the strip (peak column + 0.5) / columns, and where glyph i sits if the digits are
    evenly spread, (i + 0.5) / true_length. A reader keeping pace lies on the diagonal."""
    w = np.asarray(weights, dtype=np.float64)
    steps = min(n_digits, true_length, w.shape[0])
    if steps <= 0 or w.shape[1] == 0:
        return np.zeros((0, 2))
    peak = (w[:steps].argmax(axis=1) + 0.5) / w.shape[1]
    truth = (np.arange(steps) + 0.5) / true_length
    return np.stack([truth, peak], axis=1)
