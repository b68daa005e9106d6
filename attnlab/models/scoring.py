"""Scorers and masked attention: score, normalise over the real columns, combine.

The decoder state is the query; column states supply keys (projected once per strip) and
values. Padded columns get weight exactly zero.
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch import nn

from attnlab.models import costs


class Scorer(str, Enum):
    additive = "additive"  # v . tanh(W q + U k), Bahdanau et al.
    dot = "dot"  # (W q) . k
    scaled_dot = "scaled_dot"  # (W q) . k / sqrt(A)


class Attention(nn.Module):
    def __init__(self, scorer: Scorer, query_size: int, state_size: int, attn_dim: int):
        super().__init__()
        self.scorer = Scorer(scorer)
        self.query = nn.Linear(query_size, attn_dim, bias=self.scorer is not Scorer.additive)
        self.key = nn.Linear(state_size, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False) if self.scorer is Scorer.additive else None
        self.scale = 1.0 / math.sqrt(attn_dim) if self.scorer is Scorer.scaled_dot else 1.0

    def flop_terms(self, columns: int, steps: int, part: str, path: str) -> list[costs.Term]:
        """Closed-form forward FLOPs of one strip (attnlab.models.costs): keys once per
        column, the query once per step, scores and weighted sums once per (step, column)
        pair. ``path``: this module's attribute path in the reader."""
        a, state = self.key.out_features, self.key.in_features
        pairs = columns * steps
        terms = [
            costs.Term("keys", part, f"{path}.key", "column", costs.linear(columns, state, a)),
            costs.Term(
                "query",
                part,
                f"{path}.query",
                "step",
                costs.linear(steps, self.query.in_features, a),
            ),
        ]
        sums = costs.linear(pairs, state, 1)  # each step: weights (T,) x values (T, 2H)
        if self.v is not None:  # additive: v . tanh(...) over every (step, column)
            terms.append(costs.Term("scores", part, f"{path}.v", "pair", costs.linear(pairs, a, 1)))
            terms.append(costs.Term("weighted sums", part, path, "pair", sums))
        else:  # dot: both products in this module's own einsums
            n = costs.linear(pairs, a, 1) + sums
            terms.append(costs.Term("scores and weighted sums", part, path, "pair", n))
        return terms

    def keys(self, states: torch.Tensor) -> torch.Tensor:
        """(B, T, 2H) -> (B, T, A): once per strip, not once per step."""
        return self.key(states)

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, D), keys (B, T, A), values (B, T, 2H), mask (B, T) True on real columns.

        Returns context (B, 2H) and weights (B, T), each row summing to 1, 0 on padding.
        """
        q = self.query(query)  # (B, A)
        if self.v is not None:
            scores = self.v(torch.tanh(keys + q[:, None, :])).squeeze(-1)  # (B, T)
        else:
            scores = torch.einsum("bta,ba->bt", keys, q) * self.scale  # (B, T)
        weights = masked_softmax(scores, mask)
        context = torch.einsum("bt,bth->bh", weights, values)  # (B, 2H)
        return context, weights


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis restricted to ``mask``; masked entries are exactly 0."""
    scores = scores.float().masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)
