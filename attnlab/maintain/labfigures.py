"""The lab handout's figures (docs/lab.md), computed from the files of real runs.

``figures`` computes each figure the handout quotes from the files its commands wrote
(attnlab.maintain.labcommands runs them), through the Python API (``attnlab.results``,
``attnlab.compare``), the probe's ``summary.csv``, the cost tables and the tuning study's
section. ``scripts/lab_figures.py`` is the entry point; attnlab.maintain.labdoc keeps the
figures between the handout's markers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnlab.api.results import compare, results
from attnlab.evaluation.analysis import failure_mode
from attnlab.evaluation.metrics import METRIC
from attnlab.report import discover_runs
from attnlab.report.cost_files import COST_CSV, COST_DIR, GROWTH_CSV, lab_table
from attnlab.report.tables import signed_points
from attnlab.report.tuned import tuned_section

FIGURES = (
    "comparison",
    "lengths",
    "explorer",
    "probe",
    "width",
    "positions",
    "own",
    "cost",
    "fair",
    "fair_minutes",
    "strong",
)


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def split_totals(res, variant: str, split: str, eval_name: str | None = None) -> tuple:
    """Seed-mean exact accuracy and CER of a variant's split total."""
    m = res.metrics
    rows = m[(m["variant"] == variant) & (m["split"] == split) & m["total"]]
    if eval_name is not None:
        rows = rows[rows["eval"] == eval_name]
    return rows["exact_acc"].astype(float).mean(), rows["cer"].astype(float).mean()


def at_length(res, variant: str, length: int) -> tuple:
    """Seed-mean exact accuracy and CER of a variant at one length."""
    m = res.metrics
    rows = m[(m["variant"] == variant) & (m["length"] == length)]
    return rows["exact_acc"].astype(float).mean(), rows["cer"].astype(float).mean()


def diff_line(diffs, split: str, key: str = "exact") -> str:
    """``+d [lo, hi]`` in points: a split total's paired difference and its 95% interval."""
    row = diffs[(diffs["split"] == split) & diffs["total"]].iloc[0]
    return signed_points(*(float(row[f"{key}_diff{s}"]) for s in ("", "_lo", "_hi")))


def lengths_shown(res) -> list[int]:
    """The lengths the handout's table shows: 1, half the longest seen one, the longest seen,
    the next two, one and a half times and twice the longest seen."""
    m = res.metrics
    top = int(m[m["split"] == "seen"]["length"].max())
    return sorted({1, top // 2, top, top + 1, top + 2, 3 * top // 2, 2 * top} - {0})


def comparison_table(res) -> str:
    """Step 1: each reader's seen and unseen totals, then attention − fixed paired."""
    diffs = compare(res, "attention", "fixed")
    rows = [
        "| reader | seen exact % | seen CER % | unseen exact % | unseen CER % |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for reader in ("fixed", "attention"):
        (se, sc), (ue, uc) = split_totals(res, reader, "seen"), split_totals(res, reader, "unseen")
        rows.append(f"| {reader} | {pct(se)} | {pct(sc)} | {pct(ue)} | {pct(uc)} |")
    rows.append(
        f"\nattention − fixed, paired over the same strips [95%]: seen exact "
        f"{diff_line(diffs, 'seen')} points, CER {diff_line(diffs, 'seen', 'cer')}; unseen "
        f"exact {diff_line(diffs, 'unseen')}, CER {diff_line(diffs, 'unseen', 'cer')}."
    )
    return "\n".join(rows)


def lengths_table(res) -> str:
    """Step 2: exact accuracy and CER per reader at the lengths shown."""
    lengths = lengths_shown(res)
    rows = [
        "| length | " + " | ".join(map(str, lengths)) + " |",
        "| --- |" + " ---: |" * len(lengths),
    ]
    for reader in ("fixed", "attention"):
        cells = [at_length(res, reader, n) for n in lengths]
        rows.append(f"| {reader} exact % | " + " | ".join(pct(e) for e, _ in cells) + " |")
        rows.append(f"| {reader} CER % | " + " | ".join(pct(c) for _, c in cells) + " |")
    return "\n".join(rows)


def comparison_figures(out: Path) -> dict[str, str]:
    """Steps 1-3, from the comparison sweep."""
    res = results(out / "compare")
    return {
        "comparison": comparison_table(res),
        "lengths": lengths_table(res),
        "explorer": explorer_figure(res),
    }


def explorer_figure(res) -> str:
    """At the longest seen length: how often the fixed reader fails where attention reads
    right, and the first such strip with both readings and the fixed reader's failure class
    (recomputed from truth and reading: an older readings.csv's ``mode`` has older words)."""
    m = res.metrics
    top = int(m[m["split"] == "seen"]["length"].max())
    r = res.readings[res.readings["length"].astype(int) == top]
    fixed = r[r["variant"] == "fixed"].set_index("source")
    att = r[r["variant"] == "attention"].set_index("source").loc[fixed.index]
    wrong = ~fixed["correct"].astype(bool) & att["correct"].astype(bool)
    text = (
        f"At length {top} (the longest seen) the fixed reader got {int(wrong.sum())} of "
        f"{len(fixed)} strips wrong that the attention reader read right"
    )
    if not wrong.any():
        return text + "."
    first = wrong[wrong].index[0]
    f, a = fixed.loc[first], att.loc[first]
    mode = METRIC[failure_mode(f["truth"], f["reading"])].label  # the report's words
    return (
        f"{text}. The first, `{first}`: truth `{f['truth']}`, fixed `{f['reading']}` "
        f"({mode}, confidence {float(f['confidence']):.2f}), attention `{a['reading']}` "
        f"(confidence {float(a['confidence']):.2f})."
    )


def probe_table(out: Path) -> str:
    """Step 4: each reader's probe summary (mean drop of the read digit's probability)."""
    runs = results(out / "compare").runs
    lines = [
        "| reader | split | strips | attended glyph | true glyph | random glyph |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for reader in ("attention", "fixed"):
        (run,) = runs[runs["reader"] == reader]["run"]
        (summary,) = sorted((Path(run) / "probe").glob("*/summary.csv"))
        t = pd.read_csv(summary, dtype={"length": str})
        for row in t[t["length"] == "all"].itertuples(index=False):
            cells = [
                "–" if pd.isna(getattr(row, k)) else f"{getattr(row, k):.2f}"
                for k in ("drop_attended", "drop_true", "drop_random")
            ]
            lines.append(f"| {reader} | {row.split} | {row.n_strips} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sweep_table(res, key: str) -> str:
    """Per variant: seeds, seen and unseen exact (seed mean)."""
    lines = [f"| {key} | seeds | seen exact % | unseen exact % |", "| --- | ---: | ---: | ---: |"]
    for variant in sorted(res.runs["variant"].unique()):
        seeds = res.runs[res.runs["variant"] == variant]["seed"].nunique()
        (se, _), (ue, _) = split_totals(res, variant, "seen"), split_totals(res, variant, "unseen")
        lines.append(f"| {variant.split('=')[-1]} | {seeds} | {pct(se)} | {pct(ue)} |")
    return "\n".join(lines)


def strong_figure(out: Path) -> str:
    """Side quest: both readers on the resnet encoder; attention − fixed paired over the
    seen and unseen lengths and at the longest seen length."""
    res = results(out / "strong")
    diffs = compare(res, "attention", "fixed")
    m = res.metrics
    top = int(m[m["split"] == "seen"]["length"].max())
    rows = [
        f"| encoder=resnet | seen exact % | unseen exact % | exact % at {top} digits |",
        "| --- | ---: | ---: | ---: |",
    ]
    for reader in ("fixed", "attention"):
        seen, unseen = split_totals(res, reader, "seen"), split_totals(res, reader, "unseen")
        at_top = at_length(res, reader, top)[0]
        rows.append(f"| {reader} | {pct(seen[0])} | {pct(unseen[0])} | {pct(at_top)} |")
    row = diffs[diffs["length"].astype(str) == str(top)].iloc[0]
    at_top = signed_points(*(float(row[f"exact_diff{s}"]) for s in ("", "_lo", "_hi")))
    rows.append(
        f"\nattention − fixed, paired over the same strips [95%]: seen exact "
        f"{diff_line(diffs, 'seen')} points, unseen {diff_line(diffs, 'unseen')}, at {top} "
        f"digits {at_top}."
    )
    return "\n".join(rows)


def width_figure(out: Path) -> str:
    """Step 5: the fixed reader at two widths, then 64 − 16 paired."""
    res = results(out / "widths")
    diffs = compare(res, "fixed · model.hidden=64", "fixed · model.hidden=16")
    return (
        sweep_table(res, "model.hidden")
        + f"\n\n64 − 16, paired strip by strip and seed by seed [95%]: seen exact "
        f"{diff_line(diffs, 'seen')} points, unseen {diff_line(diffs, 'unseen')}."
    )


def positions_figure(out: Path) -> str:
    """Step 6: the transformer reader per positional code."""
    return sweep_table(results(out / "positions"), "model.pos")


def own_figure(out: Path) -> str:
    """Step 7: the held-out handwriting's exact accuracy and CER."""
    res = results(out / "own")
    ev = res.metrics["eval"].iloc[0]
    (se, sc) = split_totals(res, res.runs["variant"].iloc[0], "seen", ev)
    n = len(res.readings[res.readings["eval"] == ev])
    return (
        f"Held-out handwriting (`{ev}`: {n} strips, lengths 1-8, of handwritten samples no "
        f"training strip holds): {pct(se)}% exact, CER {pct(sc)}%."
    )


def cost_figure(out: Path) -> str:
    """Step 8: what the readers cost by length (the cost command's lab table)."""
    return lab_table(out / COST_DIR / COST_CSV, out / COST_DIR / GROWTH_CSV)


def fair_figure(out: Path, study_dir: str = "tuned") -> str:
    """Step 9: each reader's expected best validation objective at 1, N/2 and N trials
    (unbiased estimator, 95% bootstrap band), then the report's lines: where the curves cross
    and the re-run winners' paired difference (attnlab.report.tuned, from the study's files).
    ``study_dir``: the study at equal steps (``tuned``) or at equal minutes
    (``tuned_minutes``)."""
    root = out / study_dir
    section = tuned_section(root, discover_runs([root / "winners"]), {})
    frame, study = section.frame, section.study
    ns = sorted({1, study.trials // 2, study.trials} - {0})
    head = " | ".join(f"n = {n}" for n in ns)
    lines = [
        f"| expected best {study.objective} % [95%], {study.sampler} search | {head} |",
        "| --- |" + " ---: |" * len(ns),
    ]
    for reader in study.readers:
        rows = frame[(frame["variant"] == reader) & (frame["estimator"] == "unbiased")]
        rows = rows.set_index("n")
        cells = [
            f"{pct(rows.loc[n, 'expected'])} [{pct(rows.loc[n, 'lo'])}, {pct(rows.loc[n, 'hi'])}]"
            for n in ns
            if n in rows.index
        ]
        lines.append(f"| {reader} | " + " | ".join(cells) + " |")
    said = "\n".join(f"{ln[0].upper()}{ln[1:]}." for ln in section.lines)
    return "\n".join(lines) + "\n\n" + said


def figures(out: Path) -> dict[str, str]:
    """Every figure the handout quotes (FIGURES), from the runs under ``out``."""
    figs = {
        **comparison_figures(out),
        "probe": probe_table(out),
        "width": width_figure(out),
        "positions": positions_figure(out),
        "own": own_figure(out),
        "cost": cost_figure(out),
        "fair": fair_figure(out),
        "fair_minutes": fair_figure(out, "tuned_minutes"),
        "strong": strong_figure(out),
    }
    assert tuple(figs) == FIGURES, tuple(figs)
    return figs
