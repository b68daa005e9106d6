"""The attention reader: a new context at every output step (Bahdanau et al.).

The query is the previous decoder state; the context is the weighted sum of the column
states, with padded columns masked out. Keys are projected once per strip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attnlab.config.rules import check_at_least
from attnlab.models import costs
from attnlab.models.decoder_memory import AttentionMemory
from attnlab.models.registry import register
from attnlab.models.scoring import Attention, Scorer
from attnlab.models.stepwise import (
    StepwiseConfig,
    StepwiseReader,
    gru_step,
)


@dataclass
class AttentionConfig(StepwiseConfig):
    ctc_aux: float = 1.0  # the lab's two readers train with the auxiliary CTC loss
    attn_dim: int = 64
    scorer: Scorer = Scorer.additive

    @classmethod
    def check(cls, m: Any, height: int) -> None:
        super().check(m, height)
        check_at_least(m, "model", ("attn_dim",))


@register("attention", AttentionConfig, "attention reader: a new weighted context at every step")
class AttentionReader(StepwiseReader):
    PARTS = {**StepwiseReader.PARTS, "decoder": ("embed", "init", "attention", "cell")}

    def __init__(self, cfg: AttentionConfig, height: int):
        super().__init__(cfg, height)
        self.attention = Attention(
            cfg.scorer, cfg.dec_hidden, self.encoder.state_size, cfg.attn_dim
        )
        self.cell = torch.nn.GRUCell(cfg.embed + self.encoder.state_size, cfg.dec_hidden)

    def flop_terms(self, columns, steps):
        cell = costs.gru_cell(steps, self.cell.input_size, self.cell.hidden_size)
        return [
            *self.shared_terms(columns, steps),
            *self.attention.flop_terms(columns, steps, "decoder", "attention"),
            costs.Term("GRU cell", "decoder", "cell", "step", cell),
        ]

    def encode(self, images, widths) -> AttentionMemory:
        m = super().encode(images, widths)
        return AttentionMemory(m.states, m.mask, m.summary, self.attention.keys(m.states))

    def step(self, memory: AttentionMemory, state: torch.Tensor, prev: torch.Tensor):
        e = self.embed(prev)  # (B, E)
        context, weights = self.attention(state, memory.keys, memory.states, memory.mask)
        state = gru_step(self.cell, torch.cat([e, context.to(e.dtype)], -1), state)
        logits = self.out(torch.cat([state.to(e.dtype), context.to(e.dtype), e], -1))
        return logits, state, weights  # weights (B, T)
