"""Where things are, for the transformer reader's attention stacks (attention itself sees a
set): absolute representations added to a stack's inputs (sinusoidal, learned) and relative
ones acting on its self-attention scores (T5-style bucketed bias, rotary), chosen by ``Pos``.
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch import nn

from attnlab.errors import UserError

ROPE_BASE = 10_000.0  # rotary and sinusoidal wavelengths run from 2*pi to ~2*pi*10_000


class Pos(str, Enum):
    """How a stack of attention layers knows where things are (attention itself sees a set)."""

    sinusoidal = "sinusoidal"  # fixed sin/cos of the position added to the inputs
    learned = "learned"  # a trained vector per position added to the inputs (max_len of them)
    relative = "relative"  # T5-style: a learned per-head score bias per bucket of key-query offset
    rotary = "rotary"  # RoPE: queries and keys rotated by angles proportional to the position
    none = "none"  # no positions at all


def sinusoidal(positions: torch.Tensor, width: int) -> torch.Tensor:
    """(P,) positions -> (P, width): sines then cosines at geometric frequencies (Vaswani et
    al.). A formula rather than a table, so it is defined at any position, seen or not."""
    half = (width + 1) // 2
    freq = ROPE_BASE ** (-torch.arange(half, device=positions.device, dtype=torch.float32) / half)
    angles = positions.float()[:, None] * freq  # (P, half)
    return torch.cat([angles.sin(), angles.cos()], -1)[:, :width]


def relative_bucket(
    offset: torch.Tensor, buckets: int, max_distance: int, bidirectional: bool
) -> torch.Tensor:
    """T5's buckets of offsets (key position - query position): one bucket per offset for
    small offsets, log-spaced buckets up to ``max_distance``, one shared bucket beyond (so
    any length is covered). Unidirectional (a causal decoder): later keys share offset 0's
    bucket, as the causal mask hides them anyway."""
    n = -offset  # > 0: the key is before the query
    ret = torch.zeros_like(offset)
    if bidirectional:
        buckets //= 2
        ret = ret + (n < 0).long() * buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    exact = buckets // 2
    log_ratio = torch.log(n.clamp(min=exact).float() / exact) / math.log(max_distance / exact)
    far = (exact + (log_ratio * (buckets - exact)).long()).clamp(max=buckets - 1)
    return ret + torch.where(n < exact, n, far)


class Positions(nn.Module):
    """The positional representation of one stack. Absolute kinds (sinusoidal, learned) are
    added to the stack's inputs (``add``); relative kinds act on the scores of its
    self-attention: rotary rotates queries and keys (``rotate``), relative adds a bias
    (``bias``). Cross-attention gets none: digit steps and columns share no position axis.
    """

    def __init__(
        self,
        kind: Pos,
        width: int,
        heads: int,
        max_len: int,
        buckets: int,
        max_distance: int,
        bidirectional: bool,
        key: str,
    ):
        super().__init__()
        self.kind = Pos(kind)
        self.key = key  # the config key that chose this kind, named in errors
        self.max_len = max_len
        self.buckets, self.max_distance, self.bidirectional = buckets, max_distance, bidirectional
        self.table = nn.Embedding(max_len, width) if self.kind is Pos.learned else None
        self.rel = nn.Embedding(buckets, heads) if self.kind is Pos.relative else None

    def add(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """x (B, S, D) at positions start..start+S-1 -> x plus their absolute positions."""
        s = x.shape[1]
        pos = torch.arange(start, start + s, device=x.device)
        if self.kind is Pos.sinusoidal:
            return x + sinusoidal(pos, x.shape[-1]).to(x.dtype)
        if self.kind is Pos.learned:
            if start + s > self.max_len:
                raise UserError(
                    f"model.max_len={self.max_len}: {self.key}=learned has a table of "
                    f"{self.max_len} positions and this input needs {start + s}; raise "
                    f"model.max_len (and retrain) or choose another {self.key}"
                )
            return x + self.table(pos).to(x.dtype)
        return x

    def rotate(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Queries or keys x (B, h, S, dh) at positions pos (S,), rotated (rotary only): the
        pair (i, i + dh/2) of each vector turns by pos * freq_i, so a query-key dot product
        depends on the two positions only through their difference."""
        if self.kind is not Pos.rotary:
            return x
        half = x.shape[-1] // 2
        freq = ROPE_BASE ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
        angles = pos.float()[:, None] * freq  # (S, dh/2)
        cos, sin = angles.cos(), angles.sin()
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """(1, h, Sq, Sk) learned score bias of each key-query offset (relative only)."""
        if self.rel is None:
            return None
        offset = k_pos[None, :] - q_pos[:, None]  # (Sq, Sk)
        b = relative_bucket(offset, self.buckets, self.max_distance, self.bidirectional)
        return self.rel(b).permute(2, 0, 1)[None]

    def scores(
        self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor
    ) -> torch.Tensor:
        """Self-attention scores before masking, written out: queries q (B, h, Sq, dh) at
        q_pos, keys k (B, h, Sk, dh) at k_pos -> (B, h, Sq, Sk). ``SelfAttention`` computes
        the same through SDPA (the tests hold the two together)."""
        q, k = self.rotate(q, q_pos), self.rotate(k, k_pos)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        bias = self.bias(q_pos, k_pos)
        return s if bias is None else s + bias
