"""A run's evaluations -> the tables that count, or why each one does not.

An evaluation counts when its ``eval.json`` is there (it is written last: without it the
folder is partial), read the run's best checkpoint (else it is stale), and its table and
``readings.csv`` are the files it wrote, every metric cell a number (else it was edited, or
is unsound: the run is left out of every aggregate). Each reason becomes a problem of the
run (``RunInfo.problems``), never an exception.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnlab.evaluation.metrics import KEYS, METRIC, TABLE_COLUMNS, TOTAL
from attnlab.report.failures import recompute_failure_shares
from attnlab.report.run_info import UNSOUND, RunInfo
from attnlab.runs.evaldir import EvalDir, EvalMeta
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.rundir import EVAL, RunDir

# Without these an evaluation table is not one; any other metric may be missing from a table
# written by an older attnlab (it reads as not measured).
REQUIRED_COLUMNS = KEYS + METRIC["exact_acc"].columns + METRIC["cer"].columns

NO_EVALUATION = "no evaluation"  # a run problem: nothing of it can be reported


def edited_notes(runs: list[RunInfo]) -> list[str]:
    """The evaluation tables changed after they were written, one line each."""
    return [p.split(": ", 1)[-1] for r in runs for p in r.problems if CHANGED in p]


def read_evals(run: RunDir, info: RunInfo) -> None:
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
