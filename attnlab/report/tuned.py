"""The report's "Equal tuning budgets" section: what ``attnlab sweep tuned`` leaves.

The study as its files say (``tuned.json``, each reader's ``trials.csv``, where its
best trial's re-runs are) is ``report.tuned_study``'s. From those files only:

- the expected best validation objective against the number of trials n, per reader, by the
  unbiased and Dodge's estimators with their bootstrap bands (``report.expected_max``):
  ``expected_max.csv`` and one plot with every reader;
- the search space and the budget per trial (steps, or minutes with steps the ceiling:
  ``tune.minutes``), what the trials and the re-runs spent in minutes and steps
  (``report.budgets``), then one line per other reader against the baseline reader (the
  registry's, as the report's paired differences take it): what holds at each n (ahead,
  level within the bands, equal) and where the curves cross; beside it, what the files say
  of the search (``report.tuned_checks``): a best trial at the edge of an axis, trials still
  improving, an edited ``trials.csv`` (each trial's ``objective.json`` is the truth), a
  trial folder gone, unequal budgets;
- the re-run winners paired strip by strip (``report.compare``): A − B after equal tuning, at
  the seen lengths, the longest seen length and the unseen lengths, with the budget each
  re-run had (in minutes and steps). A study at equal steps and one at equal minutes are
  two sections, and with more than one study the page sets their lines side by side.
"""

from __future__ import annotations

import io
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnlab.evaluation.metrics import TOTAL
from attnlab.report.budgets import Spent, ended_text, read_spent, spent_text
from attnlab.report.compare import Side, compare
from attnlab.report.expected_max import COLUMNS, crossing_line, expected_max_frame
from attnlab.report.figures import Plot, file_name
from attnlab.report.reader_styles import baseline, ordered
from attnlab.report.run_info import RunInfo
from attnlab.report.same_strips import CompareRefused
from attnlab.report.tables import signed_points
from attnlab.report.tuned_checks import edge_lines, improving_lines, setup_line
from attnlab.report.tuned_study import TunedStudy, read_study

EXPECTED_MAX_CSV = "expected_max.csv"
DASHES = {"unbiased": "-", "dodge": "--"}


@dataclass
class TunedSection:
    study: TunedStudy
    frame: pd.DataFrame  # expected_max.csv rows
    plot: Plot
    lines: list[str]  # the crossing lines, then the paired differences
    diffs: pd.DataFrame = field(default_factory=pd.DataFrame)  # comparisons.csv rows
    notes: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)  # the paired lines (also in ``lines``)


def _reference(readers: list[str]) -> str:
    order = ordered(readers)
    ref = baseline()
    return ref if ref in order else order[0]


def tuned_section(root: Path, runs: list[RunInfo], colours: dict[str, str]) -> TunedSection:
    """The section of one study; ``runs``: the report's runs (the re-runs among them)."""
    study = read_study(root)
    frame = expected_max_frame(study.scores, study.maximize)
    ref = _reference(study.readers)
    others = [r for r in ordered(study.readers) if r != ref]
    # A - B as the report's paired differences: the baseline reader against each other one
    lines = [
        setup_line(
            study.axes, study.dropped, study.readers, study.budget, study.trials, study.sampler
        )
    ]
    winners = _winners(study, runs)
    lines += _spent_lines(study, {r: _winner_spent(rs) for r, rs in winners.items()})
    lines += [crossing_line(frame, ref, other, study.maximize) for other in others]
    lines += edge_lines(study.best, study.axes)  # beside the verdict: was the search done?
    lines += improving_lines(study.trial_runs, study.objective, study.budget)
    lines += study.checks
    diffs, notes, verdicts = [], [], []
    for other in others:
        got = _winners_diff(winners, ref, other)
        if isinstance(got, str):
            notes.append(got)
        else:
            diffs.append(got)
            spent = {r: _winner_spent(winners[r]) for r in (ref, other)}
            verdicts.append(_diff_line(got, ref, other, _budget_words(spent, ref, other)))
    plot = _plot(study, frame, colours)
    table = pd.concat(diffs, ignore_index=True) if diffs else pd.DataFrame()
    return TunedSection(study, frame, plot, lines + verdicts, table, notes, verdicts)


def _winners(study: TunedStudy, runs: list[RunInfo]) -> dict[str, list[RunInfo]]:
    """Each reader's re-runs of its best trial among the report's runs (sound ones)."""
    return {
        r: [run for run in runs if _below(run.path, study.winners[r]) and not run.unsound]
        for r in study.readers
        if r in study.winners
    }


def _winner_spent(runs: list[RunInfo]) -> list[Spent]:
    return [run.spent for run in runs if run.spent is not None]


def _spent_lines(study: TunedStudy, winners: dict[str, list[Spent]]) -> list[str]:
    """What the trials and the re-runs spent, per reader, in steps and minutes (median
    [range]); and, for a budget in minutes, the runs that something else ended first."""
    trials = {
        r: [got for d in t.dirs if (got := read_spent(d)) is not None]
        for r, t in study.trial_runs.items()
    }
    parts = []
    for what, spent in (("trials", trials), ("re-runs", winners)):
        each = [f"{r} {spent_text(spent[r])}" for r in ordered(spent) if spent.get(r)]
        if each:
            parts.append(f"{what}: {', '.join(each)}")
    if not parts:
        return []
    lines = [f"what they spent (median [range]): {'; '.join(parts)}"]
    every = [s for by in (trials, winners) for got in by.values() for s in got]
    if study.minutes is not None and (ended := ended_text(every)):
        lines.append(
            f"budget in minutes: {ended} (train.steps={study.steps} is the ceiling; raise it "
            "for a comparison at equal minutes)"
        )
    return lines


def _budget_words(spent: dict[str, list[Spent]], a: str, b: str) -> str:
    """ " at 2 minutes a run (a 120 steps, b 300)" or " at 500 steps a run (a 1.2 minutes,
    b 0.9)": the re-runs' budget as given, and what each reader's took of the other unit
    (medians); "" when their records say nothing."""
    every = spent[a] + spent[b]
    if not every or not spent[a] or not spent[b]:
        return ""
    minutes = sorted({s.minutes for s in every if s.minutes is not None})
    if minutes:
        given = "/".join(f"{m:g}" for m in minutes) + " minutes"
        took = [f"{statistics.median(s.steps_taken for s in spent[r]):.0f}" for r in (a, b)]
        return f" at {given} a run ({a} {took[0]} steps, {b} {took[1]}"
    steps = sorted({s.steps for s in every if s.steps is not None})
    given = " at " + "/".join(map(str, steps)) + " steps a run" if steps else ""
    took = [f"{statistics.median(s.minutes_spent for s in spent[r]):.3g}" for r in (a, b)]
    return f"{given} ({a} {took[0]} minutes, {b} {took[1]}"


def _winners_diff(winners: dict[str, list[RunInfo]], a: str, b: str) -> pd.DataFrame | str:
    """comparisons.csv rows of a's re-runs − b's (each reader's best trial, new seeds)."""
    mine = {r: winners.get(r, []) for r in (a, b)}
    shared = [set(run.evals) for run in mine[a] + mine[b]]
    evals = sorted(set.intersection(*shared)) if mine[a] and mine[b] else []
    if not evals:
        return f"{a} - {b} after equal tuning: no evaluated re-runs of both best trials yet"
    first = mine[a][0]
    try:
        return compare(
            first.train, evals[0], first.seen_lengths, Side(a, mine[a]), Side(b, mine[b])
        )
    except CompareRefused as err:
        return f"{a} - {b} after equal tuning: {err}"


def _below(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _points(row: pd.Series) -> str:
    return signed_points(*(float(row[f"exact_diff{s}"]) for s in ("", "_lo", "_hi")))


def _diff_line(rows: pd.DataFrame, a: str, b: str, budget: str = "") -> str:
    """'a − b after equal tuning at BUDGET (a's and b's other unit; ...): +X [lo, hi] at seen,
    ... at TOP, ... unseen' (exact, points); ``budget`` from ``_budget_words``."""
    total = rows[rows["length"].astype(str) == TOTAL]
    parts = []
    seen = total[total["split"] == "seen"]
    if not seen.empty:
        parts.append(f"{_points(seen.iloc[0])} at seen")
    by_length = rows[(rows["length"].astype(str) != TOTAL) & (rows["split"] == "seen")]
    if not by_length.empty:
        top = by_length.loc[by_length["length"].astype(int).idxmax()]
        parts.append(f"{_points(top)} at {int(top['length'])}")
    unseen = total[total["split"] == "unseen"]
    if not unseen.empty:
        parts.append(f"{_points(unseen.iloc[0])} unseen")
    pairs = int(rows["n_pairs"].iloc[0])
    opened = f"{budget}; " if budget else " ("
    return (
        f"{a} − {b} after equal tuning{opened}exact-string accuracy, points, 95% paired "
        f"interval, {pairs} seed pair(s), eval {rows['eval'].iloc[0]}): {', '.join(parts)}"
    )


def _plot(study: TunedStudy, frame: pd.DataFrame, colours: dict[str, str]) -> Plot:
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    for reader in ordered(study.readers):
        rows = frame[frame["variant"] == reader]
        for estimator, dash in DASHES.items():
            r = rows[rows["estimator"] == estimator]
            colour = colours.get(reader, "0.3")
            ax.plot(
                r["n"],
                r["expected"],
                dash,
                color=colour,
                marker="o",
                ms=3,
                label=f"{reader} ({estimator})",
            )
            if estimator == "unbiased":
                ax.fill_between(r["n"], r["lo"], r["hi"], color=colour, alpha=0.15, lw=0)
    ax.set_xlabel("trials n (random draws of the study's trials)")
    best = "highest" if study.maximize else "lowest"
    ax.set_ylabel(f"expected {best} {study.objective}")
    n_max = int(frame["n"].max()) if not frame.empty else 1
    ax.set_xticks(np.arange(1, n_max + 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    title = f"Expected best {study.objective} against trials ({study.sampler} sampler)"
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    name = file_name("tuned", study.root.name)
    return Plot(name, f"{title}; band: 95% bootstrap of the unbiased estimator", buf.getvalue())


def expected_max_csv(sections: list[TunedSection]) -> pd.DataFrame:
    """expected_max.csv of every study: its rows, with the study's root when there are more."""
    frames = [s.frame for s in sections]
    if len(sections) > 1:
        frames = [s.frame.assign(study=str(s.study.root)) for s in sections]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def markdown(sections: list[TunedSection]) -> list[str]:
    """summary.md's lines of the section."""
    out = []
    for s in sections:
        out += ["", f"## Equal tuning budgets ({s.study.root}): {s.study.budget}", ""]
        out += [*(f"- {line}" for line in [*s.lines, *s.notes]), ""]
    if len(sections) > 1:  # a study at equal steps beside one at equal minutes
        out += ["", "## Equal tuning budgets side by side", ""]
        out += [f"- {s.study.root} ({s.study.budget}): {v}" for s in sections for v in s.verdicts]
    return out
