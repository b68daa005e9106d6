"""Token ids in one place: PAD, BOS, EOS and the ten digits; readings are cut after EOS."""

from __future__ import annotations

import torch

PAD, BOS, EOS = 0, 1, 2
DIGIT0 = 3  # id of "0"; digit d has id DIGIT0 + d
VOCAB = DIGIT0 + 10


def encode(labels: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels -> teacher-forcing inputs ``[BOS, d1..dL]`` and targets ``[d1..dL, EOS]``.

    Both (B, Lmax + 1), padded with PAD (ignored by the loss).
    """
    steps = max(len(s) for s in labels) + 1
    inputs = torch.full((len(labels), steps), PAD, dtype=torch.long)
    targets = torch.full((len(labels), steps), PAD, dtype=torch.long)
    for i, s in enumerate(labels):
        ids = [DIGIT0 + int(c) for c in s]
        inputs[i, : len(ids) + 1] = torch.tensor([BOS, *ids])
        targets[i, : len(ids) + 1] = torch.tensor([*ids, EOS])
    return inputs, targets


def decode(ids: torch.Tensor) -> list[str]:
    """(B, S) token ids -> strings, cut at each row's first EOS; non-digits are dropped."""
    out = []
    for row in ids.tolist():
        chars = []
        for t in row:
            if t == EOS:
                break
            if DIGIT0 <= t < VOCAB:
                chars.append(str(t - DIGIT0))
        out.append("".join(chars))
    return out
