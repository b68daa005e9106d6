"""What a sweeper was told: each run's objective (``objective.json``) and the best trial.

A job of a sweep with ``train.objective`` records the value it returned, with its name and
direction (``attnlab.runs.rundir.RunDir.write_objective``). The report shows each run's value
and marks the best run of every sweep and objective, by the objective's direction, naming
its run directory, so that an Optuna study can be traced to the run that won it. Only the
runs' own files are read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from attnlab.report.run_info import RunInfo
from attnlab.report.variants import counted
from attnlab.runs.rundir import RunDir


@dataclass(frozen=True)
class Objective:
    name: str
    value: float
    direction: str  # "maximize" or "minimize"

    def text(self) -> str:
        return f"{self.name} {self.value:.4g}"


@dataclass(frozen=True)
class Best:
    """The best run of one sweep (or of the runs outside any sweep) by one objective."""

    sweep: Path | None
    objective: Objective
    run: RunInfo
    n_runs: int  # how many runs of that sweep carry the objective

    def line(self) -> str:
        o, r = self.objective, self.run
        where = f"sweep {self.sweep}" if self.sweep is not None else "runs outside a sweep"
        return (
            f"best of {self.n_runs} run(s) by {o.name} ({o.direction}), {where}: {o.value:.4g}, "
            f"{r.variant or r.reader_name}, seed {r.seed}, run {r.path}"
        )


def read_objective(path: Path) -> Objective | str | None:
    """A run's objective.json: the objective, why it cannot be read, or None without one."""
    file = RunDir(path).objective_file
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        value = float(data["value"])
        name, direction = str(data["name"]), str(data["direction"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable {file.name}: {exc}"
    if direction not in ("maximize", "minimize") or not math.isfinite(value):
        return f"{file.name}: {name} = {value} ({direction}) is not a finite value to seek"
    return Objective(name, value, direction)


def objectives(runs: list[RunInfo]) -> dict[Path, Objective]:
    """Run path -> its objective; an unreadable objective.json is a problem of its run."""
    out = {}
    for run in runs:
        got = read_objective(run.path)
        if isinstance(got, str):
            run.problems.append(got)
        elif got is not None:
            out[run.path] = got
    return out


def best_runs(runs: list[RunInfo], values: dict[Path, Objective]) -> list[Best]:
    """Per (sweep, objective name): the run with the best value by its direction (the first
    by path on a tie). Duplicates of a seed and unsound runs do not count."""
    groups: dict[tuple[Path | None, str], list[RunInfo]] = {}
    for run in counted(runs):
        if run.path in values and not run.unsound:
            groups.setdefault((run.sweep, values[run.path].name), []).append(run)
    out = []
    for (sweep, _), members in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        sign = 1.0 if values[members[0].path].direction == "maximize" else -1.0
        best = max(members, key=lambda r: (sign * values[r.path].value, -members.index(r)))
        out.append(Best(sweep, values[best.path], best, len(members)))
    return out
