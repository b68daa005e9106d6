"""Saliency, the probe's check of the attention: does it rank the columns of a strip as a
gradient-times-input saliency does (``column_saliency``, compared by ``spearman``)?

Functions of tensors and arrays; ``attnlab.evaluation.probe_tables`` batches and reads.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlab.models.base import Reader


def column_saliency(
    reader: Reader,
    images: torch.Tensor,
    widths: torch.Tensor,
    texts: list[str],
    paper: torch.Tensor,
    stride: int,
) -> list[np.ndarray]:
    """Per strip (L, T): for each digit step, |sum over a column's pixels of d log p / d x
    times (x - paper)|, the first-order size of the change in the step's log-probability if
    that encoder column were painted paper. All steps of all strips in one backward pass."""
    rows = [(i, t) for i, text in enumerate(texts) for t in range(len(text))]
    if not rows:
        return [np.zeros((0, 0)) for _ in texts]
    strip = torch.tensor([i for i, _ in rows])
    step = torch.tensor([t for _, t in rows], device=images.device)
    x = images[strip].detach().clone().requires_grad_(True)
    with torch.enable_grad():
        p = reader.digit_probs(x, widths[strip], [texts[i] for i, _ in rows])
        logp = p[torch.arange(len(rows), device=p.device), step].clamp_min(1e-30).log()
        (grad,) = torch.autograd.grad(logp.sum(), x)
    sal = (grad * (x.detach() - paper.to(x.device)[strip, None, None])).sum(1)  # (R, W)
    w = sal.shape[1]
    cols = -(-w // stride)
    sal = torch.nn.functional.pad(sal, (0, cols * stride - w)).view(len(rows), cols, stride)
    sal = sal.sum(-1).abs().cpu().numpy()
    out, start = [], 0
    for i, text in enumerate(texts):
        t_real = -(-int(widths[i]) // stride)
        out.append(sal[start : start + len(text), :t_real])
        start += len(text)
    return out


def rank(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's of the average ranks); NaN when either is flat."""
    ra, rb = rank(a), rank(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra**2).sum() * (rb**2).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else math.nan
