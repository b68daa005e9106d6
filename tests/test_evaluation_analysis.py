"""Per-strip analyses on hand-made numbers: failure modes, calibration, thresholds, pace."""

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.evaluation.analysis import (
    attention_pace,
    calibration_bins,
    expected_calibration_error,
    failure_mode,
    threshold_rows,
)
from attnlab.evaluation.metrics import per_length_table


@pytest.mark.parametrize(
    "truth, reading, mode",
    [
        ("12345", "12345", "correct"),
        ("12345", "123", "stopped_early"),
        ("12345", "", "stopped_early"),
        ("1234567890", "12367890", "skipped_ahead"),  # 4 and 5 left out
        ("12345", "2345", "skipped_ahead"),  # the first glyph left out
        ("12345", "12945", "misread"),
        ("12345", "123456", "other_error"),  # an extra digit
        ("12345", "9", "other_error"),  # shorter, and neither prefix nor suffix
    ],
)
def test_failure_modes(truth, reading, mode):
    assert failure_mode(truth, reading) == mode


def test_ece_equals_a_hand_computation():
    conf = np.array([0.1, 0.2, 0.9, 0.95, 0.6, 0.7])
    correct = np.array([0, 1, 1, 1, 0, 1])
    # Three equal-mass bins of sorted confidences: (0.1, 0.2), (0.6, 0.7), (0.9, 0.95).
    bins = calibration_bins(conf, correct, 3)
    assert [c for _, _, c in bins] == [2, 2, 2]
    by_hand = (2 / 6) * abs(0.5 - 0.15) + (2 / 6) * abs(0.5 - 0.65) + (2 / 6) * abs(1 - 0.925)
    assert expected_calibration_error(conf, correct, 3) == pytest.approx(by_hand)
    assert expected_calibration_error(np.ones(4), np.ones(4), 10) == 0.0
    assert math.isnan(expected_calibration_error(np.array([]), np.array([]), 5))


def test_threshold_rows_keep_what_a_user_who_rejects_low_confidence_keeps():
    rows = threshold_rows(np.array([0.3, 0.6, 0.95, 0.999]), np.array([0, 0, 1, 1]))
    assert [r["kept"] for r in rows] == [0.75, 0.5, 0.25]
    assert rows[0]["exact_acc_kept"] == pytest.approx(2 / 3)
    assert rows[1]["exact_acc_kept"] == 1.0 and rows[2]["n_kept"] == 1
    assert math.isnan(threshold_rows(np.array([0.1]), np.array([1]), (0.5,))[0]["exact_acc_kept"])


def test_pace_of_a_reader_on_the_diagonal_and_of_one_running_ahead():
    diagonal = np.eye(4)  # step i looks at column i of 4
    track = attention_pace(diagonal, 4, 4)
    assert np.allclose(track[:, 0], track[:, 1])
    ahead = np.zeros((3, 8))
    ahead[[0, 1, 2], [0, 4, 7]] = 1  # three steps to cover 8 columns of a 6-digit strip
    track = attention_pace(ahead, 3, 6)
    assert (track[1:, 1] > track[1:, 0]).all()


def test_the_table_counts_failure_modes_ece_and_oracle_per_length():
    records = pd.DataFrame(
        {
            "length": [3, 3, 3, 3],
            "truth": ["123", "123", "123", "123"],
            "reading": ["123", "12", "13", "129"],
            "oracle_reading": ["123", "129", "133", "129"],
            "confidence": [0.9, 0.5, 0.4, 0.8],
            "align_hits": [0, 0, 0, 0],
            "align_steps": [0, 0, 0, 0],
            "entropy": [math.nan] * 4,
        }
    )
    row = per_length_table(records, seen=[3], n_boot=10, ece_bins=2).iloc[0]
    assert row["exact_acc"] == 0.25 and row["exact_oracle"] == 0.25
    assert (row["stopped_early"], row["skipped_ahead"], row["misread"]) == (0.25, 0.25, 0.25)
    assert row["other_error"] == 0.0
    by_hand = 0.5 * abs(0 - 0.45) + 0.5 * abs(0.5 - 0.85)
    assert row["ece"] == pytest.approx(by_hand)
