"""Per-strip analyses on hand-made numbers: failure modes, calibration, thresholds, pace."""

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.evaluation.analysis import (
    FAILURE_LEGEND,
    FAILURE_MODES,
    OLD_FAILURE_MODES,
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
        # skipped a digit: one missing, not the last, everything else right
        ("12345", "1235", "skipped_digit"),
        ("12345", "2345", "skipped_digit"),  # the first glyph left out
        # stopped short: fewer digits otherwise, whatever else is wrong
        ("12345", "123", "stopped_short"),
        ("12345", "", "stopped_short"),
        ("12345", "1234", "stopped_short"),  # only the last digit missing: it stopped
        ("1234567890", "12367890", "stopped_short"),  # two left out inside
        ("27483733", "2743833", "stopped_short"),  # one left out, and one misread
        ("1234567890", "9", "stopped_short"),
        # ran long: more digits, whatever else is wrong
        ("12345", "123456", "ran_long"),
        ("12345", "1293456", "ran_long"),  # a digit added inside, and one misread
        ("12345", "1234566666", "ran_long"),
        # misread: the right number of digits, substitutions only
        ("12345", "12945", "misread"),
        ("12345", "99999", "misread"),
        ("12345", "21345", "misread"),  # two swapped: two substitutions, no cheaper shift
        # other: the right number of digits, shifted along the truth
        ("12345", "23451", "other"),  # 1 left out, 1 added: 2 edits against 5 substitutions
        ("12345", "13452", "other"),
    ],
)
def test_failure_modes(truth, reading, mode):
    assert failure_mode(truth, reading) == mode


def test_misread_and_other_do_not_depend_on_which_cheapest_script_editops_returns():
    """Same length: "misread" when substituting in place is a cheapest script, even where
    rapidfuzz returns a cheapest script with a deletion and an insertion instead."""
    from rapidfuzz.distance import Hamming, Levenshtein

    for truth, reading in [("1212", "2121"), ("12345", "21345"), ("1112", "1121")]:
        lev, ham = Levenshtein.distance(truth, reading), Hamming.distance(truth, reading)
        assert failure_mode(truth, reading) == ("misread" if lev == ham else "other")
    assert Levenshtein.distance("1212", "2121") == 2 == Hamming.distance("1212", "2121") - 2
    assert failure_mode("1212", "2121") == "other"


def test_every_class_is_one_of_the_modes_and_each_has_legend_words():
    assert set(FAILURE_LEGEND) == set(FAILURE_MODES)
    assert len(FAILURE_MODES) == 5 and FAILURE_MODES[-1] == "other"
    assert not set(OLD_FAILURE_MODES) - {"misread"} & set(FAILURE_MODES)


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
    # "12" stopped short, "13" skipped a digit, "129" misread
    assert (row["stopped_short"], row["skipped_digit"], row["misread"]) == (0.25, 0.25, 0.25)
    assert (row["ran_long"], row["other"]) == (0.0, 0.0)
    by_hand = 0.5 * abs(0 - 0.45) + 0.5 * abs(0.5 - 0.85)
    assert row["ece"] == pytest.approx(by_hand)
