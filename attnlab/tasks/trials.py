"""What an optimising sweep (``hydra/sweeper=optuna``, nevergrad, ax) leaves to trace its trials.

The sweeper's own ``optimization_results.yaml`` names the best parameters and value, but no
trial and no directory. ``conf/train.yaml`` registers ``TrialTable`` as a Hydra callback, so:

- every trial, where it runs (this process, a worker, a SLURM job), writes ``trial.json`` into
  its job directory: its number (Hydra's job number, which is also the Optuna trial's), its
  directory, its overrides, its state (``complete`` or ``failed``), the objective's value or
  the error's line;
- when the sweep ends, the sweep's own process gathers them into ``trials.csv`` beside
  ``optimization_results.yaml`` (one row a trial: trial, dir, overrides, objective, value,
  state) and prints one line naming the best trial and its directory.

A sweep whose sweeper only enumerates (the basic sweeper, a grid) writes neither.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from attnlab.config import OBJECTIVES
from attnlab.errors import one_line
from attnlab.io import atomic_write
from attnlab.runs.studydir import TRIAL_FILE
from attnlab.runs.studydir import TRIALS_CSV as TABLE
from attnlab.tasks.sweepers import optimiser_of

COLUMNS = ["trial", "dir", "overrides", "objective", "value", "state"]


def optimising(config: DictConfig) -> bool:
    mode = OmegaConf.select(config, "hydra.mode")
    sweeper = OmegaConf.select(config, "hydra.sweeper")
    return mode == RunMode.MULTIRUN and sweeper is not None and optimiser_of(sweeper) is not None


def trial_record(config: DictConfig, job_return: Any) -> dict[str, Any]:
    """One trial as ``trial.json`` holds it."""
    from hydra.core.utils import JobStatus

    done = job_return.status == JobStatus.COMPLETED
    result = job_return._return_value  # .return_value re-raises a failed trial's error
    value = float(result) if done and isinstance(result, (int, float)) else None
    return {
        "trial": int(config.hydra.job.num),
        "dir": str(config.hydra.runtime.output_dir),
        "overrides": [str(o) for o in (job_return.overrides or [])],
        "objective": OmegaConf.select(config, "train.objective"),
        "value": value,
        "state": "complete" if done else "failed",
        "error": None if done else one_line(result) if isinstance(result, BaseException) else "",
    }


def write_trial(record: dict[str, Any]) -> Path:
    text = json.dumps(record, indent=2) + "\n"
    return atomic_write(Path(record["dir"]) / TRIAL_FILE, lambda p: p.write_text(text))


def gather(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every trial's record under ``sweep_dir``, by trial number."""
    records = [json.loads(p.read_text()) for p in sweep_dir.rglob(TRIAL_FILE)]
    return sorted(records, key=lambda r: r["trial"])


def best_of(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The finished trial with the best value, in its objective's direction (the first such
    trial on a tie, as Optuna picks); None when no trial finished."""
    done = [r for r in records if r["state"] == "complete" and _finite(r["value"])]
    if not done:
        return None
    objective = done[0]["objective"]
    sign = -1.0 if OBJECTIVES.get(objective, ("maximize",))[0] == "maximize" else 1.0
    return min(done, key=lambda r: (sign * r["value"], r["trial"]))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def write_table(sweep_dir: Path, records: list[dict[str, Any]]) -> Path:
    """``trials.csv``: one row a trial, its directory relative to the sweep's."""
    import pandas as pd

    rows = [
        {
            **{k: r.get(k) for k in COLUMNS},
            "dir": _relative(Path(r["dir"]), sweep_dir),
            "overrides": " ".join(r["overrides"]),
        }
        for r in records
    ]
    table = pd.DataFrame(rows, columns=COLUMNS)
    return atomic_write(sweep_dir / TABLE, lambda p: table.to_csv(p, index=False))


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def best_line(records: list[dict[str, Any]], table: Path) -> str:
    best = best_of(records)
    failed = sum(r["state"] == "failed" for r in records)
    tail = f"{len(records)} trials ({failed} failed) in {table}"
    if best is None:
        return f"no trial finished; {tail}"
    way = OBJECTIVES.get(best["objective"], ("maximize",))[0]
    return (
        f"best trial: {best['trial']} ({best['objective']}={best['value']:.6g}, {way}d), "
        f"directory {best['dir']}; {tail}"
    )


class TrialTable(Callback):
    """Each trial's ``trial.json``, then the sweep's ``trials.csv`` and its best trial."""

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if optimising(config):
            write_trial(trial_record(config, job_return))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not optimising(config):
            return
        sweep_dir = Path(str(config.hydra.sweep.dir))
        records = gather(sweep_dir)
        print(best_line(records, write_table(sweep_dir, records)), flush=True)
