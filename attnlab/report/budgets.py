"""What runs were given to train and what they spent, in minutes as well as steps.

A run's ``metrics.json`` records its budget (``attnlab.training.budget``): ``train.minutes``
(null: steps only) and ``train.steps``, the minutes spent (training, validations and
checkpoints, over every command that trained it), the steps taken, and what ended it
(steps, minutes or patience). A run finished before budgets were recorded has its
``elapsed_s`` and ``step``: the minutes and steps it spent, what it was given unknown.

The report states comparisons' budgets from these records (the tuned studies' lines,
``report.tuned``) and says beside the training curves which runs were trained to a budget
in minutes (``curve_notes``), so that a curve against steps is not read as equal time.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.rundir import RunDir


@dataclass(frozen=True)
class Spent:
    """One run's budget as its metrics.json records it."""

    minutes: float | None  # train.minutes it was given (None: steps only, or unknown)
    steps: int | None  # train.steps it was given (None: unknown, a run before budgets)
    minutes_spent: float
    steps_taken: int
    ended_by: str | None  # steps | minutes | patience (None: unknown)


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def spent_of(metrics: Any) -> Spent | None:
    """The budget of a run from its ``TrainMetrics``: ``budget`` where recorded, else its
    ``elapsed_s`` and ``step``; None when neither says anything."""
    budget = getattr(metrics, "budget", None)
    if isinstance(budget, dict):
        spent, taken = _number(budget.get("minutes_spent")), _number(budget.get("steps_taken"))
        if spent is not None and taken is not None:
            steps = _number(budget.get("steps"))
            ended = budget.get("ended_by")
            return Spent(
                _number(budget.get("minutes")),
                None if steps is None else int(steps),
                spent,
                int(taken),
                ended if isinstance(ended, str) else None,
            )
    elapsed, step = _number(getattr(metrics, "elapsed_s", None)), _number(metrics.step)
    if elapsed is None or step is None:
        return None
    return Spent(None, None, elapsed / 60.0, int(step), None)


def read_spent(run: Path) -> Spent | None:
    """The budget in ``run``'s metrics.json; None without a readable one (an unfinished or
    broken run: its problems are the report's run list's to say)."""
    try:
        return spent_of(RunDir(run).read_metrics())
    except (RunFileError, OSError, ValueError, TypeError):
        return None


def minutes_words(minutes: float) -> str:
    return f"{minutes:g} minute" + ("" if minutes == 1 else "s")


def given_text(minutes: float | None, steps: int | None) -> str:
    """A budget as given: "500 steps", "2 minutes or 100000 steps, whichever ends first"."""
    if minutes is None:
        return f"{steps} steps" if steps is not None else "steps unknown"
    ceiling = f" or {steps} steps, whichever ends first" if steps is not None else ""
    return minutes_words(minutes) + ceiling


def _median_range(values: list[float], fmt: str) -> str:
    """ "M" for one value or equal ones, else "M [lo-hi]" (the median, then the range)."""
    mid = statistics.median(values)
    if min(values) == max(values):
        return format(mid, fmt)
    return f"{format(mid, fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def spent_text(spent: list[Spent]) -> str:
    """ "40 [31-51] steps in 0.047 [0.046-0.048] minutes": what runs spent (median [range])."""
    steps = _median_range([float(s.steps_taken) for s in spent], ".0f")
    minutes = _median_range([s.minutes_spent for s in spent], ".3g")
    return f"{steps} steps in {minutes} minutes"


def ended_text(spent: list[Spent]) -> str:
    """What ended the runs when not all ended by the budget they were given in minutes
    ("1 of 4 ended by steps"); "" otherwise."""
    timed = [s for s in spent if s.minutes is not None]
    other = [s.ended_by for s in timed if s.ended_by not in (None, "minutes")]
    if not other:
        return ""
    counts = {e: other.count(e) for e in sorted(set(other))}
    each = ", ".join(f"{n} of {len(timed)} ended by {e}" for e, n in counts.items())
    return f"{each} before the minutes ran out"


def curve_notes(runs: Iterable[Any]) -> list[str]:
    """What to say beside a training range's curves (``runs``: its ``RunInfo``s): the runs
    trained to a budget in minutes (their minutes, steps taken and minutes spent), and the
    runs whose history.csv has no training seconds (not drawn against minutes)."""
    runs = [r for r in runs if r.history is not None]
    notes = []
    timed = [r for r in runs if r.spent is not None and r.spent.minutes is not None]
    if timed:
        given = sorted({r.spent.minutes for r in timed})
        spent = [r.spent for r in timed]
        ended = ended_text(spent)
        notes.append(
            f"{len(timed)} of {len(runs)} run(s) trained to a budget in minutes "
            f"(train.minutes={', '.join(f'{m:g}' for m in given)}): "
            f"{spent_text(spent)} (median [range]){f'; {ended}' if ended else ''}; "
            "at equal minutes, read the curves against minutes, not steps"
        )
    untimed = [r for r in runs if not has_seconds(r.history)]
    if untimed and len(untimed) < len(runs):
        notes.append(
            f"{len(untimed)} run(s) have no train_seconds in history.csv (trained before it "
            "was logged): drawn against steps only"
        )
    return notes


def has_seconds(history: Any) -> bool:
    """Whether a history (pandas frame) logs the training seconds of its validations."""
    return (
        history is not None
        and "train_seconds" in history.columns
        and bool(history["train_seconds"].notna().any())
    )


def curves_markdown(notes: dict[str, list[str]]) -> list[str]:
    """summary.md's lines of the curves' notes (training range -> its notes); none without."""
    lines = [f"- train {train}: {n}" for train, said in notes.items() for n in said]
    return ["", "## Training curves (against steps and minutes)", "", *lines] if lines else []
