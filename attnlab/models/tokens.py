"""Token ids in one place: PAD, BOS, EOS, then the characters of the charset (``data.charset``,
the ten digits by default); readings are cut after EOS.

A reader's vocabulary is ``DIGIT0 + len(charset)``: character ``charset[i]`` has id
``DIGIT0 + i``, so for the digits id ``DIGIT0 + d`` is digit d, as it always was. The charset
a reader is built for comes from ``registry.build`` (``building``), and the reader keeps it
(``Reader.charset``); it is saved in the run's config inside every checkpoint.

Importing it needs no torch (only ``encode`` does): the ONNX reference loop
(``attnlab.export.runtime``) reads its ids and ``to_texts`` with NumPy alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from attnlab.models.host import host_side

if TYPE_CHECKING:
    import numpy as np
    import torch

PAD, BOS, EOS = 0, 1, 2
DIGIT0 = 3  # id of the charset's first character ("0"); character i has id DIGIT0 + i
DIGITS = "0123456789"
VOCAB = DIGIT0 + 10  # the vocabulary of the default charset (the digits)

_charset: ContextVar[str] = ContextVar("charset", default=DIGITS)


def vocab_size(charset: str = DIGITS) -> int:
    return DIGIT0 + len(charset)


@contextmanager
def building(charset: str) -> Iterator[None]:
    """The charset of the readers built inside (``registry.build``)."""
    token = _charset.set(str(charset))
    try:
        yield
    finally:
        _charset.reset(token)


def building_charset() -> str:
    return _charset.get()


@functools.lru_cache(maxsize=16)
def _index(charset: str) -> dict[str, int]:
    return {c: i for i, c in enumerate(charset)}


@host_side  # Python on the label strings: outside a compiled loss's graphs
def encode(labels: list[str], charset: str = DIGITS) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels -> teacher-forcing inputs ``[BOS, d1..dL]`` and targets ``[d1..dL, EOS]``.

    Both (B, Lmax + 1), padded with PAD (ignored by the loss).
    """
    import torch

    index = _index(charset)
    steps = max(len(s) for s in labels) + 1
    inputs = torch.full((len(labels), steps), PAD, dtype=torch.long)
    targets = torch.full((len(labels), steps), PAD, dtype=torch.long)
    for i, s in enumerate(labels):
        ids = [DIGIT0 + index[c] for c in s]
        inputs[i, : len(ids) + 1] = torch.tensor([BOS, *ids])
        targets[i, : len(ids) + 1] = torch.tensor([*ids, EOS])
    return inputs, targets


def to_texts(ids: torch.Tensor | np.ndarray, charset: str = DIGITS) -> list[str]:
    """(B, S) token ids (a tensor or a NumPy array) -> strings, cut at each row's first EOS;
    PAD and BOS are dropped."""
    top = DIGIT0 + len(charset)
    out = []
    for row in ids.tolist():
        chars = []
        for t in row:
            if t == EOS:
                break
            if DIGIT0 <= t < top:
                chars.append(charset[t - DIGIT0])
        out.append("".join(chars))
    return out
