"""The optimiser and its learning-rate schedule: AdamW over the trainable parameters and
one of two schedules (``optim.schedule``), both decaying to ``optim.min_lr_ratio`` of the
peak rate ``optim.lr``:

- ``cosine`` (the default): a linear warm-up over ``optim.warmup_steps``, then a cosine
  decay;
- ``onecycle`` (Smith and Topin 2018, as torch's OneCycleLR anneals it): from 1/25 of the
  peak up to it along a half cosine over the first 30% of ``train.steps``, then a cosine
  decay (``optim.warmup_steps`` is not used).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from attnlab.training.freeze import trainable

ONECYCLE_START = 1 / 25  # torch's OneCycleLR div_factor
ONECYCLE_RISE = 0.3  # its pct_start


def lr_factor(step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warm-up, then cosine decay to ``floor`` of the peak learning rate."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    return _down(step - warmup, total - warmup, floor)


def onecycle_factor(step: int, total: int, floor: float) -> float:
    """One cycle: up from ``ONECYCLE_START`` of the peak over the first ``ONECYCLE_RISE`` of
    ``total`` steps along a half cosine, then a cosine decay to ``floor``."""
    rise = max(1, round(ONECYCLE_RISE * total))
    if step < rise:
        return ONECYCLE_START + (1 - ONECYCLE_START) * 0.5 * (1 - math.cos(math.pi * step / rise))
    return _down(step - rise, total - rise, floor)


def _down(step: int, span: int, floor: float) -> float:
    """A cosine from 1 at ``step`` 0 to ``floor`` at ``span`` (and after)."""
    progress = min(1.0, step / max(1, span))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def optimiser(
    model: torch.nn.Module, o: Any, steps: int
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``model``'s trainable parameters (``o``: the optim section) and its
    schedule over ``steps`` steps."""
    opt = torch.optim.AdamW(trainable(model), lr=o.lr, weight_decay=o.weight_decay)
    if o.schedule == "onecycle":
        factor = lambda s: onecycle_factor(s, steps, o.min_lr_ratio)  # noqa: E731
    else:
        factor = lambda s: lr_factor(s, o.warmup_steps, steps, o.min_lr_ratio)  # noqa: E731
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)
