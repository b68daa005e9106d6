"""What is special about the CTC reader: collapsing paths, prefix beam search, the oracle-
length DP, the forced alignment, the refusal of labels too long for their strip, its loss
and the weights it draws from a path. Hand-made posteriors, checked against brute force."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from helpers.readers import strips, tiny_reader

from attnlab.errors import UserError
from attnlab.models.ctc_decode import collapse, digit_probs_of, forced_align, oracle_path, search
from attnlab.models.ctc_loss import BLANK, CLASSES, ctc_nll, label_targets

B = BLANK


def peaked(*rows: list[int], p: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """Log posteriors (R, T, C) with probability p on each listed class, the rest spread
    evenly; rows shorter than the longest are padded (columns (R,) says which are real)."""
    t = max(map(len, rows))
    probs = torch.full((len(rows), t, CLASSES), (1 - p) / (CLASSES - 1))
    for r, row in enumerate(rows):
        for i, c in enumerate(row):
            probs[r, i, c] = p
    return probs.log(), torch.tensor([len(row) for row in rows])


def brute_force(logp: torch.Tensor, cols: int) -> dict[str, list[float]]:
    """Every path over the first ``cols`` columns of one strip: reading -> path log probs."""
    table = logp.tolist()
    out: dict[str, list[float]] = {}
    for path in itertools.product(range(CLASSES), repeat=cols):
        text, prev = "", BLANK
        for c in path:
            if c != BLANK and c != prev:
                text += str(c)
            prev = c
        out.setdefault(text, []).append(sum(table[i][c] for i, c in enumerate(path)))
    return out


def test_the_loss_is_minus_log_the_probability_of_every_path_to_the_label_per_digit():
    torch.manual_seed(0)
    logp = torch.log_softmax(torch.randn(2, 3, CLASSES), -1)
    cols = torch.tensor([3, 2])  # the second strip's third column is padding
    paths = [brute_force(logp[0], 3)["12"], brute_force(logp[1], 2)["7"]]
    want = -sum(math.log(sum(math.exp(x) for x in p)) for p in paths) / 3  # 3 label digits
    assert math.isclose(float(ctc_nll(logp, cols, ["12", "7"])), want, rel_tol=1e-5)


@pytest.fixture(scope="module")
def random_case():
    torch.manual_seed(0)
    logp = (2 * torch.randn(1, 4, CLASSES)).log_softmax(-1)  # peaky enough for ties to be rare
    return logp, brute_force(logp[0], 4)


def test_best_path_collapses_repeats_and_drops_blanks():
    logp, cols = peaked([1, 1, B, 1, 2], [B, 3, 3, B], [7, B, 7, 7, B, B, 0])
    out = search(logp, cols)
    assert out.texts == ["112", "3", "770"]
    assert torch.all(out.confidence > 0.9 ** cols.float())  # more paths than the best one
    assert torch.allclose(out.score, out.confidence.log() / torch.tensor([4.0, 2.0, 4.0]))
    texts, count, run = collapse(logp.argmax(-1), torch.arange(7)[None] < cols[:, None])
    assert count.tolist() == [3, 1, 3]
    assert run[0].tolist()[:5] == [0, 0, -1, 1, 2] and run[1].tolist()[:4] == [-1, 0, 0, -1]


def test_prefix_beam_finds_a_reading_more_probable_than_the_best_path():
    # Two columns, each blank .45, "1" .35, "2" .2: the best path is blank-blank (""),
    # .2025, but "1" has three paths (1-, -1, 11): .1575 + .1575 + .1225 = .4375.
    probs = torch.full((1, 2, CLASSES), 1e-9)
    probs[..., B], probs[..., 1], probs[..., 2] = 0.45, 0.35, 0.2
    logp, cols = probs.log(), torch.tensor([2])
    greedy, beam = search(logp, cols), search(logp, cols, beam=3)
    assert greedy.texts == [""] and math.isclose(float(greedy.confidence), 0.2025, rel_tol=1e-4)
    assert beam.texts == ["1"] and math.isclose(float(beam.confidence), 0.4375, rel_tol=1e-4)
    assert float(beam.score) >= float(greedy.score)


def test_confidence_is_the_exact_total_probability_and_beam_never_scores_below_greedy(
    random_case,
):
    logp, paths = random_case
    cols = torch.tensor([4])
    greedy = search(logp, cols)
    total = math.exp(torch.tensor(paths[greedy.texts[0]]).logsumexp(0))
    assert math.isclose(float(greedy.confidence), total, rel_tol=1e-4)
    for width in (2, 5):
        out = search(logp, cols, beam=width)
        total = math.exp(torch.tensor(paths[out.texts[0]]).logsumexp(0))
        assert math.isclose(float(out.confidence), total, rel_tol=1e-4)
        assert float(out.score) >= float(greedy.score) - 1e-6
    best = max(paths, key=lambda s: float(torch.tensor(paths[s]).logsumexp(0)) / (len(s) + 1))
    assert search(logp, cols, beam=8).texts == [best]


def test_oracle_path_emits_exactly_l_digits_and_matches_brute_force(random_case):
    logp, paths = random_case
    for length in range(5):
        want = max(max(v) for s, v in paths.items() if len(s) == length)
        path, score = oracle_path(logp, torch.tensor([4]), torch.tensor([length]))
        texts, count, _ = collapse(path, torch.ones(1, 4, dtype=torch.bool))
        assert int(count) == length and len(texts[0]) == length
        assert math.isclose(float(score), want, rel_tol=1e-5)
        assert math.isclose(float(logp[0].gather(1, path[0, :, None]).sum()), want, rel_tol=1e-5)
        for beam in (1, 3):
            out = search(logp, torch.tensor([4]), beam=beam, lengths=torch.tensor([length]))
            assert len(out.texts[0]) == length


def test_oracle_length_on_a_strip_too_short_reads_what_it_can():
    logp, cols = peaked([1, B, 2], [3, 4, 5, B, B])
    out = search(logp, cols, lengths=torch.tensor([5, 2]))
    assert [len(t) for t in out.texts] == [3, 2]  # 3 columns hold at most 3 digits


def test_forced_alignment_is_the_best_path_of_each_text(random_case):
    logp, paths = random_case
    texts = ["", "7", "11", "12", "1212", "111"]  # "111" needs 5 columns: impossible in 4
    targets, tlen = label_targets(texts, "cpu")
    path, score = forced_align(logp.expand(len(texts), -1, -1), torch.full((6,), 4), targets, tlen)
    got, _, _ = collapse(path, torch.ones(6, 4, dtype=torch.bool))
    for i, text in enumerate(texts):
        if text in paths:
            assert got[i] == text and math.isclose(float(score[i]), max(paths[text]), rel_tol=1e-5)
        else:
            assert float(score[i]) == float("-inf")


def test_a_label_its_strip_cannot_hold_is_refused_in_one_line_naming_the_stride():
    m = tiny_reader("ctc", "model.stride=16")
    images = torch.ones(2, 32, 48)
    widths = torch.tensor([48, 48])  # 3 columns each
    with pytest.raises(UserError) as err:
        m.loss(images, widths, ["123", "1121"])  # "1121" needs 4 + 1 columns
    msg = str(err.value)
    assert "\n" not in msg and "model.stride=16" in msg and "'1121'" in msg and "5" in msg
    assert torch.isfinite(m.loss(images, widths, ["123", "12"]))


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("oracle", [False, True])
def test_weights_rows_sum_to_one_over_real_columns_and_are_zero_elsewhere(beam, oracle):
    logp, cols = peaked([B, 4, 4, B, 2, B, B], [5, B, 6], [9, B, B, B, 9, 9])
    lengths = torch.tensor([2, 2, 2]) if oracle else None
    out = search(logp, cols, beam=beam, lengths=lengths)
    assert out.texts == ["42", "56", "99"]
    s = out.weights.shape[1]
    for i, text in enumerate(out.texts):
        steps = len(text) + 1
        assert torch.allclose(out.weights[i, :steps].sum(-1), torch.ones(steps), atol=1e-5)
        assert torch.all(out.weights[i, :, int(cols[i]) :] == 0)
        assert torch.all(out.weights[i, steps:s] == 0)
    # Digit rows sit on their run; EOS is on the blanks after the last digit, or uniform.
    assert out.weights[0, 0, 1:3].sum() > 0.999 and out.weights[0, 2, 5:7].sum() > 0.999
    assert torch.allclose(out.weights[1, 2, :3], torch.full((3,), 1 / 3))


def test_digit_probs_follow_the_forced_alignment():
    logp, cols = peaked([1, 1, B, 2, B, B], [3, B, 3, B], [3, B, 3, B], p=0.8)
    probs = digit_probs_of(logp, cols, ["12", "33", "333"])  # "333" needs 5 columns of 4
    assert probs.shape == (3, 4)
    # Each digit: its posterior on its run; EOS: every column after the last digit blank.
    want = torch.tensor([[0.8, 0.8, 0.8**2, 0.0], [0.8, 0.8, 0.8, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert torch.allclose(probs, want, atol=1e-6), probs
    last, _ = peaked([1, B, 2])
    assert float(digit_probs_of(last, torch.tensor([3]), ["12"])[0, 2]) == 1.0  # none after


def test_the_reader_reads_and_scores_real_strips():
    s = strips([3, 1, 5])
    m = tiny_reader("ctc")
    loss = m.loss(s.images, s.widths, s.labels)
    assert loss.ndim == 0 and torch.isfinite(loss)
    with torch.no_grad():
        probs = m.digit_probs(s.images, s.widths, s.labels)
    assert probs.shape == (3, 6)
    assert torch.all(probs[1, 2:] == 0) and torch.all(probs[0, 4:] == 0)
    assert torch.all((probs >= 0) & (probs <= 1))
