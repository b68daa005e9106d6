"""The fixed-context reader: one summary of the strip for the whole output.

The decoder starts from the summary (the encoder's final forward and backward states) and
receives that same summary again at every output step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnlab.models import costs
from attnlab.models.decoder_memory import Memory
from attnlab.models.registry import register
from attnlab.models.stepwise import StepwiseConfig, StepwiseReader


@dataclass
class FixedConfig(StepwiseConfig):
    ctc_aux: float = 1.0  # as the attention reader's: same encoder, same training signal


@register("fixed", FixedConfig, "fixed-context reader: one summary of the strip for every step")
class FixedContextReader(StepwiseReader):
    PARTS = {**StepwiseReader.PARTS, "decoder": ("embed", "init", "rnn")}

    def __init__(self, cfg: FixedConfig, height: int):
        super().__init__(cfg, height)
        # A GRU layer rather than a cell: with the same summary at every step, teacher
        # forcing runs the whole output sequence in one call.
        self.rnn = nn.GRU(cfg.embed + self.encoder.state_size, cfg.dec_hidden, batch_first=True)

    def flop_terms(self, columns, steps):
        r = self.rnn  # the same summary at every step: no term grows with columns x steps
        n = costs.gru(steps, r.input_size, r.hidden_size)
        return [*self.shared_terms(columns, steps), costs.Term("GRU", "decoder", "rnn", "step", n)]

    def _run(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        """prev (B, S) -> logits (B, S, V), final state (B, D)."""
        e = self.embed(prev)  # (B, S, E)
        context = memory.summary[:, None, :].expand(-1, prev.shape[1], -1)  # (B, S, 2H)
        with torch.autocast(device_type=e.device.type, enabled=False):
            out, h = self.rnn(torch.cat([e, context.to(e.dtype)], -1).float(), state[None])
        logits = self.out(torch.cat([out.to(e.dtype), context.to(e.dtype), e], -1))
        return logits, h[0]

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        logits, state = self._run(memory, state, prev[:, None])
        return logits[:, 0], state, None

    def teacher_forcing(self, memory: Memory, inputs: torch.Tensor):
        logits, _ = self._run(memory, self.init_state(memory), inputs)
        return logits, None
