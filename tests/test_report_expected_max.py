"""The expected best of n tuning trials (issue #42): Tang et al.'s unbiased estimator and
Dodge et al.'s, checked against values worked out by hand and, for the unbiased one, against
the mean best of every n-subset of the trials, enumerated."""

from __future__ import annotations

import itertools
from statistics import mean

import numpy as np
import pytest

from attnlab.report.expected_max import (
    COLUMNS,
    band,
    crossing_line,
    dodge,
    expected_best,
    expected_max_frame,
    unbiased,
)

SCORES = [0.5, 0.9, 0.2]  # N = 3, unsorted on purpose


def test_both_estimators_against_hand_computed_values():
    # Without replacement: n=1 the mean; n=2 the three pairs' maxima 0.5, 0.9, 0.9; n=3 the max.
    assert unbiased(SCORES) == pytest.approx([1.6 / 3, 2.3 / 3, 0.9])
    # With replacement: sum_i v(i) ((i/3)^n - ((i-1)/3)^n) over v = 0.2, 0.5, 0.9.
    n2 = 0.2 * 1 / 9 + 0.5 * 3 / 9 + 0.9 * 5 / 9
    n3 = 0.2 * 1 / 27 + 0.5 * 7 / 27 + 0.9 * 19 / 27
    assert dodge(SCORES) == pytest.approx([1.6 / 3, n2, n3])
    assert dodge(SCORES)[2] < unbiased(SCORES)[2]  # with replacement: draws may repeat
    # A minimised objective (val_cer): the expected lowest of n, the pairs' minima 0.2, 0.2, 0.5
    assert expected_best(SCORES, "unbiased", maximize=False) == pytest.approx(
        [1.6 / 3, 0.9 / 3, 0.2]
    )
    low2 = 0.9 * 1 / 9 + 0.5 * 3 / 9 + 0.2 * 5 / 9  # the mirror of n2
    assert expected_best(SCORES, "dodge", maximize=False)[1] == pytest.approx(low2)


@pytest.mark.parametrize("big_n", range(1, 9))
def test_the_unbiased_estimator_is_the_mean_best_over_every_subset(big_n):
    scores = np.random.default_rng(big_n).normal(size=big_n).round(3).tolist()
    scores[-1] = scores[0]  # a tie among the trials
    for n in range(1, big_n + 1):
        subsets = itertools.combinations(scores, n)
        assert unbiased(scores)[n - 1] == pytest.approx(mean(max(s) for s in subsets))
        lows = mean(min(s) for s in itertools.combinations(scores, n))
        assert expected_best(scores, "unbiased", maximize=False)[n - 1] == pytest.approx(lows)


def test_the_band_is_seeded_and_holds_the_estimate():
    lo, hi = band(SCORES, "unbiased", n_boot=200, seed=3)
    assert (lo, hi) == band(SCORES, "unbiased", n_boot=200, seed=3)
    assert all(a <= e <= b for a, e, b in zip(lo, unbiased(SCORES), hi, strict=True))
    frame = expected_max_frame({"a": SCORES, "b": [0.3, 0.4]}, n_boot=50)
    assert list(frame.columns) == COLUMNS == ["variant", "n", "estimator", "expected", "lo", "hi"]
    assert sorted(frame.groupby(["variant", "estimator"]).size().tolist()) == [2, 2, 3, 3]


def test_the_crossing_line_says_whether_and_where():
    # a: steady (0.6 every trial); b: mostly bad, one very good trial -> b wins with many trials
    frame = expected_max_frame({"a": [0.6, 0.6, 0.6, 0.6], "b": [0.1, 0.2, 0.3, 0.95]}, n_boot=0)
    b = unbiased([0.1, 0.2, 0.3, 0.95])
    first_ahead = next(n for n in range(1, 5) if b[n - 1] > 0.6)
    line = crossing_line(frame, "a", "b")
    assert f"cross between n = {first_ahead - 1} and n = {first_ahead}" in line, line
    assert "a is better with few trials, b with 4" in line
    # minimised: lower is better, so the same scores do not cross the same way
    low = expected_max_frame({"a": [0.6] * 4, "b": [0.7, 0.8, 0.9, 0.95]}, False, n_boot=0)
    assert crossing_line(low, "a", "b", maximize=False).endswith(
        "do not cross at n = 1..4: a is lower (better) at every budget"
    )


def test_curves_that_meet_only_at_the_end_are_not_called_equal():
    # issue 50 item 6: fixed [0.0417, 0.0625, 0.0833], attention [0.0625, 0.0833, 0.0833]:
    # unbiased fixed 0.0625, 0.0764, 0.0833; attention 0.0764, 0.0833, 0.0833.
    scores = {"fixed": [0.0417, 0.0625, 0.0833], "attention": [0.0625, 0.0833, 0.0833]}
    line = crossing_line(expected_max_frame(scores), "attention", "fixed")
    assert "are equal" not in line
    assert "attention is higher at n = 1..2, level within the 95% bands; equal at n = 3" in line
    apart = {"a": [0.1, 0.2, 0.3, 0.4], "b": [0.8, 0.9, 0.95, 0.97]}
    assert crossing_line(expected_max_frame(apart, n_boot=200), "a", "b").endswith(
        "b is higher (better) at every budget, clear of the 95% bands at n = 1..4"
    )
    same = {"a": [0.6] * 3, "b": [0.6] * 3}
    assert crossing_line(expected_max_frame(same), "a", "b").endswith("equal at every n = 1..3")
