"""``attnlab.results`` and ``attnlab.compare``: the report's discovery, grouping, aggregation
and paired differences (attnlab.report) as pandas DataFrames, without writing a report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnlab.errors import UserError
from attnlab.evaluation.metrics import TOTAL
from attnlab.report.aggregate import TrainGroup, aggregate, long_frame, train_groups
from attnlab.report.cost import variant_costs, with_cost
from attnlab.report.discover import ReportError, discover_runs, unread_runs
from attnlab.report.run_evals import edited_notes
from attnlab.report.run_info import RunInfo
from attnlab.report.same_strips import CompareRefused, readings
from attnlab.report.variants import assign_variants

RUN_COLUMNS = [
    "run",
    "train",
    "reader",
    "variant",
    "variant_id",
    "seed",
    "status",
    "threads",
    "step",
    "best_step",
    "evals",
    "problems",
    "duplicate_of",
]
TEXT = ["source", "truth", "reading"]  # readings' text columns: always str ("0026")


@dataclass
class Results:
    """Runs under some paths, as ``attnlab report`` groups them.

    ``runs``: one row per run directory (problems joined by "; "). ``metrics``: one row per
    run x evaluation x length, and each split's total (``total`` True), the runs the report
    counts. ``summary``: the seed aggregate, the rows of summary.csv. ``readings``: one row
    per run x evaluation x strip, text columns as str.

    Units: rates (``exact_acc``, ``cer``, their intervals, the failure shares) are fractions
    in [0, 1] (0.214), where the report's tables print percent and percentage points (21.4,
    +21.4). ``length`` is an integer column (pandas ``Int64``): a split's total row has
    ``total`` True and ``length`` <NA> (the files' ``all``), ``split`` says which split."""

    paths: list[Path]
    runs: pd.DataFrame
    metrics: pd.DataFrame
    summary: pd.DataFrame
    readings: pd.DataFrame
    notes: list[str] = field(default_factory=list)  # duplicate seeds, unreadable readings
    infos: list[RunInfo] = field(default_factory=list, repr=False)
    groups: list[TrainGroup] = field(default_factory=list, repr=False)


def _run_rows(infos: list[RunInfo]) -> pd.DataFrame:
    rows = [
        [
            str(r.path),
            r.train,
            r.reader_name,
            r.variant,
            r.variant_id,
            r.seed,
            r.status,
            r.threads,
            r.step,
            r.best_step,
            ",".join(r.evals),
            "; ".join(r.problems),
            str(r.duplicate_of) if r.duplicate_of else "",
        ]
        for r in infos
    ]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def _reading_rows(groups: list[TrainGroup], notes: list[str]) -> pd.DataFrame:
    frames = []
    for group in groups:
        for run in group.runs:
            for name in run.evals:
                try:
                    frame = readings(run, name).reset_index()
                except CompareRefused as err:  # said, not raised: as the report does
                    notes.append(str(err))
                    continue
                frames.append(frame.assign(run=str(run.path), variant=run.variant, eval=name))
    if not frames:
        return pd.DataFrame(columns=["run", "variant", "eval", *TEXT])
    out = pd.concat(frames, ignore_index=True).drop(columns=["edits", "chars"])
    first = ["run", "variant", "eval"]
    return out[first + [c for c in out.columns if c not in first]]


def results(*paths: Path | str) -> Results:
    """Every run under ``paths`` (run or sweep directories, or folders holding them)."""
    if len(paths) == 1 and isinstance(paths[0], (list, tuple)):
        paths = tuple(paths[0])
    if not paths:
        raise UserError("results(): give one or more run or sweep directories")
    for i, p in enumerate(paths):
        if not isinstance(p, (str, Path)) or not str(p):
            raise UserError(
                f"results(): path {i + 1} is {' '.join(repr(p).split())[:60]}; give run or "
                "sweep directories (str or Path)"
            )
    roots = [Path(p) for p in paths]
    try:
        infos = discover_runs(roots)
    except ReportError as err:
        raise UserError(str(err)) from err
    if not infos:
        unread = "; ".join(unread_runs(roots))
        raise UserError(
            f"no runs found under {', '.join(str(p) for p in roots)}"
            + (f" ({unread})" if unread else "")
        )
    from attnlab.report.tuned_study import find_studies, trials_train_only

    trials_train_only(infos, find_studies(roots))  # as the report: a trial is not evaluated
    notes = [*unread_runs(roots), *edited_notes(infos), *assign_variants(infos)]
    summary = aggregate(infos)
    groups = train_groups(infos, summary)
    metrics = integer_lengths(long_frame(infos, None))
    summary = with_cost(summary, variant_costs(infos)[0])  # as summary.csv: what each costs
    return Results(
        roots,
        _run_rows(infos),
        metrics,
        integer_lengths(summary),
        _reading_rows(groups, notes),
        notes,
        infos,
        groups,
    )


def compare(res: Results, a: str, b: str) -> pd.DataFrame:
    """Variant ``a`` minus variant ``b`` (labels as in ``res.runs.variant``, or a reader's
    name): the rows ``attnlab report --compare A B`` writes to comparisons.csv.

    Differences are fractions (``exact_diff`` 0.214 is the report's +21.4 points); ``length``
    and ``total`` as in ``Results`` (a split's total: ``total`` True, ``length`` <NA>)."""
    from attnlab.report.pairs import comparisons

    if not isinstance(res, Results):
        raise UserError(
            f"compare(): res is {type(res).__name__}, not what attnlab.results(...) returns"
        )
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str) or not value:
            raise UserError(
                f"compare(): {name}={value!r}: name a variant as res.runs.variant does (a str)"
            )
    try:
        rows, _ = comparisons(res.groups, (a, b))
    except ReportError as err:
        raise UserError(api_words(str(err))) from err
    return integer_lengths(rows)


def api_words(message: str) -> str:
    """The report's refusal in the API's words: ``compare(a, b)`` where the CLI says
    ``--compare A B``."""
    message = message.replace("attnlab report --compare A B", "attnlab.compare(res, a, b)")
    if not message.startswith("--compare"):
        return message
    rest = message.removeprefix("--compare").removeprefix(":").lstrip()
    return f"compare(res, a, b): {rest}"


def integer_lengths(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``length`` as integers (``Int64``) and, right after it, ``total``: True
    on a split's total row (``length`` "all" in the files), whose ``length`` is <NA>."""
    if "length" not in frame.columns:
        return frame
    total = frame["length"].astype(str) == TOTAL
    lengths = [pd.NA if t else int(n) for n, t in zip(frame["length"], total, strict=True)]
    out = frame.assign(length=pd.array(lengths, dtype="Int64"))
    out.insert(out.columns.get_loc("length") + 1, "total", total.to_numpy(dtype=bool))
    return out
