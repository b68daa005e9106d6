"""The CTC reader: the shared column encoder, then a classifier over the characters of
``data.charset`` (the ten digits by default) + blank at every column, trained with CTC (Graves
et al., 2006). There is no decoder and no stopping decision: a reading is whatever the
columns emit, so it cannot run past the strip's end.

Classes: character i of the charset is class i (digit d is class d), the blank is the last
class, ``len(charset)`` (``BLANK`` = 10 for the digits); its decoding takes it from the
posteriors' last dimension (classes = characters + blank). A reading of L digits needs
at least L + r encoder columns (r = adjacent repeated digits, each needing a blank between),
so ``model.stride`` must leave a strip of L digits at least that many columns; the default
(conf/model/ctc.yaml) is stride 4, about 4.4 columns per digit (never under 2.6 on the
default strips, 1-16 digits). A training label its strip cannot represent is refused (CTC's
loss would be infinite); at read time a strip too short for a reading reads what it can.

Its loss is attnlab.models.ctc_loss; its decoding (greedy, oracle-length and beam readings,
their ``weights``, ``confidence`` and ``score``) is attnlab.models.ctc_decode.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnlab.config import ModelConfig
from attnlab.errors import UserError
from attnlab.models import costs
from attnlab.models.base import Reader
from attnlab.models.ctc_decode import digit_probs_of, search
from attnlab.models.ctc_loss import columns_needed, ctc_nll
from attnlab.models.host import host_side
from attnlab.models.registry import register


@dataclass
class CTCConfig(ModelConfig):
    pass


@register("ctc", CTCConfig, "CTC reader: a character-or-blank classifier on every column")
class CTCReader(Reader):
    PARTS = {"encoder": ("encoder",), "output": ("classify",)}
    # Its weights are each digit's posterior over its run of columns on the decoded path
    # (attnlab.models.ctc_decode), not an attention: their entropy measures how many columns
    # a digit's run spans, so the evaluation reports no attention entropy for it.
    ATTENTION = False

    def __init__(self, cfg: CTCConfig, height: int):
        super().__init__(cfg, height)
        # The charset's classes, then the blank (CLASSES = 11 for the digits).
        self.classify = nn.Linear(self.encoder.state_size, len(self.charset) + 1)

    def flop_terms(self, columns, steps):
        c = self.classify
        n = costs.linear(columns, c.in_features, c.out_features)
        return [
            *self.encoder.flop_terms(columns),
            costs.Term("classifier", "output", "classify", "column", n),
        ]

    def too_long(self, label, columns):
        if columns_needed(label) > columns:  # a blank between repeated characters
            return f"CTC needs {columns_needed(label)} columns, the strip has {columns}"
        return None

    def log_probs(self, images, widths):
        """(B, T, C) log posteriors in float32, and the real columns (B,)."""
        states, cols, _ = self.encoder(images, widths)
        return torch.log_softmax(self.classify(states).float(), -1), cols

    def loss(self, images, widths, labels):
        """CTC negative log-likelihood summed over the batch, per label digit (as the
        step-wise readers' cross-entropy is per token); impossible labels are refused."""
        _refuse_short_strips(self.encoder, widths, labels)
        logp, cols_t = self.log_probs(images, widths)
        return ctc_nll(logp, cols_t, labels, charset=self.charset)

    @torch.no_grad()
    def read(self, images, widths, beam=1, lengths=None):
        logp, cols = self.log_probs(images, widths)
        return search(logp, cols, beam, lengths, self.charset)

    @torch.no_grad()
    def digit_probs(self, images, widths, texts):
        logp, cols = self.log_probs(images, widths)
        return digit_probs_of(logp, cols, texts, self.charset)


@host_side  # Python on the label strings: outside a compiled loss's graphs
def _refuse_short_strips(encoder, widths: torch.Tensor, labels: list[str]) -> None:
    """A training label its strip has too few columns for is refused (CTC's loss would be
    infinite)."""
    cols = encoder.column_lengths(widths).tolist()
    for i, (label, c) in enumerate(zip(labels, cols, strict=True)):
        if columns_needed(label) > c:
            raise UserError(
                f"model.stride={encoder.stride}: strip {i} ({int(widths[i])} px) has "
                f"{c} columns but its label {label!r} needs {columns_needed(label)} for CTC "
                "(one per digit, one blank between repeats); use a smaller model.stride"
            )
