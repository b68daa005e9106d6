"""A run's budget: ``train.steps``, ``train.minutes`` of wall time and ``train.patience``,
whichever ends first (patience is counted in ``attnlab.training.validation``).

A budget in minutes counts every second of training, validations and checkpoints included
(from the trainer's first validation; building the reader and drawing the validation sets
before it are not counted), over every command that trained the run: a resumed run spends
what its last checkpoint had left (the seconds after that checkpoint were lost with the
steps they trained). The run ends before a step that would not leave room for one more
step and the final validation (the slowest validation's seconds), so that it ends within
its minutes: the step as measured, the one more as a margin for a slower one.

The learning-rate schedule is sized to the budget: its horizon is the steps the minutes
are estimated to hold, re-estimated before every step from the seconds per step measured
so far (validations and checkpoints included), so that it reaches its end (zero, for
``optim.schedule=linear``) as the time runs out. ``train.steps`` stays the ceiling. A run
with a budget in minutes follows the clock: it is not repeatable bit for bit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from attnlab.training.validation import patience_spent

log = logging.getLogger("attnlab.train")
PACE_STEPS = 20  # steps measured before the run says how long the rest would take


@dataclass
class Budget:
    """The budget of one command: ``minutes`` (None: steps only), the ``steps`` ceiling, and
    what earlier commands spent (``earlier_s`` over ``earlier_steps`` steps)."""

    minutes: float | None
    steps: int
    earlier_s: float = 0.0
    earlier_steps: int = 0
    started: float | None = None  # perf_counter() when this command's clock started
    start_step: int = 0
    val_s: float = 0.0  # the slowest validation's seconds (room kept for the final one)

    @classmethod
    def of(cls, train: Any) -> Budget:
        return cls(getattr(train, "minutes", None), int(train.steps))

    def start(self, state: Any) -> None:
        """This command's clock starts, at the step of ``state`` (a ``TrainState``: the
        seconds and steps spent before, the budget as its checkpoint recorded it)."""
        self.started, self.start_step = time.perf_counter(), state.step
        self.earlier_s, self.earlier_steps = float(state.seconds), int(state.trained_steps)
        self.val_s = float((state.budget or {}).get("validation_s") or 0.0)

    def validated(self, seconds: float) -> None:
        """A validation took ``seconds``: the room kept for the final one is the slowest."""
        self.val_s = max(self.val_s, seconds)

    def label(self) -> str:
        """The budget in words, for the log: "2500 steps", "2500 steps or 30 minutes"."""
        return f"{self.steps} steps" + (
            "" if self.minutes is None else f" or {self.minutes:g} minutes"
        )

    @property
    def seconds(self) -> float | None:
        return None if self.minutes is None else 60.0 * float(self.minutes)

    def spent(self) -> float:
        """Seconds spent, earlier commands included."""
        now = 0.0 if self.started is None else time.perf_counter() - self.started
        return self.earlier_s + now

    def per_step(self, step: int) -> float | None:
        """Seconds per step as measured (this command's; else the earlier ones')."""
        done = step - self.start_step
        if self.started is not None and done > 0:
            return (time.perf_counter() - self.started) / done
        return self.earlier_s / self.earlier_steps if self.earlier_steps > 0 else None

    def say_pace(self, step: int) -> None:
        """Once, ``PACE_STEPS`` steps into this command: how long the steps left would take
        at the pace measured (validations included), so a user learns early what the budget
        costs on this machine, and that ``train.minutes`` sizes a run to their time."""
        if step - self.start_step != PACE_STEPS or self.steps <= step:
            return
        per = self.per_step(step)
        if per is None:
            return
        left = (self.steps - step) * per / 60.0
        if left < 1.0:  # a short run: nothing worth saying
            return
        said = f"at {per:.3g} s a step here, the {self.steps - step} steps left would take "
        said += f"about {_duration(left)}"
        if self.minutes is not None:
            said += f"; train.minutes={self.minutes:g} ends it within {_duration(self.minutes)}"
        else:
            said += "; train.minutes=M sizes the run (and its schedule) to M minutes instead"
        log.info(said)

    def horizon(self, step: int) -> float:
        """The steps the run is expected to end at: ``train.steps``, or fewer where the
        minutes left hold fewer at the pace measured so far (less the room ``time_left``
        keeps for the final validation and a margin of one step)."""
        per = self.per_step(step) if self.minutes is not None else None
        if per is None or per <= 0:
            return float(self.steps)
        left = max(0.0, self.seconds - self.spent() - self.val_s - per)
        return min(float(self.steps), step + left / per)

    def time_left(self, step: int) -> bool:
        """Whether another step (and one more as a margin) and the final validation fit in
        the minutes left."""
        if self.minutes is None:
            return True
        return self.spent() + 2 * (self.per_step(step) or 0.0) + self.val_s <= self.seconds

    def ended_by(self, state: Any, train: Any) -> str | None:
        """What ends the run at the step of ``state`` (a ``TrainState``), whichever came
        first: "steps" (train.steps), "patience" (train.patience validations without a
        better one) or "minutes" (no room for another step and the final validation); None:
        it trains on."""
        step = state.step  # data.unlabelled: train.steps and patience count within a round
        if step - getattr(state, "round_start", 0) >= train.steps:
            return "steps"
        if patience_spent(getattr(state, "round_history", state.history), train) is not None:
            return "patience"
        recorded = state.budget or {}
        if recorded.get("ended_by") == "minutes" and recorded.get("minutes") == self.minutes:
            return "minutes"  # asked again with the budget it spent
        return None if self.time_left(step) else "minutes"

    def say_if_spent(self, state: Any, resumed: bool) -> None:
        """A warning when a resumed run (``state``) has no steps left to train: its
        ``train.steps`` is not above the steps done (in its round, with data.unlabelled)."""
        done = state.step - state.round_start
        if resumed and done >= self.steps and getattr(state.rounds, "stopped", True):
            log.warning(
                "train.steps=%(steps)d is not above the %(done)d steps this run has done: "
                "nothing to train; it ends at step %(step)d (a larger train.steps trains on)",
                {"steps": self.steps, "done": done, "step": state.step},
            )

    def status(self, record: dict[str, Any] | None) -> dict[str, Any] | None:
        """What status.json says of the budget: its ``record`` where it has minutes (a run of
        steps alone keeps the status it always had; its metrics.json says the same)."""
        return record if self.minutes is not None else None

    def record(self, step: int, spent_s: float, ended_by: str | None) -> dict[str, Any]:
        """What the run records of its budget (metrics.json, status.json, the checkpoint):
        the minutes and steps it was given, the minutes spent and steps taken, what ended it."""
        return {
            "minutes": self.minutes,
            "steps": self.steps,
            "minutes_spent": round(spent_s / 60.0, 4),
            "steps_taken": step,
            "ended_by": ended_by,
            "validation_s": round(self.val_s, 4),
        }


def _duration(minutes: float) -> str:
    """``minutes`` in words: "40 s", "12 min", "1 h 58 min"."""
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    if minutes < 60:
        return f"{minutes:.0f} min"
    return f"{int(minutes // 60)} h {minutes % 60:.0f} min"
