"""Run directories on disk -> `RunInfo`: config, status, metrics, evaluations and history.

A run directory is any directory holding ``.hydra/config.yaml``; single runs live under
``outputs/<date>/<time>/`` and sweep jobs under ``multirun/<date>/<time>/<job>/``. Every file
is read through `attnlab.runs.rundir`, and a file that is missing, unreadable, partial or stale
becomes a problem of its run (shown in the report), never an exception: a report of a sweep
that is half done must still be written. Which evaluations count is ``report.run_evals``'s
rule; the record itself is ``report.run_info``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from omegaconf import OmegaConf

from attnlab.config import lengths_label, seen_lengths
from attnlab.report.budgets import spent_of
from attnlab.report.run_evals import read_evals
from attnlab.report.run_info import RunInfo
from attnlab.runs import drawn
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.resume import resume_command
from attnlab.runs.rundir import CHECKPOINTS, EVAL, TB, RunDir, RunStatus

# Folders never walked: a copied .hydra inside an evaluation or a report is not a run.
_SKIP_DIRS = {EVAL, CHECKPOINTS, TB, "report", "__pycache__", "node_modules"}
SWEEP_MARKER = "multirun.yaml"  # Hydra writes it at the top of a multirun directory
T = TypeVar("T")


class ReportError(Exception):
    """A user error while building a report (nothing to report, a path that does not exist)."""


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


def read_run(path: Path) -> RunInfo:
    """One run directory; the order of the readers below is the order of its problems."""
    run = RunDir(path)
    info = RunInfo(path=path, sweep=_find_sweep(path))
    _read_config(run, info)
    _read_status(run, info)
    _read_metrics(run, info)
    if info.reader is None:
        info.problems.append("config lacks model.name")
    read_evals(run, info)
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
