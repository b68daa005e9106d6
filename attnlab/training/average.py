"""An exponential moving average of a reader's weights (``optim.ema``, its decay): the
weights a run validates, keeps in best.pt and reads with, while the optimiser steps the
weights it trains.

The average starts at the initial weights and follows each step with the decay
``min(optim.ema, (1 + step) / (10 + step))``, so that its first steps are not dominated by
the random start (TensorFlow's ExponentialMovingAverage with ``num_updates``). Every floating
tensor of the state is averaged, batch-norm statistics included; integer buffers (a batch
norm's count) are copied. Frozen parts never change, so their average is themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class WeightAverage:
    """The average of ``model``'s state, updated after every optimiser step."""

    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay = decay
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def rate(self, step: int) -> float:
        """The decay applied by the update after optimiser step ``step`` (1, 2, ...)."""
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def update(self, model: torch.nn.Module, step: int) -> None:
        """Follow ``model``'s weights after optimiser step ``step``."""
        decay = self.rate(step)
        for key, value in model.state_dict().items():
            kept = self.state[key]
            if kept.is_floating_point():
                kept.mul_(decay).add_(value.detach(), alpha=1 - decay)
            else:
                kept.copy_(value)

    def load(self, state: dict[str, torch.Tensor]) -> None:
        """The average as a checkpoint holds it (resume)."""
        self.state = {k: v.detach().clone() for k, v in state.items()}

    @contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """``model`` holds the average inside the block and its trained weights after it."""
        trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.state)
        try:
            yield
        finally:
            model.load_state_dict(trained)
