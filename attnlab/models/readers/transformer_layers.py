"""The transformer reader's stacks: pre-norm encoder and decoder layers (the decoder with a
cache of keys and values, so that decoding costs one position per step), built from its
attention (attnlab.models.readers.transformer_attention) and positions
(attnlab.models.readers.transformer_positions).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.models.readers.transformer_attention import CrossAttention, SelfAttention
from attnlab.models.readers.transformer_positions import Positions


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
