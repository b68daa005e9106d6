"""What a study's files say beside its verdict (``report.tuned``), each in one line.

- ``trials.csv`` is checked as evaluation tables are: its sha256 against the one
  ``tuned.json`` recorded, and each complete trial's value against the trial's own
  ``objective.json`` (the truth): an edit is named and the edited value is not used; a
  trial folder that is gone is named;
- the budgets: readers with unequal numbers of complete trials, a reader whose study left
  out an axis (a key it lacks), or had none left (its trials are one configuration);
- the search: a best trial at the edge of a numeric axis (within 5% of its span), and
  trials still improving at their last validation (more steps may rank them otherwise);
- the setup: the search space and the budget per trial (steps, or minutes).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from attnlab.config.overrides import override_key, override_value
from attnlab.io import file_digest
from attnlab.report.objectives import Objective, read_objective
from attnlab.runs.rundir import RunDir
from attnlab.runs.studydir import TRIALS_CSV

EDGE = 0.05  # a best value within this share of an axis's span from one of its ends
SHOWN = 3  # edited trials named in a line


@dataclass
class Trials:
    """One reader's complete trials as the study's files give them."""

    values: list[float] = field(default_factory=list)  # each trial's checked value
    dirs: list[Path] = field(default_factory=list)  # their folders (those that are there)
    rows: int = 0  # rows of trials.csv
    failed: int = 0
    notes: list[str] = field(default_factory=list)


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def read_trials(folder: Path, recorded: str | None, name: str) -> Trials:
    """A reader's ``trials.csv`` checked against ``recorded`` (its sha256 in tuned.json; None
    for a study written before) and against each trial's ``objective.json``."""
    path = folder / TRIALS_CSV
    table = pd.read_csv(path, dtype={"dir": str})
    edited = recorded is not None and file_digest(path) != recorded
    out = Trials(rows=len(table))
    changed, missing = [], []
    for row in table.to_dict("records"):
        if row["state"] != "complete":
            out.failed += 1
            continue
        run, listed = folder / str(row["dir"]), row["value"]
        own = read_objective(run) if run.is_dir() else None
        if isinstance(own, Objective):
            if not (_finite(listed) and math.isclose(float(listed), own.value, rel_tol=1e-9)):
                changed.append(
                    f"trial {row['trial']} {listed} there, {own.value:.6g} in its objective.json"
                )
            out.values.append(own.value)
            out.dirs.append(run)
            continue
        if not run.is_dir():
            missing.append(str(row["dir"]))
        if not edited and _finite(listed):  # nothing to check it against: the table's own
            out.values.append(float(listed))
            if run.is_dir():
                out.dirs.append(run)
    if edited or changed:
        more = f" and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
        what = f": {'; '.join(changed[:SHOWN])}{more}" if changed else ""
        out.notes.append(
            f"{name}: edited after the study wrote it (not the sha256 tuned.json "
            f"records){what}; the trials' own objective.json values are used"
        )
    if missing:
        fate = "left out (the table was edited)" if edited else "taken from the table unchecked"
        out.notes.append(
            f"{name}: trial folder(s) {', '.join(missing)} are gone (deleted?); "
            f"their values are {fate}"
        )
    return out


def budget_notes(
    trials: dict[str, Trials], planned: int, dropped: dict[str, list[str]], axes: list[str]
) -> list[str]:
    """Unequal budgets: other numbers of complete trials, axes left out for a reader."""
    notes = []
    counts = {r: len(t.values) for r, t in trials.items()}
    if len(set(counts.values())) > 1 or any(c < planned for c in counts.values()):
        each = ", ".join(
            f"{r} {c} of {planned}" + (f" ({t.failed} failed)" if t.failed else "")
            for (r, c), t in zip(counts.items(), trials.values(), strict=True)
        )
        notes.append(
            f"unequal trials: {each} complete: the budgets are not equal; the "
            f"readers are set side by side at n = 1..{min(counts.values())}"
        )
    keys = [override_key(a) for a in axes]
    for reader, lacks in dropped.items():
        if lacks and len(lacks) >= len(keys):
            notes.append(
                f"{reader} has none of the search axes ({', '.join(lacks)}): its "
                "trials are one configuration repeated, not a tuned budget"
            )
        elif lacks:
            notes.append(
                f"{reader}'s study left out {', '.join(lacks)} (a key it lacks): it "
                f"searched {len(keys) - len(lacks)} of the {len(keys)} axes"
            )
    return notes


def _bounds(axis: str) -> tuple[str, float, float, bool] | None:
    """(key, low, high, log scale) of a numeric search axis; None for another kind."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    try:
        o = OverridesParser.create().parse_override(axis)
        v = o.value()
    except Exception:  # not an override Hydra reads: nothing to say about it
        return None
    key = o.key_or_group
    log = "log" in getattr(v, "tags", set())
    if isinstance(v, IntervalSweep):
        lo, hi = float(v.start), float(v.end)
    elif isinstance(v, RangeSweep):
        values = list(range(int(v.start), int(v.stop), int(v.step or 1)))
        lo, hi = float(min(values, default=0)), float(max(values, default=0))
    elif isinstance(v, ChoiceSweep) and all(_finite(x) and not isinstance(x, bool) for x in v.list):
        lo, hi = float(min(v.list)), float(max(v.list))
    else:
        return None
    return (key, lo, hi, log and lo > 0) if key != "seed" and hi > lo else None


def edge_lines(best: dict[str, dict], axes: list[str]) -> list[str]:
    """A reader whose best trial lies within 5% of a numeric axis's span of one of its ends
    (in log space for a ``tag(log, ...)`` axis): the best may lie outside the range."""
    lines = []
    for axis in axes:
        got = _bounds(axis)
        if got is None:
            continue
        key, lo, hi, log = got
        scale = math.log if log else float
        for reader, b in best.items():
            value = override_value(b.get("overrides") or [], key)
            if not _finite(value) or (log and float(value) <= 0):
                continue
            x = (scale(float(value)) - scale(lo)) / (scale(hi) - scale(lo))
            side = "top" if x >= 1 - EDGE else "bottom" if x <= EDGE else None
            if side is not None:
                lines.append(
                    f"{reader}'s best trial has {key}={float(value):.4g}, at the {side} edge of "
                    f"the searched {lo:.4g}..{hi:.4g} (within {EDGE:.0%} of it): a better value "
                    "may lie outside the range; widen it to know"
                )
    return lines


def improving_lines(trials: dict[str, Trials], objective: str, budget: str) -> list[str]:
    """Per reader, how many trials were still improving: their last validation their best
    (the rule ``attnlab train`` says "still improving" by); ``budget``: each trial's, in
    words ("6 steps per trial", "2 minutes per trial (at most 100000 steps)")."""
    from attnlab.training.validation import standing, watched

    _, column, _ = watched(objective)
    lines = []
    for reader, t in trials.items():
        rising = 0
        for run in t.dirs:
            history = RunDir(run).history
            if not history.is_file():
                continue
            with history.open(newline="", encoding="utf-8") as f:
                rows = [
                    {"step": r["step"], column: r[column]}
                    for r in csv.DictReader(f)
                    if r.get(column) not in (None, "")
                ]
            now = standing(rows, objective, untrained=True)
            rising += now.validations >= 2 and now.since_best == 0
        if rising:
            lines.append(
                f"{reader}: {rising} of its {len(t.dirs)} trials were still improving at their "
                f"last validation: {budget} may be too few to rank the settings"
            )
    return lines


def trial_steps(data: dict[str, Any], trials: dict[str, Trials]) -> int | None:
    """The steps per trial: tuned.json's, else a trial's own config."""
    for key in ("trial_steps", "steps"):
        if isinstance(data.get(key), int):
            return int(data[key])
    for t in trials.values():
        for run in t.dirs:
            try:
                cfg = yaml.safe_load((run / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
                return int(cfg["train"]["steps"])
            except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
                continue
    return None


def setup_line(
    axes: list[str],
    dropped: dict[str, list[str]],
    readers: list[str],
    budget: str,
    trials: int,
    sampler: str,
) -> str:
    """The search space (an axis some reader lacks marked with the readers that have it),
    the budget per trial (``TunedStudy.budget``) and the trials per reader."""
    shown = []
    for axis in axes:
        key = override_key(axis)
        has = [r for r in readers if key not in dropped.get(r, [])]
        shown.append(axis if len(has) == len(readers) else f"{axis} ({', '.join(has)} only)")
    return (
        f"search space: {', '.join(shown) or 'none recorded'}; {budget}; {trials} trials per "
        f"reader, {sampler} sampler"
    )
