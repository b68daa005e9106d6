"""Readers that decode step by step, written once.

A ``StepwiseReader`` emits one token per step from a decoder state, the previous token and
what it may read of the strip (``Memory``, attnlab.models.decoder_memory). Teacher forcing
and the cross-entropy loss with BOS/EOS are here; batched greedy decoding and batched beam
search are attnlab.models.stepwise_search. A step-wise reader supplies ``encode``
(optional), ``init_state`` and ``step``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnlab.config import ModelConfig
from attnlab.config.rules import check_at_least, finite, require
from attnlab.models import costs, ctc_loss, tokens
from attnlab.models.base import Reader
from attnlab.models.decoder_memory import Memory
from attnlab.models.stepwise_search import beam_search, greedy


@dataclass
class StepwiseConfig(ModelConfig):
    """Fields every step-wise reader has: the decoder's state size and token embedding."""

    dec_hidden: int = 128
    embed: int = 32
    # Weight of an auxiliary CTC loss on the encoder's column states during training (joint
    # CTC-attention, Kim et al., 2017): a digit-or-blank classifier on every column teaches
    # the shared encoder column features that name the glyph under them. Reading never uses
    # it. 0 = off.
    ctc_aux: float = 0.0

    @classmethod
    def check(cls, m: Any, height: int) -> None:
        super().check(m, height)
        check_at_least(m, "model", ("dec_hidden", "embed"))
        ok = finite(m.ctc_aux) and m.ctc_aux >= 0
        require(ok, "model.ctc_aux", m.ctc_aux, "must be >= 0 (a loss weight)")


class StepwiseReader(Reader):
    """Encoder + a decoder that reads one token per step (embedding, init, output layer)."""

    # the output layer and the auxiliary CTC head: the tensors tied to the vocabulary
    PARTS = {"encoder": ("encoder",), "decoder": ("embed", "init"), "output": ("out", "ctc_head")}

    def __init__(
        self,
        cfg: StepwiseConfig,
        height: int,
        recurrent: bool = True,
        memory_size: int | None = None,
    ):
        """``memory_size``: the size of ``Memory.states`` when ``encode`` returns other states
        than the encoder's (the auxiliary CTC classifier reads them); default its own."""
        super().__init__(cfg, height, recurrent)
        self.embed = nn.Embedding(self.vocab, cfg.embed)
        state = self.encoder.state_size
        self.init = nn.Linear(state, cfg.dec_hidden)
        self.out = nn.Linear(cfg.dec_hidden + state + cfg.embed, self.vocab)
        assert cfg.ctc_aux >= 0, "StepwiseConfig.check"
        self.ctc_aux = float(cfg.ctc_aux)
        columns = memory_size or state
        classes = len(self.charset) + 1  # the charset, then the blank
        self.ctc_head = nn.Linear(columns, classes) if self.ctc_aux > 0 else None

    def shared_terms(self, columns: int, steps: int) -> list[costs.Term]:
        """The closed-form terms every step-wise reader shares (attnlab.models.costs): the
        encoder's, the decoder's initial state (once per strip, when it has one), the output
        layer (once per step) and the auxiliary CTC classifier (once per column, when on)."""
        terms = self.encoder.flop_terms(columns)
        init = getattr(self, "init", None)
        if isinstance(init, nn.Linear):
            n = costs.linear(1, init.in_features, init.out_features)
            terms.append(costs.Term("initial state", "decoder", "init", "strip", n))
        n = costs.linear(steps, self.out.in_features, self.out.out_features)
        terms.append(costs.Term("output layer", "output", "out", "step", n))
        if self.ctc_head is not None:
            n = costs.linear(columns, self.ctc_head.in_features, self.ctc_head.out_features)
            terms.append(costs.Term("CTC classifier", "output", "ctc_head", "column", n))
        return terms

    def encode(self, images: torch.Tensor, widths: torch.Tensor) -> Memory:
        states, lengths, summary = self.encoder(images, widths)
        cols = torch.arange(states.shape[1], device=states.device)
        mask = cols[None, :] < lengths[:, None]  # (B, T)
        return Memory(states, mask, summary)

    def decoding_memory(self, memory: Memory) -> Memory:
        """The memory free decoding reads (``read``; the ONNX export's encoder graph gives
        it): by default the one teacher forcing reads. A reader whose decoding differs (a
        stopping rule) marks it here."""
        return memory

    def init_state(self, memory: Memory) -> torch.Tensor:
        return torch.tanh(self.init(memory.summary)).float()  # (B, D)

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        """One output step: prev tokens (B,) -> logits (B, V), new state (B, D), weights
        (B, T) or None."""
        raise NotImplementedError

    def teacher_forcing(self, memory: Memory, inputs: torch.Tensor):
        """inputs (B, S) -> logits (B, S, V) and weights (B, S, T) or None; 0 where the input
        is PAD. Readers whose steps do not depend on each other's outputs may override this
        with one call.

        Steps run on the rows still reading (packed, as the encoder's GRU is): rows sorted
        longest first, step t computes only the rows whose input t is a token, so a batch
        of mixed lengths costs its tokens, not its longest reading times its size.
        """
        b, s = inputs.shape
        real = inputs != tokens.PAD  # (B, S): a prefix of each row
        order = torch.argsort(real.sum(1), descending=True, stable=True)
        active = real.sum(0).tolist()  # rows reading at each step, longest first
        memory, inputs = memory.rows(lambda x: x[order]), inputs[order]
        state = self.init_state(memory)
        logits, weights = [], []
        for t in range(s):
            n = active[t]
            if n == 0:
                break
            state = state[:n]
            step_logits, state, w = self.step(
                memory.rows(lambda x, n=n: x[:n]), state, inputs[:n, t]
            )
            logits.append(nn.functional.pad(step_logits, (0, 0, 0, b - n)))
            weights.append(None if w is None else nn.functional.pad(w, (0, 0, 0, b - n)))
        back = torch.argsort(order)
        out = _steps(logits, s)[back]
        return out, None if weights[0] is None else _steps(weights, s)[back]

    def forward(self, images, widths, inputs):
        """Teacher forcing from pixels: inputs (B, S) -> logits (B, S, V), weights or None."""
        return self.teacher_forcing(self.encode(images, widths), inputs)

    def loss(self, images, widths, labels):
        """Cross-entropy of every target token ``[d1..dL, EOS]`` given ``[BOS, d1..dL]``,
        plus ``ctc_aux`` x the CTC loss of the labels on the column states (when on)."""
        inputs, targets = tokens.encode(labels, self.charset)
        memory = self.encode(images, widths)
        logits, _ = self.teacher_forcing(memory, inputs.to(images.device))
        loss = nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]),
            targets.to(images.device).reshape(-1),
            ignore_index=tokens.PAD,
        )
        if self.ctc_head is None:
            return loss
        logp = torch.log_softmax(self.ctc_head(memory.states).float(), -1)  # (B, T, CLASSES)
        # A strip too narrow for its label's CTC path (rare at the default strides) adds 0.
        aux = ctc_loss.ctc_nll(logp, memory.lengths, labels, True, self.charset)
        return loss + self.ctc_aux * aux

    @torch.no_grad()
    def read(self, images, widths, beam=1, lengths=None):
        memory = self.decoding_memory(self.encode(images, widths))
        if beam <= 1:
            return greedy(self, memory, lengths)
        return beam_search(self, memory, beam, lengths=lengths)

    def digit_probs(self, images, widths, texts):
        """Teacher forcing on ``texts``: (B, Lmax + 1) probability of each digit of each text,
        then of EOS, given the text before it; 0 past the end."""
        inputs, targets = tokens.encode(texts, self.charset)
        inputs, targets = inputs.to(images.device), targets.to(images.device)
        logits, _ = self(images, widths, inputs)
        p = torch.softmax(logits.float(), -1).gather(-1, targets[..., None])[..., 0]
        return p * (targets != tokens.PAD)


def _steps(per_step: list[torch.Tensor], s: int) -> torch.Tensor:
    """Step outputs, each (B, X), stacked to (B, S, X); 0 for the steps after the last."""
    out = torch.stack(per_step, 1)
    return nn.functional.pad(out, (0, 0, 0, s - out.shape[1]))


def gru_step(cell: nn.GRUCell, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """The recurrence runs in float32 even under autocast."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        return cell(x.float(), state.float())
