"""One ``attnlab sweep tuned`` study, as its files say: `TunedStudy`.

A study's root holds ``tuned.json`` (``attnlab.tasks.tuned``): its readers, objective,
sampler, budget per trial, and where each reader's trials (``study/<reader>/trials.csv``,
read by ``report.tuned_checks``) and its best trial's re-runs (``winners/<reader>/``) are.
Here: where the studies under a path are, each study read from those files (one that cannot
be is `StudyUnreadable`, in one line), and its trials marked as runs that train only. The
report's section of a study is ``report.tuned``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from attnlab.config import OBJECTIVES
from attnlab.report.budgets import given_text
from attnlab.report.run_evals import NO_EVALUATION
from attnlab.report.run_info import RunInfo
from attnlab.report.tuned_checks import Trials, budget_notes, read_trials, trial_steps
from attnlab.runs.studydir import MANIFEST, STUDY, TRIALS_CSV


@dataclass
class TunedStudy:
    """One ``attnlab sweep tuned`` study, as its files say."""

    root: Path
    readers: list[str]
    objective: str
    maximize: bool
    sampler: str
    trials: int
    scores: dict[str, list[float]]  # reader -> its complete trials' values
    winners: dict[str, Path]  # reader -> the folder of its best trial's re-runs
    best: dict[str, dict]  # reader -> its best trial (trial, dir, value, overrides)
    axes: list[str] = field(default_factory=list)  # the search space as typed
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reader -> keys it lacks
    steps: int | None = None  # train.steps of each trial
    minutes: float | None = None  # train.minutes of each trial and re-run (tune.minutes)
    trial_runs: dict[str, Trials] = field(default_factory=dict)  # reader -> its trials
    checks: list[str] = field(default_factory=list)  # what its files say (tuned_checks)

    @property
    def budget(self) -> str:
        """Each trial's budget: "6 steps per trial", "2 minutes per trial (at most N steps)"."""
        if self.minutes is None:
            return f"{self.steps} steps per trial" if self.steps else "steps per trial unknown"
        most = f" (at most {self.steps} steps)" if self.steps else ""
        return f"{given_text(self.minutes, None)} per trial{most}"


def find_studies(paths: list[Path]) -> list[Path]:
    """The study roots at or under ``paths``: folders holding tuned.json, or holding
    ``study/<reader>/trials.csv`` without it (``read_study`` says so)."""
    found = set()
    for path in paths:
        path = Path(path)
        if (path / MANIFEST).is_file():
            found.add(path)
        elif path.is_dir():
            found.update(p.parent for p in path.rglob(MANIFEST))
            tables = path.rglob(f"{STUDY}/*/{TRIALS_CSV}")
            found.update(p.parents[2] for p in tables if not (p.parents[2] / MANIFEST).is_file())
    return sorted(found)


def trials_train_only(runs: list[RunInfo], roots: list[Path]) -> None:
    """A study's trials train and validate only (the sweeper's objective is the validation;
    the winners are the ones evaluated): "no evaluation" is not a problem of theirs."""
    studies = {(root / STUDY).resolve() for root in roots}
    for run in runs:
        if run.path.resolve().parent.parent in studies and NO_EVALUATION in run.problems:
            run.problems.remove(NO_EVALUATION)


class StudyUnreadable(Exception):
    """A study's tuned.json or trials.csv that cannot be read, with why in one line."""


def read_study(root: Path) -> TunedStudy:
    try:
        return _read_study(root)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StudyUnreadable(f"study {root}: unreadable ({type(err).__name__}: {err})") from err


def _read_study(root: Path) -> TunedStudy:
    if not (root / MANIFEST).is_file():
        held = sorted(p.parent.name for p in (root / STUDY).glob(f"*/{TRIALS_CSV}"))
        raise StudyUnreadable(
            f"study {root}: no {MANIFEST} (deleted?), though {root / STUDY} holds the trials of "
            f"{', '.join(held)}: not reported as a study (what it was asked is unknown)"
        )
    data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    objective = str(data["objective"])
    readers = list(data["readers"])
    digests = data.get("tables") or {}
    trials = {
        r: read_trials(
            root / data["studies"][r], digests.get(r), f"{data['studies'][r]}/{TRIALS_CSV}"
        )
        for r in readers
    }
    study = TunedStudy(
        root,
        readers,
        objective,
        OBJECTIVES[objective][0] == "maximize",
        str(data["sampler"]),
        int(data["trials"]),
        {r: t.values for r, t in trials.items()},
        {r: root / d for r, d in data["winners"].items()},
        dict(data.get("best", {})),
        [str(a) for a in data.get("axes") or []],
        dict(data.get("dropped") or {}),
        trial_steps(data, trials),
        _minutes(data.get("minutes")),
        trials,
    )
    study.checks = [n for t in trials.values() for n in t.notes]
    study.checks += budget_notes(trials, study.trials, study.dropped, study.axes)
    return study


def _minutes(value: object) -> float | None:
    """tuned.json's minutes (a study written before them has none: steps only)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"minutes {value!r} is not a number")
    return float(value)
