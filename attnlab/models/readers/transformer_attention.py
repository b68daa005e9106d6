"""Multi-head attention for the transformer reader, with padding and causal masks:
self-attention (with a cache of keys and values, so that decoding costs one position per
step) and cross-attention of the decoder's positions over the columns.

Attention products go through ``scaled_dot_product_attention`` (fused kernels on CUDA),
except in the one cross-attention layer whose weights the reader returns: there the weights
are computed explicitly (softmax of the same scores), because SDPA does not return them.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from attnlab.models.readers.transformer_positions import Positions


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
