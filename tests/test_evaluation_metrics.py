"""Metrics on hand-made readings: every expected number can be checked by hand."""

import math

import numpy as np
import pandas as pd
import pytest

from attnlab.evaluation.metrics import (
    TABLE_COLUMNS,
    alignment_hits,
    attention_entropy,
    bootstrap_cer_interval,
    edit_ops,
    per_length_table,
    spans_to_columns,
    table_markdown,
    wilson_interval,
)


def test_wilson_known_values():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4)
    assert hi == pytest.approx(0.9433, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0
    assert hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


@pytest.mark.parametrize(
    ("truth", "reading", "expected"),
    [
        ("1234", "1234", (0, 0, 0)),
        ("1234", "1294", (1, 0, 0)),
        ("1234", "12345", (0, 1, 0)),
        ("1234", "124", (0, 0, 1)),
        ("1234", "", (0, 0, 4)),
        ("", "12", (0, 2, 0)),
    ],
)
def test_edit_ops(truth, reading, expected):
    assert edit_ops(truth, reading) == expected


def test_bootstrap_degenerate_when_every_strip_has_same_rate():
    dist = np.array([1, 2, 3])
    ref = np.array([5, 10, 15])  # every strip: 20 % CER
    lo, hi = bootstrap_cer_interval(dist, ref, n_boot=200, seed=3)
    assert lo == hi == 0.2


def test_bootstrap_contains_point_and_is_seeded():
    rng = np.random.default_rng(0)
    ref = rng.integers(3, 12, size=300)
    dist = rng.binomial(ref, 0.1)
    cer = dist.sum() / ref.sum()
    lo, hi = bootstrap_cer_interval(dist, ref, n_boot=500, seed=7)
    assert lo < cer < hi
    assert hi - lo < 0.05
    assert bootstrap_cer_interval(dist, ref, n_boot=500, seed=7) == (lo, hi)
    assert all(math.isnan(x) for x in bootstrap_cer_interval(np.array([]), np.array([])))


def test_alignment_hits_diagonal_and_off_diagonal():
    spans = np.array([[0, 2], [2, 4], [4, 6]])  # 3 glyphs, 2 columns each
    diag = np.zeros((4, 6))  # 3 digit steps + EOS
    diag[[0, 1, 2, 3], [1, 3, 5, 5]] = 1.0
    assert alignment_hits(diag, spans) == (3, 3)
    off = np.zeros((4, 6))
    off[[0, 1, 2, 3], [0, 5, 4, 1]] = 1.0  # step 1 looks at glyph 3
    assert alignment_hits(off, spans) == (2, 3)
    assert alignment_hits(diag[:2], spans) == (2, 2)  # fewer steps than glyphs


def test_spans_to_columns():
    cols = spans_to_columns(np.array([[5, 13], [16, 20]]), stride=4)
    assert cols.tolist() == [[1, 4], [4, 5]]


def test_attention_entropy():
    uniform = np.full((3, 8), 1 / 8)
    assert attention_entropy(uniform, 3) == pytest.approx(math.log(8))
    mixed = np.vstack([np.eye(8)[:2], uniform[:1]])  # one-hot, one-hot, uniform
    assert attention_entropy(mixed, 2) == 0.0
    assert attention_entropy(mixed, 3) == pytest.approx(math.log(8) / 3)
    assert math.isnan(attention_entropy(mixed, 0))


def _records() -> pd.DataFrame:
    rows = [
        # length, truth, reading, confidence, align_hits, align_steps, entropy
        (3, "123", "123", 0.9, 3, 3, 0.5),
        (3, "456", "496", 0.7, 0, 0, 1.5),
        (5, "12345", "1234", 0.4, 0, 0, math.nan),
        (5, "12345", "123456", 0.6, 0, 0, math.nan),
        (5, "12345", "12345", 1.0, 4, 5, math.nan),
    ]
    cols = ["length", "truth", "reading", "confidence", "align_hits", "align_steps", "entropy"]
    return pd.DataFrame(rows, columns=cols)


def test_per_length_table_numbers():
    table = per_length_table(_records(), seen=[3, 4], n_boot=200)
    assert list(table.columns) == TABLE_COLUMNS
    assert table["length"].tolist() == [3, 5, "all", "all"]
    assert table["split"].tolist() == ["seen", "unseen", "seen", "unseen"]
    r3, r5, seen, unseen = (table.iloc[i] for i in range(4))

    assert r3["n"] == 2 and r3["exact_acc"] == 0.5
    assert r3["cer"] == pytest.approx(1 / 6)
    assert (r3["sub"], r3["ins"], r3["del"], r3["ref_chars"]) == (1, 0, 0, 6)
    assert r3["len_err"] == 0.0
    assert r3["mean_conf"] == pytest.approx(0.8)
    assert r3["align"] == 1.0
    assert r3["entropy"] == pytest.approx(1.0)
    assert r3["exact_lo"] < 0.5 < r3["exact_hi"]

    assert r5["n"] == 3 and r5["exact_acc"] == pytest.approx(1 / 3)
    assert r5["cer"] == pytest.approx(2 / 15)
    assert (r5["sub"], r5["ins"], r5["del"], r5["ref_chars"]) == (0, 1, 1, 15)
    assert r5["len_err"] == pytest.approx(2 / 3)
    assert r5["mean_conf"] == pytest.approx(2 / 3)
    assert r5["align"] == pytest.approx(0.8)
    assert math.isnan(r5["entropy"])
    assert r5["cer_lo"] <= r5["cer"] <= r5["cer_hi"]

    # one length per split here, so each total equals its length row
    for total, row in ((seen, r3), (unseen, r5)):
        for col in TABLE_COLUMNS[2:]:
            assert total[col] == pytest.approx(row[col], nan_ok=True), col


def test_per_length_table_totals_only_when_present():
    table = per_length_table(_records(), seen=[3, 4, 5], n_boot=50)
    assert table["length"].tolist() == [3, 5, "all"]
    seen = table.iloc[-1]
    assert seen["n"] == 5 and seen["exact_acc"] == pytest.approx(2 / 5)
    assert seen["cer"] == pytest.approx(3 / 21)  # corpus level, not mean of per-length CERs
    assert seen["align"] == pytest.approx(7 / 8)
    assert seen["entropy"] == pytest.approx(1.0)  # NaNs ignored


def test_table_markdown():
    text = table_markdown(per_length_table(_records(), seen=[3], n_boot=50), title="attention")
    assert text.startswith("### attention")
    assert "seen total" in text and "unseen total" in text
    assert "50.0 [" in text  # exact % with interval
    row5 = next(line for line in text.splitlines() if line.startswith("| 5 "))
    assert [c.strip() for c in row5.split("|")[6:9]] == ["0", "1", "1"]  # S/I/D of length 5
    assert "align" in text and "entropy" in text
    no_attn = _records().assign(align_hits=0, align_steps=0, entropy=math.nan)
    text = table_markdown(per_length_table(no_attn, seen=[3], n_boot=50))
    assert "alignment" not in text and "entropy" not in text
