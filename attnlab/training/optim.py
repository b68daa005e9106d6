"""The optimiser and its learning-rate schedule: AdamW over the trainable parameters, a
linear warm-up, then a cosine decay to ``optim.min_lr_ratio`` of the peak rate."""

from __future__ import annotations

import math
from typing import Any

import torch

from attnlab.training.freeze import trainable


def lr_factor(step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warm-up, then cosine decay to ``floor`` of the peak learning rate."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def optimiser(
    model: torch.nn.Module, o: Any, steps: int
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``model``'s trainable parameters (``o``: the optim section) and its
    schedule over ``steps`` steps."""
    opt = torch.optim.AdamW(trainable(model), lr=o.lr, weight_decay=o.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, o.warmup_steps, steps, o.min_lr_ratio)
    )
    return opt, sched
