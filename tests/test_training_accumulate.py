"""``train.accumulate``: 4 micro-batches of 32 against one batch of 128 of the very same
strips, through the trainer's own step (the chapter's 8.8.3: the same effective batch).

Each micro-batch's loss is a mean over its own tokens, divided by the number of
micro-batches. When every strip of a step has one length, the micro-batches hold equal
token counts and that is exactly the batch's mean: the loss curves agree to float error.
When lengths mix, a micro-batch with fewer tokens weighs each of its tokens more than the
whole batch would: the curves differ, slightly (measured below, not hidden)."""

from __future__ import annotations

import pytest
import torch

from attnlab.data.strips import StripBatch, StripSynth
from attnlab.runs.rundir import RunDir
from attnlab.tasks.compose import compose
from attnlab.training.trainer import Trainer

STEPS, BATCH, MICRO = 50, 128, 4
MIXED_STEPS = 10  # enough to show the mixed-length gap is there, and small
SAME_LENGTH_TOL = 1e-4  # relative, per step: float32 summation order only
MIXED_TOL = 0.05  # relative, per step: token weighting of unequal micro-batches


class Replay:
    """Pre-drawn steps of BATCH strips, served whole or as MICRO equal slices in order."""

    def __init__(self, steps: list[StripBatch], parts: int):
        self.batches = [self._slice(b, i, parts) for b in steps for i in range(parts)]
        self.i = 0

    @staticmethod
    def _slice(b: StripBatch, i: int, parts: int) -> StripBatch:
        n = len(b.labels) // parts
        sl = slice(i * n, (i + 1) * n)
        w = b.widths[sl]
        return StripBatch(b.images[sl, :, : int(w.max())], w, b.labels[sl], b.spans[sl])

    def next(self) -> StripBatch:
        self.i += 1
        return self.batches[self.i - 1]


def _steps(synth: StripSynth, mixed: bool, steps: int) -> list[StripBatch]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for s in range(steps):
        if mixed:
            lengths = torch.randint(1, 4, (BATCH,), generator=gen)
        else:
            lengths = torch.full((BATCH,), 1 + s % 3)
        out.append(synth.sample(lengths, gen, augment=True))
    return out


def _curve(tmp_path, steps: list[StripBatch], accumulate: int) -> list[float]:
    cfg = compose(
        [
            "model=attention", "preset=tiny", "train.threads=1", f"train.steps={STEPS}",
            f"train.batch_size={BATCH // accumulate}", f"train.accumulate={accumulate}",
        ]
    )  # fmt: skip
    run = tmp_path / f"acc{accumulate}-{len(steps)}"
    trainer = Trainer(cfg, RunDir(run), stream=Replay(steps, accumulate))
    return [trainer.advance() for _ in steps]


def _gap(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) / abs(x) for x, y in zip(a, b, strict=True))


@pytest.mark.slow  # 2 x 50 steps of 128 strips, then 2 x 10: ~20 s of CPU
def test_accumulated_micro_batches_follow_one_batch(tmp_path):
    synth = StripSynth(compose(["preset=tiny"]).data)
    same = _steps(synth, mixed=False, steps=STEPS)
    one, four = _curve(tmp_path, same, 1), _curve(tmp_path, same, MICRO)
    assert one[-1] < 0.8 * one[0]  # the curve is a learning curve, not a flat line
    assert _gap(one, four) < SAME_LENGTH_TOL
    mixed = _steps(synth, mixed=True, steps=MIXED_STEPS)
    one, four = _curve(tmp_path, mixed, 1), _curve(tmp_path, mixed, MICRO)
    gap = _gap(one, four)
    assert 0 < gap < MIXED_TOL
