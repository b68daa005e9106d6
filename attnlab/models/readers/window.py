"""The window reader: a Gaussian mixture window that can only move forward (Graves 2013).

Content-based attention may jump anywhere, and trained on 1-8 digits it learns to reach the
end of a strip in about nine steps. Here every step moves the window's centres forward by a
learnt, non-negative amount, kappa_t = kappa_{t-1} + softplus(.), from the decoder state
and the digit just read: the reader learns "one glyph to the right", which does not depend on
how long the strip is, and it can neither skip back nor stay behind.

The weights over the real columns are the mixture's density at each column centre,
normalised to sum to 1 (padding exactly 0). The window's centres ride in the decoder state,
``[GRU state (D) | kappa (K)]``, so beam search reorders them with the state rows.

Stopping (``stop``): ``eos`` when the reader emits EOS; ``end`` when the window has passed
the last real column (Graves's rule: the density at the virtual column after the strip
exceeds that at every real column); ``first``, whichever comes first. The rule applies to
decoding only (``read``, through ``decoding_memory``), as a bias on the step's logits, so
greedy decoding, beam search and oracle lengths need no hook; teacher forcing (the loss,
``digit_probs``) never sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import torch
from torch import nn

from attnlab.config.rules import finite, require
from attnlab.models import costs, tokens
from attnlab.models.decoder_memory import Memory
from attnlab.models.registry import register
from attnlab.models.scoring import masked_softmax
from attnlab.models.stepwise import StepwiseConfig, StepwiseReader, gru_step

FORCE = 1e4  # logit bias that takes a token away (finite: oracle lengths may still need it)


class Stop(str, Enum):
    eos = "eos"  # the reader's EOS decision
    end = "end"  # the window has passed the strip's last real column (EOS ignored before)
    first = "first"  # EOS or the end, whichever comes first


@dataclass
class WindowConfig(StepwiseConfig):
    components: int = 1  # K Gaussians, each with its own forward-moving centre
    pace: float = 16.0  # initial step of the centres, in pixels (a glyph's pitch is ~17)
    width: float = 8.0  # initial standard deviation of each Gaussian, in pixels
    stop: Stop = Stop.first

    @classmethod
    def check(cls, m: Any, height: int) -> None:
        super().check(m, height)
        require(m.components >= 1, "model.components", m.components, "must be >= 1")
        for key in ("pace", "width"):
            value = getattr(m, key)
            require(finite(value) and value > 0, f"model.{key}", value, "must be > 0 (px)")


@dataclass
class WindowMemory(Memory):
    decoding: torch.Tensor | None = None  # (B,) set by ``read``: apply the stop rule


@register("window", WindowConfig, "window reader: a Gaussian window that only moves forward")
class WindowReader(StepwiseReader):
    PARTS = {**StepwiseReader.PARTS, "decoder": ("embed", "init", "params", "kappa0", "cell")}

    def __init__(self, cfg: WindowConfig, height: int):
        super().__init__(cfg, height)
        k = cfg.components
        assert k >= 1 and cfg.pace > 0 and cfg.width > 0, "WindowConfig.check"
        self.dec_hidden, self.stop = cfg.dec_hidden, Stop(cfg.stop)
        pace, width = cfg.pace / cfg.stride, cfg.width / cfg.stride  # in encoder columns
        state = self.encoder.state_size
        # Per component: mixture logit, log precision, raw step (Graves: alpha, beta, kappa).
        self.params = nn.Linear(cfg.dec_hidden + cfg.embed, 3 * k)
        with torch.no_grad():
            self.params.weight.mul_(0.1)
            self.params.bias.zero_()
            self.params.bias[k : 2 * k] = math.log(0.5 / width**2)  # beta = 1/(2 sigma^2)
            self.params.bias[2 * k :] = math.log(math.expm1(pace))  # softplus^-1(pace)
        # Centres start half a step before the strip, so the first step lands on glyph one.
        self.kappa0 = nn.Parameter(torch.full((k,), -0.5 * pace))
        self.cell = nn.GRUCell(cfg.embed + state, cfg.dec_hidden)

    def flop_terms(self, columns, steps):
        p, c = self.params, self.cell  # the window itself is element-wise: not counted
        window = costs.linear(steps, p.in_features, p.out_features)
        sums = costs.linear(columns * steps, self.encoder.state_size, 1)
        cell = costs.gru_cell(steps, c.input_size, c.hidden_size)
        return [
            *self.shared_terms(columns, steps),
            costs.Term("window parameters", "decoder", "params", "step", window),
            costs.Term("weighted sums", "decoder", "", "pair", sums),  # the step's own einsum
            costs.Term("GRU cell", "decoder", "cell", "step", cell),
        ]

    def encode(self, images, widths) -> WindowMemory:
        m = super().encode(images, widths)
        return WindowMemory(m.states, m.mask, m.summary)

    def init_state(self, memory: Memory) -> torch.Tensor:
        """``[h0 | kappa0]``: (B, D + K)."""
        h = super().init_state(memory)  # (B, D)
        return torch.cat([h, self.kappa0.float().expand(h.shape[0], -1)], -1)

    def split(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, D + K) -> GRU state (B, D) and centres kappa (B, K), in columns."""
        return state[:, : self.dec_hidden], state[:, self.dec_hidden :]

    def window(self, h: torch.Tensor, e: torch.Tensor, kappa: torch.Tensor, t: int):
        """Move the centres forward and return them (B, K) with the mixture's log-density at
        column centres 0.5 .. t + 0.5 (B, t + 1): the last is the virtual column after the
        strip's widest, used only by the stop rule."""
        a, log_beta, step = self.params(torch.cat([h.to(e.dtype), e], -1)).float().chunk(3, -1)
        kappa = kappa + nn.functional.softplus(step)  # (B, K): never backwards
        beta = log_beta.clamp(-8.0, 6.0).exp()  # (B, K)
        u = torch.arange(t + 1, device=h.device, dtype=kappa.dtype) + 0.5  # (T+1,)
        log_phi = (
            torch.log_softmax(a, -1)[..., None] - beta[..., None] * (kappa[..., None] - u).square()
        )  # (B, K, T+1)
        return kappa, torch.logsumexp(log_phi, 1)  # (B, K), (B, T+1)

    def passed_end(self, log_phi: torch.Tensor, memory: Memory) -> torch.Tensor:
        """(B,) True where the density at the column after the strip's last real column
        exceeds the density at every real column (Graves 2013's stopping rule)."""
        n = memory.lengths  # (B,)
        after = log_phi.gather(1, n[:, None])[:, 0]  # (B,)
        real = log_phi[:, :-1].masked_fill(~memory.mask, float("-inf")).amax(-1)  # (B,)
        return after > real

    def step(self, memory: WindowMemory, state: torch.Tensor, prev: torch.Tensor):
        t = memory.mask.shape[1]
        h, kappa = self.split(state)  # (B, D), (B, K)
        e = self.embed(prev)  # (B, E)
        kappa, log_phi = self.window(h, e, kappa, t)  # (B, K), (B, T+1)
        weights = masked_softmax(log_phi[:, :t], memory.mask)  # (B, T)
        context = torch.einsum("bt,bth->bh", weights, memory.states.float())  # (B, 2H)
        h = gru_step(self.cell, torch.cat([e, context.to(e.dtype)], -1), h)
        logits = self.out(torch.cat([h.to(e.dtype), context.to(e.dtype), e], -1))
        if memory.decoding is not None and self.stop is not Stop.eos:
            logits = logits.float() + self.stop_bias(self.passed_end(log_phi, memory))
        return logits, torch.cat([h, kappa], -1), weights  # weights (B, T)

    def stop_bias(self, passed: torch.Tensor) -> torch.Tensor:
        """(B, V) logit bias of the stop rule: EOS only, once the window has passed the end;
        under ``end``, no EOS before."""
        bias = torch.zeros(passed.shape[0], self.vocab, device=passed.device)
        is_eos = torch.arange(self.vocab, device=passed.device) == tokens.EOS  # (V,)
        bias = bias.masked_fill(passed[:, None] & ~is_eos, -FORCE)
        if self.stop is Stop.end:
            bias = bias.masked_fill(~passed[:, None] & is_eos, -FORCE)
        return bias

    def decoding_memory(self, memory: WindowMemory) -> WindowMemory:
        """Free decoding applies the stop rule (``step``)."""
        return replace(memory, decoding=memory.mask[:, 0])  # (B,) any tensor marks it
