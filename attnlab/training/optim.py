"""The optimiser and its learning-rate schedule: AdamW over the trainable parameters and one
of three schedules (``optim.schedule``) over a horizon of steps (``train.steps``, or the
steps a ``train.minutes`` budget is estimated to hold: ``attnlab.training.budget``):

- ``cosine`` (the default): a linear warm-up over ``optim.warmup_steps``, then a cosine
  decay to ``optim.min_lr_ratio`` of the peak rate ``optim.lr`` at the horizon;
- ``linear``: the same warm-up, then a linear decay to zero at the horizon (the budget-aware
  schedule of Li, Yumer & Ramanan, "Budgeted Training", ICLR 2020; ``optim.min_lr_ratio``
  is the floor of the other two);
- ``onecycle`` (Smith and Topin 2018): torch's ``OneCycleLR`` with its defaults
  (``div_factor=25``, cosine annealing, AdamW's beta1 cycled from 0.95 down to 0.85 and
  back), its rise lasting ``optim.warmup_steps`` steps (``pct_start`` = warm-up / horizon)
  and its last rate ``optim.min_lr_ratio`` of the peak at the horizon's last step. The
  same numbers as ``OneCycleLR`` (tests/test_training_schedule.py compares them), computed
  here so that a budget in minutes can move the horizon while the run goes.

``Schedule`` sets each step's rate (and beta1) in the optimiser and keeps ``used``, the
rate the last step trained with: that is what history.csv and TensorBoard show.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from attnlab.errors import UserError
from attnlab.training.freeze import trainable

ONECYCLE_START = 1 / 25  # torch's OneCycleLR div_factor
ONECYCLE_BETA1 = (0.95, 0.85)  # its max_momentum, base_momentum: beta1 at the ends, at the peak


def lr_factor(step: int, warmup: int, total: float, floor: float) -> float:
    """Linear warm-up, then cosine decay to ``floor`` of the peak learning rate."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    return _down(step - warmup, total - warmup, floor)


def linear_factor(step: int, warmup: int, total: float) -> float:
    """Linear warm-up, then a linear decay to zero at step ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    span = total - warmup
    return 0.0 if span <= 0 else max(0.0, 1 - (step - warmup) / span)


def onecycle_factor(step: int, warmup: int, total: float, floor: float) -> tuple[float, float]:
    """Torch's OneCycleLR (cosine annealing, two phases) at ``step`` of ``total``, its rise
    over ``warmup`` steps: (the rate as a fraction of the peak, beta1). The rise ends at step
    ``warmup - 1`` and the fall at ``total - 1``, as torch's phases do."""
    rise_end, fall_end = min(warmup - 1.0, total - 1.0), total - 1.0
    (hi_beta, lo_beta), start = ONECYCLE_BETA1, ONECYCLE_START
    if step <= rise_end:  # from the start up to the peak; beta1 down
        pct = step / rise_end if rise_end > 0 else 1.0
        return _anneal(start, 1.0, pct), _anneal(hi_beta, lo_beta, pct)
    span = fall_end - rise_end
    pct = min(1.0, (step - rise_end) / span) if span > 0 else 1.0
    return _anneal(1.0, floor, pct), _anneal(lo_beta, hi_beta, pct)


def _anneal(start: float, end: float, pct: float) -> float:
    """Torch's ``_annealing_cos``: from ``start`` at 0 to ``end`` at 1."""
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _down(step: int, span: float, floor: float) -> float:
    """A cosine from 1 at ``step`` 0 to ``floor`` at ``span`` (and after)."""
    progress = min(1.0, step / max(1, span))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def factors(o: Any, step: int, horizon: float) -> tuple[float, float | None]:
    """``optim.schedule`` (``o``: the optim section) at ``step`` of ``horizon`` steps: the
    rate as a fraction of ``optim.lr``, and beta1 where the schedule sets it (onecycle)."""
    if o.schedule == "onecycle":
        return onecycle_factor(step, o.warmup_steps, horizon, o.min_lr_ratio)
    if o.schedule == "linear":
        return linear_factor(step, o.warmup_steps, horizon), None
    return lr_factor(step, o.warmup_steps, horizon, o.min_lr_ratio), None


class Schedule:
    """``optim.schedule`` driving ``opt``: the rate (and beta1) of the step to come, over a
    horizon that a budget in minutes may move (``resize``); a checkpoint keeps its step,
    horizon and the rate the last step used."""

    def __init__(self, opt: torch.optim.Optimizer, o: Any, horizon: float):
        self.opt, self.o = opt, o
        self.peaks = [float(group["lr"]) for group in opt.param_groups]
        self.steps = 0  # steps taken
        self.horizon = float(horizon)
        self.used: float | None = None  # the rate the last step trained with
        self._apply()

    def _apply(self) -> None:
        factor, beta1 = factors(self.o, self.steps, self.horizon)
        for group, peak in zip(self.opt.param_groups, self.peaks, strict=True):
            group["lr"] = peak * factor
            if beta1 is not None:
                group["betas"] = (beta1, group["betas"][1])

    @property
    def rate(self) -> float:
        """The rate of the step to come (the first parameter group's)."""
        return float(self.opt.param_groups[0]["lr"])

    def resize(self, horizon: float) -> None:
        """A new horizon (a budget in minutes re-estimated): the step to come's rate again."""
        if horizon != self.horizon:
            self.horizon = float(horizon)
            self._apply()

    def step(self) -> None:
        """After the optimiser's step: that step's rate is ``used``; set the next one's."""
        self.used = self.rate
        self.steps += 1
        self._apply()

    def state_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.o.schedule,
            "steps": self.steps,
            "horizon": self.horizon,
            "used": self.used,
        }

    def load_state_dict(self, state: dict[str, Any], where: Any = "checkpoint") -> None:
        """A checkpoint's schedule. One that torch's LambdaLR wrote (attnlab before the
        schedule had a horizon) resumes where its formula is today's (cosine) and is refused
        in one line where it is not (the older one-cycle)."""
        if "schedule" not in state:  # LambdaLR's state: its step count is last_epoch
            if self.o.schedule != "cosine":
                raise UserError(
                    f"{where}: not resumed, it was trained with the older optim.schedule="
                    f"{self.o.schedule} (before it followed torch's OneCycleLR); the schedule "
                    "would change under it: use a new run directory"
                )
            self.steps, self.used = int(state["last_epoch"]), None
        else:
            self.steps, self.used = int(state["steps"]), state.get("used")
        self._apply()  # the horizon is this command's (train.steps, or the budget's estimate)


def optimiser(model: torch.nn.Module, o: Any, horizon: float) -> tuple[torch.optim.AdamW, Schedule]:
    """AdamW over ``model``'s trainable parameters (``o``: the optim section) and its
    schedule over ``horizon`` steps."""
    opt = torch.optim.AdamW(trainable(model), lr=o.lr, weight_decay=o.weight_decay)
    return opt, Schedule(opt, o, horizon)
