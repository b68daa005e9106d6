"""Transformer pieces for the transformer reader: positional representations, attention with
padding and causal masks, and pre-norm encoder and decoder stacks (the decoder with a cache
of keys and values, so that decoding costs one position per step).

Attention products go through ``scaled_dot_product_attention`` (fused kernels on CUDA),
except in the one cross-attention layer whose weights the reader returns: there the weights
are computed explicitly (softmax of the same scores), because SDPA does not return them.
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch import nn
from torch.nn import functional as F

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


def sdpa_mask(
    bias: torch.Tensor | None,
    key_mask: torch.Tensor | None,
    causal: bool,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor | None:
    """SDPA's ``attn_mask``: None, a bool mask (True = may attend, broadcast to (B, h, Sq,
    Sk)) or, with a relative bias, the bias with -inf where attending is not allowed."""
    allowed = k_pos[None, :] <= q_pos[:, None] if causal else None  # (Sq, Sk) causal mask
    if key_mask is not None:  # (B, Sk) padding mask
        pad = key_mask[:, None, None, :]  # (B, 1, 1, Sk)
        allowed = pad if allowed is None else allowed & pad
    if bias is None:
        return allowed
    bias = bias.to(dtype)
    return bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))


class SelfAttention(nn.Module):
    """Multi-head self-attention; with ``past`` it extends cached keys and values."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(
        self,
        x: torch.Tensor,
        positions: Positions,
        start: int = 0,
        key_mask: torch.Tensor | None = None,
        causal: bool = False,
        past: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, S, D) at positions start..start+S-1; key_mask (B, S) True on real
        positions; past (B, 2, h, start, dh): keys and values of the positions before.

        Returns (B, S, D) and, when ``past`` is given, keys and values of every position so
        far (B, 2, h, start+S, dh) (keys stored rotated: a position's key never changes).
        """
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)  # (B,h,S,dh)
        q_pos = torch.arange(start, start + s, device=x.device)
        q, k = positions.rotate(q, q_pos), positions.rotate(k, q_pos)
        if past is not None:
            k = torch.cat([past[:, 0].to(k.dtype), k], 2)  # (B, h, start+S, dh)
            v = torch.cat([past[:, 1].to(v.dtype), v], 2)
        k_pos = torch.arange(k.shape[2], device=x.device)
        mask = sdpa_mask(positions.bias(q_pos, k_pos), key_mask, causal, q_pos, k_pos, q.dtype)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        present = torch.stack([k, v], 1) if past is not None else None
        return self.proj(y.transpose(1, 2).reshape(b, s, d)), present


class CrossAttention(nn.Module):
    """Multi-head attention of the decoder's positions over the columns (padding mask)."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.query = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.proj = nn.Linear(width, width)

    def keys_values(self, memory: torch.Tensor) -> torch.Tensor:
        """Columns (B, T, D) -> keys and values (B, 2, h, T, dh): once per strip."""
        b, t, _ = memory.shape
        return self.kv(memory).view(b, t, 2, self.heads, -1).permute(0, 2, 3, 1, 4)

    def forward(
        self, x: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, S, D), kv (B, 2, h, T, dh), mask (B, T) True on real columns -> (B, S, D)
        and, when asked, the weights (B, h, S, T): rows sum to 1, exactly 0 on padding."""
        b, s, d = x.shape
        q = self.query(x).view(b, s, self.heads, -1).transpose(1, 2)  # (B, h, S, dh)
        k, v = kv[:, 0].to(q.dtype), kv[:, 1].to(q.dtype)
        p = self.dropout if self.training else 0.0
        if need_weights:
            score = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])  # (B, h, S, T)
            score = score.masked_fill(~mask[:, None, None, :], float("-inf"))
            weights = torch.softmax(score, -1)
            y = F.dropout(weights, p, self.training).to(v.dtype) @ v  # (B, h, S, dh)
        else:
            weights = None
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask[:, None, None, :], dropout_p=p
            )
        return self.proj(y.transpose(1, 2).reshape(b, s, d)), weights


def mlp(width: int, hidden: int) -> nn.Sequential:
    """The position-wise MLP of every layer."""
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))


class EncoderLayer(nn.Module):
    """Pre-norm: x + SelfAttn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, width: int, heads: int, mlp_hidden: int, dropout: float):
        super().__init__()
        self.norm_attn, self.norm_mlp = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = SelfAttention(width, heads, dropout)
        self.mlp = mlp(width, mlp_hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, positions: Positions, mask: torch.Tensor) -> torch.Tensor:
        h, _ = self.attn(self.norm_attn(x), positions, key_mask=mask)
        x = x + self.drop(h)
        return x + self.drop(self.mlp(self.norm_mlp(x)))


class Encoder(nn.Module):
    """Pre-norm transformer encoder over the columns (padding mask), final LayerNorm. With
    no layers it is the final LayerNorm alone (BiGRU columns need no more)."""

    def __init__(
        self,
        width: int,
        heads: int,
        layers: int,
        mlp_hidden: int,
        dropout: float,
        positions: Positions,
    ):
        super().__init__()
        self.positions = positions
        self.layers = nn.ModuleList(
            EncoderLayer(width, heads, mlp_hidden, dropout) for _ in range(layers)
        )
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), mask (B, T) True on real columns -> (B, T, D)."""
        x = self.drop(self.positions.add(x))
        for layer in self.layers:
            x = layer(x, self.positions, mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    """Pre-norm: masked self-attention, cross-attention over the columns, MLP."""

    def __init__(self, width: int, heads: int, mlp_hidden: int, dropout: float):
        super().__init__()
        self.norm_self = nn.LayerNorm(width)
        self.norm_cross = nn.LayerNorm(width)
        self.norm_mlp = nn.LayerNorm(width)
        self.self_attn = SelfAttention(width, heads, dropout)
        self.cross = CrossAttention(width, heads, dropout)
        self.mlp = mlp(width, mlp_hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, positions, start, kv, mask, past, need_weights):
        """x (B, S, D) at start..start+S-1 -> x, cross weights (B, h, S, T) or None, cache."""
        h, present = self.self_attn(self.norm_self(x), positions, start, causal=True, past=past)
        x = x + self.drop(h)
        h, weights = self.cross(self.norm_cross(x), kv, mask, need_weights)
        x = x + self.drop(h)
        x = x + self.drop(self.mlp(self.norm_mlp(x)))
        return x, weights, present


class Decoder(nn.Module):
    """Pre-norm transformer decoder; returns the cross-attention weights of one layer (mean
    over heads, or one head) as the reader's weights."""

    def __init__(
        self,
        width: int,
        heads: int,
        layers: int,
        mlp_hidden: int,
        dropout: float,
        positions: Positions,
        weights_layer: int = -1,
        weights_head: int | None = None,
    ):
        super().__init__()
        self.heads = heads
        self.positions = positions
        self.layers = nn.ModuleList(
            DecoderLayer(width, heads, mlp_hidden, dropout) for _ in range(layers)
        )
        self.weights_layer = weights_layer % layers
        self.weights_head = weights_head
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(width)

    def keys_values(self, memory: torch.Tensor) -> torch.Tensor:
        """Columns (B, T, D) -> every layer's cross-attention keys and values
        (B, L, 2, h, T, dh), computed once per strip rather than once per step."""
        return torch.stack([layer.cross.keys_values(memory) for layer in self.layers], 1)

    def empty_cache(self, batch: int, kv: torch.Tensor) -> torch.Tensor:
        """The self-attention cache before the first step: (B, L, 2, h, 0, dh)."""
        _, layers, _, h, _, dh = kv.shape
        return kv.new_zeros(batch, layers, 2, h, 0, dh)

    def forward(
        self,
        x: torch.Tensor,
        kv: torch.Tensor,
        mask: torch.Tensor,
        past: torch.Tensor | None = None,
        every_head: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """x (B, S, D): embeddings of the tokens at positions P..P+S-1, where P is the
        number of cached positions (``past`` (B, L, 2, h, P, dh); None = no cache, P = 0);
        kv (B, L, 2, h, T, dh) from ``keys_values``; mask (B, T) True on real columns.

        Returns the normalised outputs (B, S, D), the cross-attention weights (B, S, T) (or,
        with ``every_head``, every layer's and head's: (B, L, h, S, T)) and the cache
        extended to P+S positions (None without ``past``).
        """
        start = 0 if past is None else past.shape[-2]
        x = self.drop(self.positions.add(x, start))
        presents, kept = [], []
        for i, layer in enumerate(self.layers):
            layer_past = None if past is None else past[:, i]
            need = every_head or i == self.weights_layer
            x, w, present = layer(x, self.positions, start, kv[:, i], mask, layer_past, need)
            kept += [w] if need else []
            presents.append(present)
        if every_head:
            weights = torch.stack(kept, 1)  # (B, L, h, S, T)
        else:
            (w,) = kept
            weights = w.mean(1) if self.weights_head is None else w[:, self.weights_head]
        cache = None if past is None else torch.stack(presents, 1)
        return self.norm(x), weights, cache
