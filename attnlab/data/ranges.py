"""Draws from the config's ``[low, high]`` ranges, one per strip, from an explicit generator."""

from __future__ import annotations

import torch


def uniform(lo_hi, n: int, gen: torch.Generator) -> torch.Tensor:
    """(n,) floats uniform in [low, high]."""
    lo, hi = float(lo_hi[0]), float(lo_hi[1])
    return lo + (hi - lo) * torch.rand(n, generator=gen)


def randint(lo_hi, shape, gen: torch.Generator) -> torch.Tensor:
    """Integers uniform in [low, high], both included."""
    lo, hi = int(lo_hi[0]), int(lo_hi[1])
    return torch.randint(lo, hi + 1, shape, generator=gen)


def levels(lo_hi) -> list[float]:
    """Three levels across a [low, high] range (one when it is a single value): what is
    rendered ahead in levels (blur in the glyph bank, resampling) rather than per strip."""
    lo, hi = float(lo_hi[0]), float(lo_hi[1])
    return [lo] if hi - lo < 1e-6 else [lo, (lo + hi) / 2, hi]
