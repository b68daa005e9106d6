"""Aggregate rows -> the summary tables: one per training range, and summary.md around them.

A summary table has one row per length (then the seen/unseen totals) and, per reader (and
evaluation, when a range has several), one column per summary metric formatted by its
`Metric` spec. The same `SummaryTable` feeds summary.md and the HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnlab.evaluation.metrics import METRIC, TOTAL, Metric
from attnlab.report.aggregate import (
    MIN_SEEDS_T,
    ONE_SEED,
    TrainGroup,
    band_columns,
    band_words,
    length_key,
    seeds_text,
)
from attnlab.report.run_info import RunInfo

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
        columns = [md_escape(c) for c in self.columns]  # reader names are in the headings
        return pd.DataFrame([r.cells for r in self.rows], columns=columns).to_markdown(index=False)


def _heading(metric: Metric) -> str:
    return f"{metric.label} {metric.unit}".strip()


def summary_table(group: TrainGroup) -> SummaryTable:
    """Rows = lengths, columns = (variant, eval) x summary metric the variant's reader has."""
    sub = group.agg
    pairs = list(dict.fromkeys(zip(sub["variant"], sub["eval"], strict=True)))
    several_evals = sub["eval"].nunique() > 1
    index = sorted(
        dict.fromkeys(zip(sub["length"], sub["split"], strict=True)),
        key=lambda ls: (length_key(ls[0]), ls[1] != "seen"),
    )
    values = [[str(length) for length, _ in index], [split for _, split in index]]  # by column
    table = SummaryTable(group.train, group.evals, columns=["length", "split"])
    for variant, name in pairs:
        part = sub[(sub["variant"] == variant) & (sub["eval"] == name)]
        keyed = {(r["length"], r["split"]): r for r in part.to_dict("records")}
        head = f"{variant} ({name})" if several_evals else variant
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
        kinds = sorted(set(part["interval"]) - {"", ONE_SEED})
        interval = " / ".join(band_words(k) for k in kinds)
        table.notes.append(
            f"{head}: {seeds_text(list(part['n_seeds']))}, "
            + (f"interval {interval}" if interval else "no interval (one seed)")
        )
    for (length, split), cells in zip(index, zip(*values, strict=True), strict=True):
        table.rows.append(Row(list(cells), split, length == TOTAL))
    return table


def comparison_tables(frame: pd.DataFrame) -> list[SummaryTable]:
    """One table per comparison (training range, evaluation, A, B) of comparisons.csv rows:
    per length, A's and B's exact accuracy, the paired difference A - B with its interval in
    exact accuracy and CER (percentage points), and McNemar's test."""
    pct, cer = METRIC["exact_acc"], METRIC["cer"]
    tables = []
    if frame.empty:
        return tables
    for (train, name, a, b), part in frame.groupby(["train", "eval", "a", "b"], sort=False):
        columns = [
            "length",
            "split",
            f"{a} exact %",
            f"{b} exact %",
            "exact A - B (pp) [95%]",
            "CER A - B (pp) [95%]",
            "McNemar b / c",
            "p",
        ]
        table = SummaryTable(str(train), [str(name)], columns)
        table.notes.append(
            f"A = {a}, B = {b}; eval {name}; {part['n_pairs'].iloc[0]} seed "
            f"pair(s), paired {part['pairing'].iloc[0]}"
        )
        for r in part.to_dict("records"):
            table.rows.append(
                Row(
                    [
                        str(r["length"]),
                        r["split"],
                        pct.fmt(r["exact_a"]),
                        pct.fmt(r["exact_b"]),
                        points_text(r["exact_diff"], r["exact_diff_lo"], r["exact_diff_hi"], pct),
                        points_text(r["cer_diff"], r["cer_diff_lo"], r["cer_diff_hi"], cer),
                        f"{r['mcnemar_b']} / {r['mcnemar_c']}",
                        _p_value(r["mcnemar_p"]),
                    ],
                    r["split"],
                    r["length"] == TOTAL,
                )
            )
        tables.append(table)
    return tables


def signed_points(
    value: float, lo: float = float("nan"), hi: float = float("nan"), digits: int = 1
) -> str:
    """A difference of two rates (fractions) in percentage points, signed, with its interval:
    ``+4.2 [+1.0, +7.5]``; the one place this format is written (the report's tables and
    lines, the lab's figures). No value: "–"; no interval: the value alone."""
    if pd.isna(value):
        return MISSING
    text = f"{100 * value:+.{digits}f}"
    if pd.isna(lo) or pd.isna(hi):
        return text
    return f"{text} [{100 * lo:+.{digits}f}, {100 * hi:+.{digits}f}]"


def points_text(value: float, lo: float, hi: float, metric: Metric) -> str:
    """A difference of two rates in percentage points, signed, with its interval, to the
    metric's digits (``signed_points``)."""
    return signed_points(value, lo, hi, metric.digits)


def _p_value(p: float) -> str:
    return "–" if pd.isna(p) else ("< 0.0001" if p < 1e-4 else f"{p:.4f}")


def md_escape(text: object) -> str:
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
    comparisons: list[SummaryTable] | None = None,
    compare_notes: list[str] | None = None,
    method: str = "",
) -> str:
    """summary.md: one table per training range (with the sentences generated from its
    numbers), then the probes' lines when given, then the runs that are not complete."""
    lines = [
        "# attnlab report",
        "",
        f"Aggregated {len(runs)} run(s) under: {', '.join(f'`{p}`' for p in paths)}.",
        "Values are percents: seed mean [interval]. With >= "
        f"{MIN_SEEDS_T} seeds the interval is a 95% t-interval of the mean, otherwise the "
        "min-max over seeds; with one seed there is no interval.",
        "",
    ]
    if not tables:
        lines += ["No evaluation results were found.", ""]
    for table in tables:
        lines += [f"## Trained on lengths {table.train}", ""]
        lines += [f"Evaluation: {', '.join(table.evals)}."]
        lines += [""] + [f"- {md_escape(n)}" for n in table.notes] + [""]
        lines += [table.markdown(), ""]
        said = (findings or {}).get(table.train, [])
        if said:
            lines += ["What the numbers say:", ""] + [f"- {md_escape(f)}" for f in said] + [""]
    if comparisons or compare_notes:
        lines += ["## Paired differences", "", md_escape(method), ""]
        for table in comparisons or []:
            lines += [f"### Trained on lengths {table.train}: {md_escape(table.notes[0])}", ""]
            lines += [table.markdown(), ""]
        lines += [f"- not compared: {md_escape(n)}" for n in compare_notes or []]
        lines += [""] if compare_notes else []
    lines += probes or []  # the probe section (report.probes.probes_markdown)
    for note in dup_notes:
        lines += [f"Note: {md_escape(note)}", ""]
    bad = [r for r in runs if r.problems]
    lines += ["## Incomplete or failed runs", ""]
    if not bad:
        lines += ["None: every run has a status, metrics and an evaluation.", ""]
    for r in bad:
        lines.append(
            f"- `{r.path}` ({md_escape(r.variant or r.reader_name)}, seed {r.seed}, "
            f"train {r.train}, "
            f"{r.status}): " + md_escape("; ".join(r.problems))
        )
    return "\n".join(lines).rstrip() + "\n"


def objectives_markdown(best: list) -> list[str]:
    """summary.md's lines on the sweepers' objectives (report.objectives): the best run of
    each sweep; none when no run carries an objective."""
    if not best:
        return []
    lines = ["## Best runs by objective", ""]
    lines += [f"- {md_escape(b.line())}" for b in best]
    return lines + ["", "Each run's value is in index.html's table of runs (objective.json).", ""]
