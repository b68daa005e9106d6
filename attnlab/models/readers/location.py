"""The location-aware attention reader (Chorowski et al. 2015).

The attention reader's additive energy sees only the decoder state and the column keys, so
nothing ties step t's alignment to step t-1's: trained on 1-8 digits it learns a pace that
reaches the end of the strip in about nine steps and skips glyphs on longer strips. Here
the energy also sees a convolution over the previous (or cumulative) attention weights,

    e = v . tanh(W q + U k + F conv(alpha))

so "one glyph to the right of where I was" (or "the first glyph not read yet") can be
learnt as a local rule, whatever the strip's length.

The weights ride in the decoder state: ``[GRU state (D) | alpha (T)]``, so beam search
reorders them with the state rows. ``alpha`` is exactly 0 on padded columns (masked
softmax), and the convolution pads with zeros, so a strip's weights do not depend on what it
is batched with.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch import nn

from attnlab.config.rules import check_at_least, require
from attnlab.models import costs
from attnlab.models.decoder_memory import AttentionMemory
from attnlab.models.registry import register
from attnlab.models.scoring import Attention, Scorer, masked_softmax
from attnlab.models.stepwise import StepwiseConfig, StepwiseReader, gru_step


class LocationFeatures(str, Enum):
    previous = "previous"  # alpha_{t-1}, Chorowski et al.
    cumulative = "cumulative"  # sum of alpha_1..alpha_{t-1}: what has been read already
    both = "both"  # both as two input channels (as in Tacotron 2)


@dataclass
class LocationConfig(StepwiseConfig):
    attn_dim: int = 64
    location: LocationFeatures = LocationFeatures.both
    loc_channels: int = 16  # convolution filters over the weights
    loc_kernel: int = 9  # columns (odd); a glyph is about 2 columns at stride 8

    @classmethod
    def check(cls, m: Any, height: int) -> None:
        super().check(m, height)
        check_at_least(m, "model", ("attn_dim", "loc_channels"))
        ok = m.loc_kernel >= 1 and m.loc_kernel % 2 == 1
        require(ok, "model.loc_kernel", m.loc_kernel, "must be odd and >= 1")


@register(
    "location",
    LocationConfig,
    "location-aware attention reader: the energy also sees a convolution over past weights",
)
class LocationReader(StepwiseReader):
    PARTS = {
        **StepwiseReader.PARTS,
        "decoder": ("embed", "init", "attention", "loc_conv", "loc_proj", "cell"),
    }

    def __init__(self, cfg: LocationConfig, height: int):
        super().__init__(cfg, height)
        assert cfg.loc_kernel % 2 == 1 and cfg.loc_channels >= 1, "LocationConfig.check"
        state = self.encoder.state_size
        self.features = LocationFeatures(cfg.location)
        self.dec_hidden = cfg.dec_hidden
        self.attention = Attention(Scorer.additive, cfg.dec_hidden, state, cfg.attn_dim)
        inputs = 2 if self.features is LocationFeatures.both else 1
        self.loc_conv = nn.Conv1d(
            inputs, cfg.loc_channels, cfg.loc_kernel, padding=cfg.loc_kernel // 2, bias=False
        )
        self.loc_proj = nn.Linear(cfg.loc_channels, cfg.attn_dim, bias=False)
        self.cell = nn.GRUCell(cfg.embed + state, cfg.dec_hidden)

    def flop_terms(self, columns, steps):
        pairs, c, conv, lin = columns * steps, self.cell, self.loc_conv, costs.linear
        attn = self.attention.flop_terms(columns, steps, "decoder", "attention")
        loc = costs.conv1d(pairs, conv.in_channels, conv.out_channels, conv.kernel_size[0])
        proj = lin(pairs, self.loc_proj.in_features, self.loc_proj.out_features)
        cell = costs.gru_cell(steps, c.input_size, c.hidden_size)
        sums = lin(pairs, self.encoder.state_size, 1)  # here in the step's own einsum
        return [
            *self.shared_terms(columns, steps),
            *(t for t in attn if t.name != "weighted sums"),
            costs.Term("weighted sums", "decoder", "", "pair", sums),
            costs.Term("location conv", "decoder", "loc_conv", "pair", loc),
            costs.Term("location projection", "decoder", "loc_proj", "pair", proj),
            costs.Term("GRU cell", "decoder", "cell", "step", cell),
        ]

    @property
    def _planes(self) -> int:
        """How many (T,)-planes of past weights the state carries."""
        return 2 if self.features is LocationFeatures.both else 1

    def encode(self, images, widths) -> AttentionMemory:
        m = super().encode(images, widths)
        return AttentionMemory(m.states, m.mask, m.summary, self.attention.keys(m.states))

    def init_state(self, memory: AttentionMemory) -> torch.Tensor:
        """``[h0 | zeros]``: (B, D + P*T); no weights before the first step."""
        h = super().init_state(memory)  # (B, D)
        b, t = memory.mask.shape
        return torch.cat([h, h.new_zeros(b, self._planes * t)], -1)

    def split(self, state: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, D + P*T) -> GRU state (B, D) and past weights (B, P, T)."""
        return state[:, : self.dec_hidden], state[:, self.dec_hidden :].view(-1, self._planes, t)

    def energies(self, query: torch.Tensor, keys: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        """query (B, D), keys (B, T, A), past weights (B, P, T) -> scores (B, T), unmasked."""
        q = self.attention.query(query)  # (B, A)
        loc = self.loc_proj(self.loc_conv(past.to(keys.dtype)).transpose(1, 2))  # (B, T, A)
        return self.attention.v(torch.tanh(keys + q[:, None, :] + loc)).squeeze(-1)  # (B, T)

    def step(self, memory: AttentionMemory, state: torch.Tensor, prev: torch.Tensor):
        t = memory.mask.shape[1]
        h, past = self.split(state, t)  # (B, D), (B, P, T)
        e = self.embed(prev)  # (B, E)
        weights = masked_softmax(self.energies(h, memory.keys, past), memory.mask)  # (B, T)
        context = torch.einsum("bt,bth->bh", weights, memory.states.float())  # (B, 2H)
        h = gru_step(self.cell, torch.cat([e, context.to(e.dtype)], -1), h)
        logits = self.out(torch.cat([h.to(e.dtype), context.to(e.dtype), e], -1))
        if self.features is LocationFeatures.previous:
            past = weights[:, None]
        elif self.features is LocationFeatures.cumulative:
            past = past + weights[:, None]
        else:
            past = torch.stack([weights, past[:, 1] + weights], 1)  # (B, 2, T)
        return logits, torch.cat([h, past.flatten(1)], -1), weights  # weights (B, T)
