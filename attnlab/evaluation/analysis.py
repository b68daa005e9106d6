"""Per-strip analyses behind the evaluation's diagnostics: how a reading failed, how well its
confidence is calibrated, and where the attention went at each step. Pure numpy.
"""

from __future__ import annotations

import math

import numpy as np

FAILURE_MODES = ("stopped_early", "skipped_ahead", "misread", "other_error")


def failure_mode(truth: str, reading: str) -> str:
    """How a reading differs from the truth: "correct", or one of FAILURE_MODES.

    - stopped_early: the reading is a proper prefix of the truth (it stopped too soon);
    - skipped_ahead: shorter, and a prefix plus a suffix of the truth (middle glyphs left out);
    - misread: the right number of digits, some wrong;
    - other_error: anything else (extra digits, or wrong digits and a wrong length).
    """
    if reading == truth:
        return "correct"
    if len(reading) < len(truth):
        if truth.startswith(reading):
            return "stopped_early"
        for cut in range(1, len(reading)):
            if truth.startswith(reading[:cut]) and truth.endswith(reading[cut:]):
                return "skipped_ahead"
        if reading and truth.endswith(reading):
            return "skipped_ahead"  # the first glyphs left out
    if len(reading) == len(truth):
        return "misread"
    return "other_error"


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
