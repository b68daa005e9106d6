"""CTC over the encoder's columns (Graves et al., 2006), written once: the CTC reader's own
loss, and the auxiliary loss a step-wise reader may add on its column states
(``model.ctc_aux``; joint CTC-attention training, Kim et al., 2017).

Classes: digit d is class d, the blank is class ``BLANK`` = 10.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.models.host import host_side

DIGITS = "0123456789"
BLANK = 10  # class of the CTC blank; class d < 10 is digit d
CLASSES = 11


@host_side  # Python on the label strings: outside a compiled loss's graphs
def label_targets(
    labels: list[str], device, charset: str = DIGITS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels -> classes (B, Lmax) padded with 0 (character i of ``charset`` is class i),
    and lengths (B,)."""
    index = {c: i for i, c in enumerate(charset)}
    lengths = torch.tensor([len(s) for s in labels], dtype=torch.long)
    targets = torch.zeros(len(labels), max(1, max(map(len, labels), default=0)), dtype=torch.long)
    for i, s in enumerate(labels):
        targets[i, : len(s)] = torch.tensor([index[c] for c in s], dtype=torch.long)
    return targets.to(device), lengths.to(device)


def columns_needed(label: str) -> int:
    """Columns a CTC path for ``label`` needs: one per digit, one blank per repeat."""
    return len(label) + sum(a == b for a, b in zip(label, label[1:], strict=False))


def ctc_nll(
    logp: torch.Tensor,
    cols: torch.Tensor,
    labels: list[str],
    zero_infinity: bool = False,
    charset: str = DIGITS,
) -> torch.Tensor:
    """CTC negative log-likelihood of ``labels`` summed over the batch, per label digit (as
    the step-wise readers' cross-entropy is per token). logp (B, T, CLASSES) log posteriors,
    cols (B,) real columns. ``zero_infinity``: a strip with too few columns for its label
    adds 0 instead of an infinite loss. ``charset``: its characters are classes 0..n-1 and
    the blank is class n (``BLANK`` for the digits)."""
    targets, tlen = label_targets(labels, logp.device, charset)
    nll = F.ctc_loss(
        logp.float().transpose(0, 1),
        targets,
        cols,
        tlen,
        blank=len(charset),
        reduction="sum",
        zero_infinity=zero_infinity,
    )
    return nll / tlen.sum().clamp(min=1)
