"""What every reader is: a column encoder (any of attnlab.models.encoders) plus its own loss
and its own way of reading.

Training calls ``reader.loss(images, widths, labels)``; evaluation, ``attnlab read``, the
TensorBoard images and the bench call ``reader.read(images, widths, beam)``. Neither asks
which reader it holds: a reader that has attention weights returns them in ``Decoded``,
and maps are drawn whenever they are there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from attnlab.config import ModelConfig
from attnlab.models import costs, encoders, tokens


@dataclass
class Decoded:
    """What a reader read of a batch of strips (tensors on the reader's device)."""

    texts: list[str]
    confidence: torch.Tensor  # (B,) probability the reader gives its reading
    weights: torch.Tensor | None  # (B, S, T) weight of each column at each output step, or None
    columns: torch.Tensor  # (B,) real encoder columns of each strip
    score: torch.Tensor  # (B,) the reader's own ranking score of the reading (higher = better)


class Reader(nn.Module):
    """A digit-strip reader. Subclasses are registered by name (attnlab.models.registry)."""

    name: ClassVar[str] = ""  # set by the registry
    # The reader's parts, for ``train.freeze`` (attnlab.training.freeze): part name -> the
    # attributes (submodules or parameters) that make it. Every parameter belongs to exactly
    # one part (the registry's contract test checks it); an attribute a config leaves unbuilt
    # (None) is skipped. A reader whose modules differ declares its own.
    PARTS: ClassVar[dict[str, tuple[str, ...]]] = {"encoder": ("encoder",)}
    # Why no ONNX graph can hold this reader (``attnlab export`` refuses it with this reason,
    # attnlab.export.graphs); None: it exports as a step-wise reader or as the CTC reader.
    ONNX_REFUSED: ClassVar[str | None] = None
    # Whether ``Decoded.weights`` are an attention (a weighting of the columns read at each
    # output step), whose entropy the evaluation reports as attention entropy. False: they
    # are drawn as maps but are something else (the CTC reader's path posteriors).
    ATTENTION: ClassVar[bool] = True

    def __init__(self, cfg: ModelConfig, height: int, recurrent: bool = True):
        """The encoder is the one ``cfg.backbone`` names (attnlab.models.encoders): a reader
        asks it for column states, never for a kind of encoder. ``recurrent`` False builds it
        without its BiGRU, for a reader that encodes the column features its own way
        (``self.encoder.features``)."""
        super().__init__()
        self.charset = tokens.building_charset()  # the characters it reads (data.charset)
        self.vocab = tokens.vocab_size(self.charset)  # PAD, BOS, EOS + the charset
        self.encoder = encoders.build(cfg, height, recurrent)

    def loss(self, images: torch.Tensor, widths: torch.Tensor, labels: list[str]) -> torch.Tensor:
        """images (B, H, W), widths (B,), labels: the training loss of the batch (a scalar)."""
        raise NotImplementedError

    def read(
        self,
        images: torch.Tensor,
        widths: torch.Tensor,
        beam: int = 1,
        lengths: torch.Tensor | None = None,
    ) -> Decoded:
        """Read a batch of strips (no gradients needed); ``beam`` 1 is greedy decoding.

        ``lengths`` (B,), when given, is the true number of digits: the reading must have
        exactly that many (oracle-length decoding, a diagnostic of the stopping decision).
        """
        raise NotImplementedError

    def digit_probs(
        self, images: torch.Tensor, widths: torch.Tensor, texts: list[str]
    ) -> torch.Tensor:
        """(B, Lmax + 1): the probability the reader gives each digit of ``texts`` (then EOS)
        at its step, reading ``texts`` as given (teacher forcing); 0 past the end. Used by
        the intervention probes; a reader that cannot say raises NotImplementedError."""
        raise NotImplementedError

    def head_weights(
        self, images: torch.Tensor, widths: torch.Tensor, texts: list[str]
    ) -> dict[str, torch.Tensor] | None:
        """Every attention head's weights over the columns, by name (e.g. "layer 2 head 1"),
        each (B, Lmax + 1, T), reading ``texts`` as given (teacher forcing: one step per
        digit, then EOS's). None (the default): the reader has one attention, its weights.
        ``attnlab eval`` draws these per-head maps for a few strips."""
        return None

    def flop_terms(self, columns: int, steps: int) -> list[costs.Term] | None:
        """Closed-form forward FLOPs of reading one strip of ``columns`` encoder columns with
        ``steps`` output steps (digits + EOS, teacher forcing), by module
        (attnlab.models.costs); ``attnlab cost`` checks them against the counter. None
        (the default): this reader has no closed form, and is counted only."""
        return None

    def too_long(self, label: str, columns: int) -> str | None:
        """Why this reader cannot be trained on ``label`` in a strip of ``columns`` encoder
        columns (None: it can). Default: one output step per column at most. Training on
        labelled strips checks every label with it before anything is written."""
        if len(label) > columns:
            return f"{len(label)} characters, {columns} columns"
        return None


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
