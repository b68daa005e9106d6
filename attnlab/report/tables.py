"""Aggregate rows -> the summary tables: one per training range, and summary.md around them.

A summary table has one row per length (then the seen/unseen totals) and, per reader (and
evaluation, when a range has several), one column per summary metric formatted by its
`Metric` spec. The same `SummaryTable` feeds summary.md and the HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnlab.metrics import METRIC, TOTAL, Metric
from attnlab.report.aggregate import (
    MIN_SEEDS_T,
    TrainGroup,
    band_columns,
    band_words,
    length_key,
    seeds_text,
)
from attnlab.report.discover import RunInfo

# The metrics of the summary tables (summary.csv has them all).
SUMMARY_METRICS: tuple[Metric, ...] = (METRIC["exact_acc"], METRIC["cer"])
MISSING = "–"  # a length a reader was not evaluated at


@dataclass(frozen=True)
class Row:
    cells: list[str]
    split: str
    total: bool  # a split total (length "all"), not one length


@dataclass
class SummaryTable:
    train: str
    evals: list[str]
    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # seeds and band per column group

    def markdown(self) -> str:
        columns = [_md_escape(c) for c in self.columns]  # reader names are in the headings
        return pd.DataFrame([r.cells for r in self.rows], columns=columns).to_markdown(index=False)


def _heading(metric: Metric) -> str:
    return f"{metric.label} {metric.unit}".strip()


def summary_table(group: TrainGroup) -> SummaryTable:
    """Rows = lengths, columns = (reader, eval) x summary metric the reader has."""
    sub = group.agg
    pairs = list(dict.fromkeys(zip(sub["reader"], sub["eval"], strict=True)))
    several_evals = sub["eval"].nunique() > 1
    index = sorted(
        dict.fromkeys(zip(sub["length"], sub["split"], strict=True)),
        key=lambda ls: (length_key(ls[0]), ls[1] != "seen"),
    )
    values = [[str(length) for length, _ in index], [split for _, split in index]]  # by column
    table = SummaryTable(group.train, group.evals, columns=["length", "split"])
    for reader, name in pairs:
        part = sub[(sub["reader"] == reader) & (sub["eval"] == name)]
        keyed = {(r["length"], r["split"]): r for r in part.to_dict("records")}
        head = f"{reader} ({name})" if several_evals else reader
        for m in SUMMARY_METRICS:
            if not part[m.name].notna().any():  # a metric this reader lacks: no column
                continue
            lo, hi = band_columns(m)
            table.columns.append(f"{head} {_heading(m)}")
            values.append(
                [
                    m.fmt(keyed[k][m.name], keyed[k][lo], keyed[k][hi]) if k in keyed else MISSING
                    for k in index
                ]
            )
        kinds = sorted(set(part["interval"]) - {""})
        table.notes.append(
            f"{head}: {seeds_text(list(part['n_seeds']))}, "
            f"interval {' / '.join(band_words(k) for k in kinds)}"
        )
    for (length, split), cells in zip(index, zip(*values, strict=True), strict=True):
        table.rows.append(Row(list(cells), split, length == TOTAL))
    return table


def _md_escape(text: object) -> str:
    """Text as Markdown shows it: no table-breaking "|" or newline, and no raw HTML (a reader
    or run name with "<script>" in it is shown, not run, by a Markdown viewer): "<", ">" and
    "&" get Markdown's backslash escape."""
    out = str(text).replace("\n", " ")
    for char in "\\|<>&":
        out = out.replace(char, "\\" + char)
    return out


def summary_md(
    paths: list[Path],
    runs: list[RunInfo],
    tables: list[SummaryTable],
    dup_notes: list[str],
    findings: dict[str, list[str]] | None = None,
    probes: list[str] | None = None,
) -> str:
    """summary.md: one table per training range (with the sentences generated from its
    numbers), then the probes' lines when given, then the runs that are not complete."""
    lines = [
        "# attnlab report",
        "",
        f"Aggregated {len(runs)} run(s) under: {', '.join(f'`{p}`' for p in paths)}.",
        "Values are percents: seed mean [interval]. With >= "
        f"{MIN_SEEDS_T} seeds the interval is a 95% t-interval of the mean, otherwise the "
        "min-max over seeds.",
        "",
    ]
    if not tables:
        lines += ["No evaluation results were found.", ""]
    for table in tables:
        lines += [f"## Trained on lengths {table.train}", ""]
        lines += [f"Evaluation: {', '.join(table.evals)}."]
        lines += [""] + [f"- {_md_escape(n)}" for n in table.notes] + [""]
        lines += [table.markdown(), ""]
        said = (findings or {}).get(table.train, [])
        if said:
            lines += ["What the numbers say:", ""] + [f"- {_md_escape(f)}" for f in said] + [""]
    lines += probes or []  # the probe section (report.probes.probes_markdown)
    for note in dup_notes:
        lines += [f"Note: {_md_escape(note)}", ""]
    bad = [r for r in runs if r.problems]
    lines += ["## Incomplete or failed runs", ""]
    if not bad:
        lines += ["None: every run has a status, metrics and an evaluation.", ""]
    for r in bad:
        lines.append(
            f"- `{r.path}` ({_md_escape(r.reader_name)}, seed {r.seed}, train {r.train}, "
            f"{r.status}): " + _md_escape("; ".join(r.problems))
        )
    return "\n".join(lines).rstrip() + "\n"
