"""The run directory: every file name, its JSON shapes, status, evaluations and the lock.

Writers (training, evaluation, sweeps) and readers (the report, the sweep summary, resume)
all go through this module, so a file name or a field is spelled once. Reading is lenient:
a missing, unreadable or older file gives a ``RunFileError`` with one clear message, never
a KeyError.

Layout of a run directory::

    .hydra/config.yaml  .hydra/overrides.yaml   the composed config (Hydra)
    checkpoints/last.pt  checkpoints/best.pt    see attnlab.runs.checkpoint
    tb/  train.log  history.csv                 TensorBoard events, log, per-step history
    status.json                                 RunStatus + step + error
    metrics.json                                TrainMetrics, when training finished
    objective.json                              train.objective's value, when one is asked
    data_split.json                             data=folder: the held-out strip ids, counts
    eval/<name>/                                one EvalDir per evaluation:
      metrics_by_length.csv  .md                every metric (evaluation.metrics), per length
                                                and seen/unseen totals
      readings.csv                              every strip: truth, reading, confidence,
                                                edits, failure mode
      thresholds.csv  reliability.png  stops.png   confidence thresholds, calibration, stops
      maps/  attention_summary.png  pace.png    readers with weights: attention maps
      explore.json                              the report explorer's sample of strips
      eval.json                                 EvalMeta, written last (fingerprints)
    probe/<name>/                               attnlab probe (attnlab.runs.probedir)
    .lock                                       held while a process trains or evaluates here
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from attnlab.io import write_json, write_text
from attnlab.io.folders import PARTIAL
from attnlab.runs.evaldir import EvalDir
from attnlab.runs.jsonfiles import RunFileError, from_dict, load_json
from attnlab.runs.runlock import RunLock

CONFIG = Path(".hydra") / "config.yaml"
OVERRIDES = Path(".hydra") / "overrides.yaml"
CHECKPOINTS = "checkpoints"
TB = "tb"
LOG = "train.log"
HISTORY = "history.csv"
STATUS = "status.json"
METRICS = "metrics.json"
OBJECTIVE = "objective.json"  # {name, value, direction}: what a sweeper was returned
EVAL = "eval"
LOCK = ".lock"
SPLIT = "data_split.json"  # data=folder: source, held-out strip ids, counts (split_record)
# eval/.<name>.partial, probe/.<name>.partial: being written (attnlab.io.folders.atomic_dir), or
# left by a killed process.
# train_seconds: the training seconds spent when that validation ended (training.budget's
# clock, over every command that trained the run): the report's curves against minutes
HISTORY_COLUMNS = ["step", "loss", "lr", "val_exact_acc", "val_cer", "train_seconds"]


class RunStatus(str, Enum):
    running = "running"
    complete = "complete"
    failed = "failed"
    interrupted = "interrupted"  # SIGINT / SIGTERM: resumable from last.pt


@dataclass
class Status:
    state: RunStatus
    step: int = 0
    error: str | None = None


@dataclass
class TrainMetrics:
    """metrics.json: what a finished training run reports."""

    reader: str
    step: int
    params: int
    elapsed_s: float
    strips_per_s: float
    seen_lengths: list[int]
    val: dict[str, Any]
    best: dict[str, Any]
    threads: list[int] | None = None  # the CPU thread counts used, in order (thread_policy)
    device: str | None = None  # e.g. cpu, cuda:0 [GPU 1] (the CUDA_VISIBLE_DEVICES it was given)
    stopped_early: dict[str, Any] | None = None  # train.patience's stop: step, best_step, ...
    drawn_by: dict[str, Any] | None = None  # package versions and glyph bank (runs.drawn)
    # its budget: minutes and steps given, minutes_spent, steps_taken, ended_by (training.budget)
    budget: dict[str, Any] | None = None
    # data.unlabelled: each round's threshold, strips taken, validation (training.selftrain)
    self_training: dict[str, Any] | None = None


class RunDir:
    """One run directory; ``path`` need not exist yet."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- names ---------------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def overrides(self) -> Path:
        return self.path / OVERRIDES

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    def checkpoint(self, which: str) -> Path:
        return self.checkpoints / f"{which}.pt"

    @property
    def tb(self) -> Path:
        return self.path / TB

    @property
    def log(self) -> Path:
        return self.path / LOG

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def status_file(self) -> Path:
        return self.path / STATUS

    @property
    def metrics_file(self) -> Path:
        return self.path / METRICS

    @property
    def objective_file(self) -> Path:
        return self.path / OBJECTIVE

    @property
    def eval_root(self) -> Path:
        return self.path / EVAL

    def eval_dir(self, name: str) -> EvalDir:
        return EvalDir(self.eval_root / name)

    def evals(self) -> list[EvalDir]:
        """Finished-or-not evaluations (``eval/<name>``); hidden folders are ones in progress."""
        if not self.eval_root.is_dir():
            return []
        return [
            EvalDir(p)
            for p in sorted(self.eval_root.iterdir())
            if p.is_dir() and not p.name.startswith(".")
        ]

    def partial_evals(self) -> list[Path]:
        """Evaluations that were being written when their process died (or still are)."""
        if not self.eval_root.is_dir():
            return []
        return sorted(p for p in self.eval_root.glob(f".*{PARTIAL}") if p.is_dir())

    def is_run(self) -> bool:
        return self.config.is_file()

    # -- status --------------------------------------------------------------------------------
    def write_status(
        self,
        state: RunStatus,
        step: int,
        error: str | None = None,
        budget: dict[str, Any] | None = None,
    ) -> None:
        """status.json; ``budget``: the run's budget as spent so far (training.budget)."""
        status = {"state": RunStatus(state).value, "step": step, "error": error}
        write_json(self.status_file, {**status, "budget": budget} if budget else status)

    def read_status(self) -> Status:
        data = load_json(self.status_file)
        try:
            state = RunStatus(data.get("state"))
        except ValueError as err:
            raise RunFileError(f"unknown state {data.get('state')!r} in {STATUS}") from err
        step = data.get("step")
        return Status(state, int(step) if isinstance(step, int) else 0, data.get("error"))

    # -- metrics and history -------------------------------------------------------------------
    def write_metrics(self, metrics: TrainMetrics) -> None:
        write_json(self.metrics_file, asdict(metrics))

    def write_objective(self, name: str, value: float, direction: str) -> None:
        write_json(self.objective_file, {"name": name, "value": value, "direction": direction})

    def read_metrics(self) -> TrainMetrics:
        return from_dict(TrainMetrics, load_json(self.metrics_file), METRICS)

    def write_history(self, rows: list[dict[str, Any]]) -> None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=HISTORY_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: row.get(c, "") for c in HISTORY_COLUMNS})
        write_text(self.history, buf.getvalue())

    # -- the lock ------------------------------------------------------------------------------
    @property
    def split_file(self) -> Path:
        return self.path / SPLIT

    def write_split(self, record: dict[str, Any]) -> None:
        write_json(self.split_file, record)

    def lock(self, purpose: str) -> RunLock:
        return RunLock(self.path / LOCK, purpose)

    def lock_holder(self) -> str | None:
        """What holds the run's lock now (``"train, pid 123"``), or None when it is free."""
        return RunLock(self.path / LOCK, "probe").holder()
