"""The BiGRU over the columns that every encoder ends with, written once: an encoder
subclasses ``ColumnStates``, builds its column features (``features``) and gets the states,
the lengths in columns and the summary from here.

Padded columns never reach the recurrence (packed sequences), so a strip's states do not
depend on what it was batched with. The GRU runs in float32 whatever autocast asks for.
The module keeps the attribute name ``gru``: checkpoints name its tensors ``encoder.gru.*``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.models import costs


class ColumnStates(nn.Module):
    """``stride`` pixel columns per encoder column; ``gru`` the BiGRU (None when built with
    ``recurrent`` False, for a reader that encodes ``features`` its own way). A subclass
    builds its layers, then ``add_gru``: the GRU's parameters come last, in the order that
    checkpoints' optimiser states were saved in."""

    name: ClassVar[str] = ""  # set by the registry

    def __init__(self, cfg: Any, height: int):
        super().__init__()
        self.stride, self.height, self.hidden = int(cfg.stride), height, int(cfg.hidden)
        self.normalize = bool(cfg.normalize_strips)

    def add_gru(self, cfg: Any, recurrent: bool, size: int | None = None) -> None:
        """The BiGRU over column vectors of ``size`` (2 x hidden unless given)."""
        size = size or 2 * cfg.hidden
        self.gru = (
            nn.GRU(size, cfg.hidden, cfg.layers, batch_first=True, bidirectional=True)
            if recurrent
            else None
        )

    @property
    def state_size(self) -> int:
        return 2 * self.hidden

    def column_lengths(self, widths: torch.Tensor) -> torch.Tensor:
        """Pixel widths (B,) -> number of encoder columns (B,)."""
        return torch.div(widths + self.stride - 1, self.stride, rounding_mode="floor")

    def features(self, images: torch.Tensor, widths: torch.Tensor):
        """images (B, H, W), widths (B,) -> column features (B, T, 2H), 0 on padded columns,
        and lengths (B,) in columns."""
        raise NotImplementedError

    def gru_terms(self, columns: int) -> list[costs.Term]:
        """The BiGRU's closed-form FLOPs over ``columns`` columns (none without it)."""
        if self.gru is None:
            return []
        g = self.gru
        n = costs.gru(columns, g.input_size, g.hidden_size, g.num_layers, 2)
        return [costs.Term("BiGRU", "encoder", "encoder.gru", "column", n)]

    def forward(self, images: torch.Tensor, widths: torch.Tensor):
        """images (B, H, W) with 1 = paper; widths (B,) real widths in pixels.

        Returns states (B, T, 2H), lengths (B,) in columns, summary (B, 2H): the final
        forward state (after the last real column) joined with the final backward state.
        """
        if self.gru is None:
            raise RuntimeError(
                f"this {self.name} encoder was built without its BiGRU: call features()"
            )
        feats, lengths = self.features(images, widths)
        t = feats.shape[1]
        packed = pack_padded_sequence(
            feats.float(), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        with torch.autocast(device_type=feats.device.type, enabled=False):
            out, h_n = self.gru(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=t)  # (B, T, 2H)
        summary = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # (B, 2H) last layer, both directions
        return states, lengths.to(states.device), summary
