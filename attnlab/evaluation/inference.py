"""Read a set of strips with a reader: the one step that training validation, ``attnlab
eval``, ``attnlab read`` and the bench share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnlab.data.strips import StripBatch
from attnlab.models.base import Reader
from attnlab.runtime import autocast


@dataclass
class Readings:
    """The readings of a StripBatch, in its order."""

    texts: list[str]
    confidence: np.ndarray  # (N,)
    weights: list[np.ndarray] | None  # per strip (steps, columns), steps = reading + EOS

    def exact(self, labels: list[str]) -> np.ndarray:
        return np.array([r == t for r, t in zip(self.texts, labels, strict=True)])


@torch.inference_mode()
def read_strips(
    reader: Reader,
    strips: StripBatch,
    device: torch.device,
    batch_size: int = 256,
    beam: int = 1,
    keep_weights: bool = True,
    oracle: bool = False,
    bf16: bool = False,
) -> Readings:
    """Read every strip; batches hold strips of similar width (sorted by width), so little
    of each batch is padding. Weights are kept when the reader returns them. ``oracle``:
    each reading has exactly as many digits as the strip's label (a diagnostic). ``bf16``:
    under bf16 autocast on the device's type (as the run trained: runtime.bf16_autocast)."""
    reader.eval()
    order = torch.argsort(strips.widths, stable=True)
    n = len(strips)
    texts: list[str] = [""] * n
    conf = np.zeros(n, dtype=np.float64)
    weights: list[np.ndarray | None] = [None] * n
    has_weights = False
    for start in range(0, n, batch_size):
        idx = order[start : start + batch_size]
        sub = strips.select(idx)
        lengths = torch.tensor([len(t) for t in sub.labels]) if oracle else None
        with autocast(device, bf16):
            out = reader.read(sub.images.to(device), sub.widths.to(device), beam, lengths)
        c = out.confidence.float().cpu().numpy()
        w = out.weights.cpu().numpy() if (keep_weights and out.weights is not None) else None
        has_weights = has_weights or w is not None
        cols = out.columns.cpu().numpy()
        for j, i in enumerate(idx.tolist()):
            texts[i] = out.texts[j]
            conf[i] = c[j]
            if w is not None:
                steps = min(len(out.texts[j]) + 1, w.shape[1])
                weights[i] = w[j, :steps, : cols[j]]
    return Readings(texts, conf, weights if has_weights else None)  # type: ignore[arg-type]
