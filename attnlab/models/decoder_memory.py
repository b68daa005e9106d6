"""What a step-wise decoder may read of a batch of strips (``Memory``): the column states,
their padding mask and the strip's summary, built once per strip by the reader's ``encode``
and read by teacher forcing (attnlab.models.stepwise) and by free decoding
(attnlab.models.stepwise_search) alike.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class Memory:
    """What the decoder may read of a batch of strips. Readers may add tensor fields
    (a dataclass subclass); every tensor field is repeated row-wise for beam search."""

    states: torch.Tensor  # (B, T, 2H) column states
    mask: torch.Tensor  # (B, T) True on real columns
    summary: torch.Tensor  # (B, 2H) final states

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(1)

    def rows(self, fn) -> Memory:
        """The same memory with ``fn`` applied to every tensor field's rows (dim 0)."""
        return type(self)(
            **{
                f.name: None if (x := getattr(self, f.name)) is None else fn(x)
                for f in fields(self)
            }
        )

    def repeat(self, k: int) -> Memory:
        """Each row repeated k times (beam search): (B, ...) -> (B*k, ...)."""
        return self.rows(lambda x: x.repeat_interleave(k, 0))


@dataclass
class AttentionMemory(Memory):
    """Memory whose keys are projected once per strip, not at every step (attention-style
    readers: attention, location)."""

    keys: torch.Tensor  # (B, T, A)
