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
import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from attnlab.io import PARTIAL, file_digest, write_json, write_text
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
SPLIT = "data_split.json"  # data=folder: source, held-out strip ids, counts (source_train)
# eval/.<name>.partial, probe/.<name>.partial: being written (attnlab.io.atomic_dir), or
# left by a killed process.
HISTORY_COLUMNS = ["step", "loss", "lr", "val_exact_acc", "val_cer"]

# Files of one evaluation (eval/<name>/); eval.json is written last and marks it complete.
TABLE_CSV = "metrics_by_length.csv"
TABLE_MD = "metrics_by_length.md"
READINGS = "readings.csv"
# EvalMeta.extra key: file name -> sha256 of the CSV tables as the evaluation wrote them
DIGESTS = "digests"
STRIP_PRINTS = "strips"  # EvalMeta.extra key: length -> fingerprint of the strips read
THRESHOLDS = "thresholds.csv"
RELIABILITY = "reliability.png"
STOPS = "stops.png"
PACE = "pace.png"
EVAL_META = "eval.json"
MAPS = "maps"
ATTENTION_SUMMARY = "attention_summary.png"
EXPLORE = "explore.json"  # the report explorer's sample of strips (attnlab.evaluation.explore)
MAP_KINDS = ("correct", "failure")
_MAP_NAME = re.compile(r"^len(\d+)_(correct|failure)_(\d+)\.png$")


class RunFileError(Exception):
    """A run-directory file that is missing, unreadable or of an unknown shape."""


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


@dataclass
class EvalMeta:
    """eval.json: what an evaluation read, with which checkpoint; written last.

    ``extra[STRIP_PRINTS]`` maps each length to a fingerprint of the strips read there: two
    evaluations are paired strip by strip only where these are equal (report.compare).
    """

    name: str
    source: str  # synthetic | folder
    decoding: str  # greedy | beam<K>
    reader: str
    seen_lengths: list[int]
    lengths: list[int]
    checkpoint: str
    step: int  # the training step of the checkpoint it read
    folder: str | None = None
    n_per_length: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise RunFileError(f"no {path.name}") from err
    except (OSError, ValueError) as err:
        raise RunFileError(f"unreadable {path.name}: {err}") from err
    if not isinstance(data, dict):
        raise RunFileError(f"unreadable {path.name}: not a JSON object")
    return data


def from_dict(cls, data: dict[str, Any], what: str):
    """A dataclass from a JSON object: unknown keys ignored, missing required keys named."""
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as err:
        missing = sorted(
            f.name
            for f in fields(cls)
            if f.name not in data and f.default is MISSING and f.default_factory is MISSING
        )
        raise RunFileError(f"{what} lacks {', '.join(missing) or 'fields'} ({err})") from err


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

    def hydra_files(self) -> dict[str, str]:
        """``.hydra/*.yaml`` as text. Checkpoints keep them, because Hydra rewrites them
        before a task runs: a refused command puts the run's own back."""
        folder = self.config.parent
        return (
            {p.name: p.read_text() for p in sorted(folder.glob("*.yaml"))}
            if folder.is_dir()
            else {}
        )

    def restore_hydra_files(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            write_text(self.config.parent / name, text)

    # -- status --------------------------------------------------------------------------------
    def write_status(self, state: RunStatus, step: int, error: str | None = None) -> None:
        write_json(
            self.status_file, {"state": RunStatus(state).value, "step": step, "error": error}
        )

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

    def read_split(self) -> dict[str, Any]:
        return load_json(self.split_file)

    def lock(self, purpose: str) -> RunLock:
        return RunLock(self.path / LOCK, purpose)

    def lock_holder(self) -> str | None:
        """What holds the run's lock now (``"train, pid 123"``), or None when it is free."""
        return RunLock(self.path / LOCK, "probe").holder()


class EvalDir:
    """One evaluation: ``eval/<name>/`` with its tables, maps and eval.json (written last)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def table_csv(self) -> Path:
        return self.path / TABLE_CSV

    @property
    def table_md(self) -> Path:
        return self.path / TABLE_MD

    @property
    def meta_file(self) -> Path:
        return self.path / EVAL_META

    @property
    def readings(self) -> Path:
        return self.path / READINGS

    @property
    def thresholds(self) -> Path:
        return self.path / THRESHOLDS

    @property
    def reliability(self) -> Path:
        return self.path / RELIABILITY

    @property
    def stops(self) -> Path:
        return self.path / STOPS

    @property
    def pace(self) -> Path:
        return self.path / PACE

    @property
    def maps(self) -> Path:
        return self.path / MAPS

    @property
    def attention_summary(self) -> Path:
        return self.path / ATTENTION_SUMMARY

    @property
    def explore(self) -> Path:
        return self.path / EXPLORE

    def map_path(self, length: int, kind: str, index: int) -> Path:
        if kind not in MAP_KINDS:
            raise ValueError(f"map kind must be one of {MAP_KINDS}, got {kind!r}")
        return self.maps / f"len{length:02d}_{kind}_{index}.png"

    def head_map_path(self, length: int, kind: str, index: int) -> Path:
        """Per-head maps of a reader with several attention heads, beside its maps."""
        return self.map_path(length, kind, index).with_name(
            f"heads_len{length:02d}_{kind}_{index}.png"
        )

    def map_files(self) -> dict[tuple[int, str], list[Path]]:
        """(length, kind) -> map PNGs in index order."""
        found: dict[tuple[int, str], list[tuple[int, Path]]] = {}
        if self.maps.is_dir():
            for p in self.maps.iterdir():
                m = _MAP_NAME.match(p.name)
                if m:
                    key = (int(m.group(1)), m.group(2))
                    found.setdefault(key, []).append((int(m.group(3)), p))
        return {k: [p for _, p in sorted(v)] for k, v in found.items()}

    def write_meta(self, meta: EvalMeta) -> None:
        """eval.json, written last, with the sha256 of the two CSV tables (per length, and
        readings) as they are now (``extra[DIGESTS]``): a table edited by hand afterwards is
        found (``changed_files``) instead of disagreeing with the other in one report."""
        digests = {p.name: file_digest(p) for p in (self.table_csv, self.readings) if p.is_file()}
        write_json(self.meta_file, asdict(replace(meta, extra={**meta.extra, DIGESTS: digests})))

    def changed_files(self, meta: EvalMeta) -> list[str]:
        """The tables whose bytes are not those eval.json recorded (edited after the
        evaluation wrote them). An evaluation written before the digests were recorded has
        none to compare: [] (it is read as before)."""
        recorded = (meta.extra or {}).get(DIGESTS)
        if not isinstance(recorded, dict):
            return []
        return [
            name
            for name, digest in sorted(recorded.items())
            if not (self.path / name).is_file() or file_digest(self.path / name) != digest
        ]

    def read_meta(self) -> EvalMeta:
        return from_dict(EvalMeta, load_json(self.meta_file), EVAL_META)
