"""Occlusion, the probe's first intervention: paint paper over one glyph of a strip read
correctly (every pixel row of its span ``[start, end)``, in the strip's own paper level, see
``paper_level``) and read again with teacher forcing on the original reading: how much does
the probability of each read digit drop? Which glyph is painted at a step (``CONDITIONS``):
the one its attention peaks on (``attended_glyph``), its own (output step ``t`` read glyph
``t``, the strip's ``t``-th glyph from the left), a random other one, or none.

Functions of tensors and arrays; ``attnlab.evaluation.probe_tables`` batches and reads.
"""

from __future__ import annotations

import math

import numpy as np
import torch

CONDITIONS = ("attended", "true", "random", "none")  # which glyph is painted over


def paper_level(images: torch.Tensor, widths: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """(B,) each strip's paper: the median of its real pixels in no glyph's span (margins and
    gaps), or of all its real pixels when every column is in a glyph."""
    out = torch.empty(len(images))
    for i in range(len(images)):
        w = int(widths[i])
        free = torch.ones(w, dtype=torch.bool)
        for a, b in spans[i].tolist():
            free[a:b] = False
        region = images[i, :, :w]
        out[i] = (region[:, free] if bool(free.any()) else region).median()
    return out


def occlusion_variants(image: torch.Tensor, spans: torch.Tensor, paper: float) -> torch.Tensor:
    """(H, W) strip, (L, 2) glyph spans -> (L + 1, H, W): variant 0 unchanged, variant g + 1
    with glyph g painted over (all rows of its pixel columns) in ``paper``."""
    variants = image[None].repeat(len(spans) + 1, 1, 1)
    for g, (a, b) in enumerate(spans.tolist()):
        variants[g + 1, :, a:b] = paper
    return variants


def attended_glyph(weights: np.ndarray, spans: np.ndarray, stride: int) -> tuple[int, int, bool]:
    """One step's weights over encoder columns (T,) -> (glyph, peak column, on a glyph).

    The peak column covers pixels ``[c*stride, (c+1)*stride)``; its glyph is the one whose span
    overlaps those pixels most (the nearer centre on a tie). A peak on paper between glyphs
    or in a margin gets the nearest glyph, and ``on a glyph`` False.
    """
    c = int(np.argmax(weights))
    lo, hi = c * stride, (c + 1) * stride
    spans = np.asarray(spans).reshape(-1, 2)
    overlap = np.clip(np.minimum(spans[:, 1], hi) - np.maximum(spans[:, 0], lo), 0, None)
    centre = (lo + hi) / 2
    distance = np.abs((spans[:, 0] + spans[:, 1]) / 2 - centre)
    if overlap.max() > 0:
        best = np.lexsort((distance, -overlap))[0]
        return int(best), c, True
    gap = np.maximum(spans[:, 0] - centre, centre - spans[:, 1])
    return int(np.argmin(gap)), c, False


def random_glyph(length: int, step: int, avoid: int, rng: np.random.Generator) -> int:
    """A glyph other than the step's own (and than ``avoid``, the attended one, when another
    is left); -1 when the strip has one glyph only."""
    others = [g for g in range(length) if g not in (step, avoid)]
    others = others or [g for g in range(length) if g != step]
    return int(rng.choice(others)) if others else -1


def occlusion_rows(
    label: str,
    p_read: np.ndarray,
    p_variants: np.ndarray,
    readings: list[str],
    glyphs: dict[str, list[int]],
) -> list[dict]:
    """One row per (step, condition) of one strip.

    ``p_read`` (L + 1,): teacher-forced probability of each read digit (then EOS) of the
    strip read alone; ``p_variants`` (L + 1, L + 1) and ``readings``: the same of variant 0
    (nothing painted) and of each variant g + 1 (glyph g painted), read in one batch;
    ``glyphs``: condition -> the glyph painted at each step (-1: none; "none" needs none).
    The drop is ``p_read - p_occluded`` at the step; ``drop_earlier`` and ``drop_later`` its
    mean over the other digit steps whose glyphs lie left (right) of the painted one; the
    later ones are read from glyphs that moved up one place, since the painted glyph is no
    longer there to count. ``digit_changed``: free decoding reads another digit (or none)
    at the step.
    """
    n = len(label)
    rows = []
    for cond, per_step in glyphs.items():
        for t in range(n):
            g = -1 if cond == "none" else per_step[t]
            if cond != "none" and g < 0:
                continue
            v = g + 1
            drops = p_read[:n] - p_variants[v, :n]
            steps = np.arange(n)
            earlier = drops[(steps < g) & (steps != t)]
            later = drops[(steps > g) & (steps != t)]
            reading = readings[v]
            rows.append(
                {
                    "step": t,
                    "digit": label[t],
                    "condition": cond,
                    "glyph": g,
                    "p_read": float(p_read[t]),
                    "p_occluded": float(p_variants[v, t]),
                    "drop": float(drops[t]),
                    "drop_earlier": float(earlier.mean()) if earlier.size else math.nan,
                    "drop_later": float(later.mean()) if later.size else math.nan,
                    "reading": reading,
                    "digit_changed": len(reading) <= t or reading[t] != label[t],
                    "reading_changed": reading != label,
                }
            )
    return rows
