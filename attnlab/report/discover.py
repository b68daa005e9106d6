"""Run directories on disk -> `RunInfo`: config, status, metrics, evaluations and history.

A run directory is any directory holding ``.hydra/config.yaml``; single runs live under
``outputs/<date>/<time>/`` and sweep jobs under ``multirun/<date>/<time>/<job>/``. Every file
is read through `attnlab.runs.rundir`, and a file that is missing, unreadable, partial or stale
becomes a problem of its run (shown in the report), never an exception: a report of a sweep
that is half done must still be written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from omegaconf import OmegaConf

from attnlab.config import lengths_label, seen_lengths
from attnlab.evaluation.metrics import KEYS, METRIC, TABLE_COLUMNS, TOTAL
from attnlab.report.budgets import Spent, spent_of
from attnlab.report.failures import recompute_failure_shares
from attnlab.report.reader_styles import UNKNOWN
from attnlab.runs import drawn
from attnlab.runs.evaldir import EvalDir, EvalMeta
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.resume import resume_command
from attnlab.runs.rundir import CHECKPOINTS, EVAL, TB, RunDir, RunStatus

# Without these an evaluation table is not one; any other metric may be missing from a table
# written by an older attnlab (it reads as not measured).
REQUIRED_COLUMNS = KEYS + METRIC["exact_acc"].columns + METRIC["cer"].columns

# Folders never walked: a copied .hydra inside an evaluation or a report is not a run.
_SKIP_DIRS = {EVAL, CHECKPOINTS, TB, "report", "__pycache__", "node_modules"}
SWEEP_MARKER = "multirun.yaml"  # Hydra writes it at the top of a multirun directory
T = TypeVar("T")

NO_EVALUATION = "no evaluation"  # a run problem: nothing of it can be reported


class ReportError(Exception):
    """A user error while building a report (nothing to report, a path that does not exist)."""


@dataclass
class RunInfo:
    """What the report knows about one run directory; `problems` says why it is incomplete."""

    path: Path
    reader: str | None = None
    seed: int | None = None
    train: str = "?"  # lengths_label of the seen lengths: "1-8", "2,4,6"; "?" when unknown
    seen_lengths: list[int] = field(default_factory=list)
    # a RunStatus value, "stale" (running but no process holds it) or "unknown" (no status)
    status: str = "unknown"
    evals: list[str] = field(default_factory=list)  # evaluations that count (complete, current)
    problems: list[str] = field(default_factory=list)
    step: int | None = None
    best_step: int | None = None  # metrics.json best.step: the checkpoint evaluations must read
    sweep: Path | None = None  # the sweep directory (holding multirun.yaml) for multirun jobs
    # train.threads: the CPU threads it trained with (runs record the number since the sweep
    # ran jobs side by side; 0 = torch's default, in older runs). A neutral key, shown only.
    threads: int | None = None
    device: str | None = None  # metrics.json: where it trained, with the GPU it was given
    drawn_by: str | None = None  # metrics.json: a digest of its package versions and glyph bank
    glyph_bank: str | None = None  # metrics.json: its glyph bank's digest (attnlab.runs.drawn)
    drawn_record: Any = field(default=None, repr=False, compare=False)  # drawn_by as read
    config_text: str = field(default="", repr=False)
    overrides: list[str] = field(default_factory=list)
    eval_tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    eval_meta: dict[str, EvalMeta] = field(default_factory=dict, repr=False, compare=False)
    history: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    # metrics.json: its budget (minutes, steps) and what it spent (report.budgets)
    spent: Spent | None = field(default=None, compare=False)
    # Set by attnlab.report.variants.assign_variants: the variant this run is a seed of.
    variant: str = ""  # its label: the reader, then the keys swept within its reader
    variant_id: str = ""  # a hash of the config keys that count
    swept: dict[str, str] = field(default_factory=dict)  # key -> value, as in the label
    duplicate_of: Path | None = None  # another run with the same config and seed

    @property
    def complete(self) -> bool:
        return not self.problems

    @property
    def unsound(self) -> bool:
        """A file of the run cannot be trusted: it counts in no aggregate (evaluations, probes)."""
        return any(p.endswith(UNSOUND) for p in self.problems)

    @property
    def reader_name(self) -> str:
        return self.reader or UNKNOWN


def discover_runs(paths: list[Path]) -> list[RunInfo]:
    """Every run directory under `paths` (recursively), sorted by path; never raises for a run.

    Folders named eval/, checkpoints/, tb/ or report/ and hidden folders are not walked.
    A path that does not exist is a user error (ReportError).
    """
    found: dict[Path, None] = {}
    for root in map(Path, paths):
        if not root.exists():
            raise ReportError(f"no such file or directory: {root}")
        if root.is_file():
            raise ReportError(f"not a directory: {root}")
        for dirpath, dirnames, _ in os.walk(root):
            if RunDir(dirpath).is_run():
                found[Path(dirpath).resolve()] = None
            dirnames[:] = sorted(
                d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
            )
    return [read_run(p) for p in sorted(found)]


def unread_runs(paths: list[Path]) -> list[str]:
    """One note per folder under ``paths`` that holds what a run writes (status.json,
    metrics.json, checkpoints/) but no ``.hydra/config.yaml``: it cannot be read as a run
    (what it trained is unknown), and it is said so rather than dropped without a word."""
    notes = []
    for root in (Path(p) for p in paths if Path(p).is_dir()):
        for dirpath, dirnames, _ in os.walk(root):
            run = RunDir(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
            )
            marks = [p.name for p in (run.status_file, run.metrics_file, run.checkpoints)]
            marks = [m for m in marks if (run.path / m).exists()]
            if marks and not run.is_run():
                notes.append(
                    f"{run.path}: has {', '.join(marks)} but no {run.config.relative_to(run.path)}"
                    ": not read as a run (its config says what it trained)"
                )
    return notes


def edited_notes(runs: list[RunInfo]) -> list[str]:
    """The evaluation tables changed after they were written, one line each."""
    return [p.split(": ", 1)[-1] for r in runs for p in r.problems if CHANGED in p]


def read_run(path: Path) -> RunInfo:
    """One run directory; the order of the readers below is the order of its problems."""
    run = RunDir(path)
    info = RunInfo(path=path, sweep=_find_sweep(path))
    _read_config(run, info)
    _read_status(run, info)
    _read_metrics(run, info)
    if info.reader is None:
        info.problems.append("config lacks model.name")
    _read_evals(run, info)
    _read_history(run, info)
    return info


def _find_sweep(path: Path) -> Path | None:
    return next((p for p in path.parents if (p / SWEEP_MARKER).is_file()), None)


def _select(cfg: Any, key: str) -> Any:
    try:
        return OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
    except Exception:  # a broken config is reported, not raised
        return None


def _read_config(run: RunDir, info: RunInfo) -> None:
    info.config_text = run.config.read_text(errors="replace")
    try:
        loaded = OmegaConf.load(run.overrides)
        info.overrides = [str(o) for o in loaded] if loaded is not None else []
    except Exception:  # overrides are informative only
        pass
    try:
        cfg = OmegaConf.create(info.config_text)
    except Exception as exc:  # any parse error is reported as a problem
        info.problems.append(f"unreadable .hydra/config.yaml: {str(exc).splitlines()[0]}")
        return
    info.reader = None if (reader := _select(cfg, "model.name")) is None else str(reader)
    threads = _select(cfg, "train.threads")
    info.threads = threads if isinstance(threads, int) else None
    seed = _select(cfg, "seed")
    if seed is not None and not isinstance(seed, int):
        info.problems.append(f"config seed is not an integer: {seed!r}")
    else:
        info.seed = seed
    data = _select(cfg, "data")
    if data is None:
        info.problems.append("config lacks data.train_lengths")
        return
    try:
        info.seen_lengths = seen_lengths(data)
    except Exception as exc:  # UserError for a bad range; OmegaConf's for a missing key
        info.problems.append(f"config: {str(exc).splitlines()[0]}")
        return
    info.train = lengths_label(info.seen_lengths)


def _recorded(info: RunInfo, read: Callable[[], T]) -> T | None:
    """`read()`, or None with its RunFileError (one clear line) recorded as a problem."""
    try:
        return read()
    except RunFileError as exc:
        info.problems.append(str(exc))
        return None


def _read_status(run: RunDir, info: RunInfo) -> None:
    if (status := _recorded(info, run.read_status)) is None:
        return
    info.status, info.step = status.state.value, status.step
    if status.state is RunStatus.failed:
        info.problems.append(f"failed: {status.error or 'no error message'}")
    elif status.state is RunStatus.interrupted:
        reason = status.error or "interrupted"  # train.py writes "interrupted (SIGTERM)"
        if not reason.startswith("interrupted"):
            reason = f"interrupted: {reason}"
        resume = "no checkpoint yet: training it again starts from step 0"
        if run.checkpoint("last").is_file():
            command = resume_command(run.path)  # None: a run made outside Hydra
            resume = "resumable from last.pt" + (f": {command}" if command else "")
        info.problems.append(f"{reason} at step {status.step}; {resume}")
    elif status.state is RunStatus.running and run.lock_holder() is None:
        info.status = "stale"
        info.problems.append(
            f"stale: status says running at step {status.step} but no process holds the run"
        )
    elif status.state is RunStatus.running:
        info.problems.append(f"running (step {status.step})")


def _read_metrics(run: RunDir, info: RunInfo) -> None:
    if (metrics := _recorded(info, run.read_metrics)) is None:
        return
    best = metrics.best.get("step") if isinstance(metrics.best, dict) else None
    info.best_step = best if isinstance(best, int) else None
    info.device = None if metrics.device is None else str(metrics.device)
    info.drawn_record = metrics.drawn_by  # checked by report.variants.bank_notes
    if isinstance(metrics.drawn_by, dict):  # recorded since attnlab.runs.drawn
        info.drawn_by = drawn.short(metrics.drawn_by)
        info.glyph_bank = metrics.drawn_by.get("glyph_bank")
    if info.reader is None and metrics.reader:
        info.reader = str(metrics.reader)
    info.spent = spent_of(metrics)


# A run with one of these problems is left out of every aggregate, not only the evaluation
# it concerns: its files cannot be trusted.
UNSOUND = ": the run is left out of every aggregate"


def _read_evals(run: RunDir, info: RunInfo) -> None:
    for ev in run.evals():
        result = _read_eval(ev, info)
        if isinstance(result, str):
            info.problems.append(f"eval/{ev.name}: {result}")
            continue
        table, meta = result
        if info.reader and meta.reader and meta.reader != info.reader:
            info.problems.append(
                f"eval/{ev.name}: reader {meta.reader!r} differs from config "
                f"{info.reader!r}{UNSOUND}"
            )
            continue
        info.evals.append(ev.name)
        info.eval_tables[ev.name] = table
        info.eval_meta[ev.name] = meta
    if info.unsound:
        info.evals.clear()
        info.eval_tables.clear()
        info.eval_meta.clear()
    for partial in run.partial_evals():  # eval/.<name>.partial
        name = partial.name.removeprefix(".").rsplit(".", 1)[0]
        info.problems.append(f"eval/{name}: partial (being written or killed)")
    if not info.evals and not any(p.startswith(f"{EVAL}/") for p in info.problems):
        info.problems.append(NO_EVALUATION)


def current_meta(result, best_step: int | None):
    """The metadata of a result folder (EvalDir or ProbeDir) that counts, or why it does
    not: no metadata file (it is written last: the folder is partial), an unreadable one, or
    one that read another checkpoint than the run's best (stale)."""
    if not result.meta_file.is_file():
        return f"partial (no {result.meta_file.name})"
    try:
        meta = result.read_meta()
    except RunFileError as exc:
        return str(exc)
    if best_step is not None and meta.step != best_step:
        return f"stale (read step {meta.step}, best is step {best_step})"
    return meta


CHANGED = " was changed after the evaluation wrote it"


def _read_eval(ev: EvalDir, info: RunInfo) -> tuple[pd.DataFrame, EvalMeta] | str:
    """The table and eval.json of an evaluation that counts, or why it does not count.

    eval.json is written last, so without it the evaluation is partial; one that read another
    checkpoint than the run's best is stale (the run trained on after it was evaluated); one
    whose table or readings.csv is not the file it wrote (eval.json records their sha256;
    evaluations written before it did are read unchecked) was edited, and is not counted.
    """
    meta = current_meta(ev, info.best_step)
    if isinstance(meta, str):
        return meta
    csv_name = ev.table_csv.name
    if not ev.table_csv.is_file():
        return f"no {csv_name}"
    try:
        table = pd.read_csv(ev.table_csv, dtype={"length": str, "split": str})
    except (OSError, ValueError) as exc:
        return f"unreadable {csv_name}: {exc}"
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        return f"{csv_name} lacks {', '.join(missing)}"
    recompute_failure_shares(table, ev.readings)  # written before the current classes
    for column in TABLE_COLUMNS:  # metrics added since it was written: not measured, NaN
        if column not in table.columns:
            table[column] = float("nan")
    lengths = table["length"].astype(str).str.strip()
    bad = sorted(set(lengths[~(lengths.str.fullmatch(r"\d+") | (lengths == TOTAL))]))
    if bad:
        return f"{csv_name} has bad length {bad[0]!r}"
    if (cell := bad_cell(ev.table_csv)) is not None:
        return f"{csv_name} {cell}{UNSOUND}"
    changed = ev.changed_files(meta)  # after the checks above, which name what is wrong
    if changed:  # its two tables would disagree in one report: neither counts
        return f"{ev.path / changed[0]}{CHANGED} (its sha256 is not eval.json's): not counted"
    return table, meta


# Cells that must hold a number: the strip count and the two metrics every table has.
# Another metric's cell may be empty (not measured: alignment without attention weights).
NUMBER_REQUIRED = ["n", "exact_acc", "cer"]


def bad_cell(path: Path) -> str | None:
    """The first metric cell of an evaluation table that is not a finite number (``NaN``,
    ``inf``, ``abc``; an empty cell where a number is required), as "row R, column C: 'v'";
    None when every cell is sound. pandas would read such cells as NaN, and a NaN is
    dropped from a seed mean without a word, so the table would count with holes in it."""
    import math

    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        return f"is unreadable ({exc})"
    for column in (c for c in TABLE_COLUMNS if c in raw.columns and c not in ("length", "split")):
        for row, text in enumerate(raw[column].astype(str).str.strip(), start=2):
            if text == "" and column not in NUMBER_REQUIRED:
                continue
            try:
                ok = math.isfinite(float(text))
            except ValueError:
                ok = False
            if not ok:
                return f"line {row}, column {column}: {text!r} is not a finite number"
    return None


def _read_history(run: RunDir, info: RunInfo) -> None:
    name = run.history.name
    if not run.history.is_file():
        return
    try:
        history = pd.read_csv(run.history)
    except (OSError, ValueError):
        info.problems.append(f"unreadable {name}")
        return
    if "step" not in history.columns:
        info.problems.append(f"{name} lacks step")
        return
    info.history = history
