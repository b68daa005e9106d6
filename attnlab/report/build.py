"""Runs on disk -> summary.csv, summary.md, comparisons.csv, plot PNGs, index.html and
tensorboard/ (HParams: one session per run).

Only reads run directories (through attnlab.runs.rundir) and never imports torch itself; the
reader registry, which does, is consulted lazily for reader order, colours and descriptions.
Every file is written whole or not at all (attnlab.io), with the umask's usual mode; the
report folder is replaced whole (report.swap: at every instant the earlier report or the new
one is whole, and a writer killed midway is settled by the next report).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attnlab.io import csv_text, write_bytes, write_text
from attnlab.report import calibration as calibration_section
from attnlab.report import datacurve
from attnlab.report import explorer as explorer_section
from attnlab.report import swept as swept_section
from attnlab.report.aggregate import TrainGroup, aggregate, long_frame, train_groups
from attnlab.report.budgets import curve_notes, curves_markdown
from attnlab.report.calibration import calibration
from attnlab.report.compare import METHOD
from attnlab.report.cost import cost_view, with_cost
from attnlab.report.datacurve import (
    DATA_NEEDS_CSV,
    data_needs,
    data_needs_markdown,
    data_needs_tables,
)
from attnlab.report.datacurve import HEADING as DATA_NEEDS_HEADING
from attnlab.report.datacurve import METHOD as DATA_NEEDS_METHOD
from attnlab.report.discover import ReportError, discover_runs, unread_runs
from attnlab.report.explorer import explorer
from attnlab.report.figures import PLOTS, draw_plots
from attnlab.report.findings import findings
from attnlab.report.gallery import gallery
from attnlab.report.hparams import TENSORBOARD, write_hparams
from attnlab.report.html import Section, render_index
from attnlab.report.objectives import best_runs, objectives
from attnlab.report.omitted import Omitted, omitted_markdown
from attnlab.report.pairs import comparisons
from attnlab.report.probes import probe_section, probes_csv, probes_markdown
from attnlab.report.reader_styles import colours
from attnlab.report.run_evals import edited_notes
from attnlab.report.swap import Building, report_place
from attnlab.report.swept import swept_plots
from attnlab.report.tables import (
    comparison_tables,
    objectives_markdown,
    summary_md,
    summary_table,
)
from attnlab.report.tuned import EXPECTED_MAX_CSV, expected_max_csv, tuned_section
from attnlab.report.tuned import markdown as tuned_markdown
from attnlab.report.tuned_study import StudyUnreadable, find_studies, trials_train_only
from attnlab.report.variants import assign_variants, bank_notes, counted

INDEX = "index.html"
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
COMPARISONS_CSV = "comparisons.csv"  # written only when some pair of variants was compared
PROBES_CSV = "probes.csv"  # written only when some run has a probe


def build_report(
    paths: list[Path],
    out_dir: Path,
    compare_pair: tuple[str, str] | None = None,
    warn: Callable[[str], object] | None = None,
    say: Callable[[str], object] | None = None,
) -> Path:
    """Write the report of every run under `paths` into `out_dir`; returns index.html's path.

    Through `say`, once the report is in place, the lines a user should read at once: why
    nothing could be paired, and the best run of each sweep by its objective.

    Raises ReportError when a path does not exist, no run is found under `paths`, or
    `compare_pair` names variants that cannot be compared (an evaluation of theirs that
    cannot be paired while another can is skipped, in one line through `warn`); a run that
    is broken, partial, stale or a duplicate seed is listed with its problems, never a
    crash. The report is
    written all or nothing: built in a hidden folder beside `out_dir`, then swapped in
    (report.swap), so a failure (a full disk) leaves an earlier report in `out_dir` as it was,
    and at every instant, even when the writer is killed, the earlier report or the new one
    is whole; what a killed writer left is settled first, before anything else is checked.
    Files of the earlier report that are not the report's are kept. A symlink `out_dir` is
    kept, the report replaced at its target.
    """
    paths = [Path(p) for p in paths]
    out_dir = Path(out_dir)
    final = report_place(out_dir)
    runs = discover_runs(paths)
    if not runs:
        unread = "; ".join(unread_runs(paths))
        raise ReportError(
            f"no runs found under {', '.join(str(p) for p in paths)}"
            + (f" ({unread})" if unread else "")
        )
    with Building(final, shown=out_dir) as building:
        lines = _write(paths, runs, building.folder, compare_pair, warn)
        replaced = building.swap_in(_is_report_file)
    if replaced:  # said first: the earlier report's files are gone (files of your own kept)
        lines = [f"{out_dir}: replaced the earlier report there (files not its own kept)", *lines]
    for line in lines if say is not None else []:
        say(line)
    return out_dir / INDEX


def _is_report_file(name: str) -> bool:
    """A file an earlier report wrote (it is replaced or, when this report has none, dropped:
    an old comparisons.csv or plot must not outlive the runs it described)."""
    kinds = (*PLOTS, "swept")
    own = (INDEX, SUMMARY_CSV, SUMMARY_MD, COMPARISONS_CSV, PROBES_CSV, TENSORBOARD)
    own += (DATA_NEEDS_CSV,)
    own += (EXPECTED_MAX_CSV,)
    kinds += ("tuned",)
    return name in own or (name.endswith(".png") and name.split("_", 1)[0] in kinds)


def _write(
    paths: list[Path],
    runs: list,
    out_dir: Path,
    compare_pair: tuple[str, str] | None,
    warn: Callable[[str], object] | None,
) -> list[str]:
    """Write every file of the report into `out_dir`; returns the lines to say at once."""
    trials_train_only(runs, find_studies(paths))
    values = objectives(runs)
    # unread runs, variants and glyph banks; edited tables are run problems
    dup_notes = [*unread_runs(paths), *assign_variants(runs), *bank_notes(runs)]
    best = best_runs(runs, values)
    agg = aggregate(runs)
    palette = colours(r.reader_name for r in runs)
    groups = train_groups(runs, agg)
    diffs, compare_notes = comparisons(groups, compare_pair, warn)
    sections, probe_rows = _sections(groups, palette, out_dir)
    swept = swept_plots(agg, counted(runs), palette)
    for p in swept:
        write_bytes(out_dir / p.file, p.png)
    tables = [s.table for s in sections if s.table is not None]
    costs = cost_view(runs)  # parameters and MFLOP per variant; runs' cost/cost.csv
    write_text(out_dir / SUMMARY_CSV, csv_text(with_cost(agg, costs.variants)))
    write_hparams(out_dir, counted(runs), long_frame(runs, None))
    if not diffs.empty:
        write_text(out_dir / COMPARISONS_CSV, csv_text(diffs))
    compared = comparison_tables(diffs)
    curve, needs_notes, curve_md = _data_needs(groups, out_dir)
    said = {s.train: s.findings for s in sections}
    tuned = _tuned(out_dir, paths, runs, palette, warn)  # attnlab sweep tuned's studies
    if (probes_text := probes_csv(probe_rows)) is not None:
        write_text(out_dir / PROBES_CSV, probes_text)
    probe_lines = probes_markdown([s.probes for s in sections if s.probes is not None])
    ex = explorer(runs)
    omitted = left_out(groups, agg, runs, sections, bool(curve or needs_notes), ex)
    write_text(
        out_dir / SUMMARY_MD,
        summary_md(
            paths,
            runs,
            tables,
            dup_notes,
            said,
            probe_lines
            + curve_md
            + objectives_markdown(best)
            + omitted_markdown(omitted)
            + costs.markdown()
            + curves_markdown({s.train: s.curve_notes for s in sections})
            + tuned_markdown(tuned),
            compared,
            compare_notes,
            METHOD,
        ),
    )
    page = render_index(
        paths,
        runs,
        sections,
        palette,
        dup_notes,
        compared,
        compare_notes,
        METHOD,
        swept,
        explorer=ex,
        data_needs=curve,
        data_needs_notes=needs_notes,
        data_needs_method=DATA_NEEDS_METHOD,
        data_needs_heading=DATA_NEEDS_HEADING,
        objectives=values,
        best=best,
        omitted=omitted,
        cost=costs.html(),
        tuned=tuned,
    )
    write_text(out_dir / INDEX, page)
    unpaired = _unpaired(compare_notes) if diffs.empty else []
    return _to_say(paths, runs, unpaired, omitted, best, tuned)


def _data_needs(groups: list[TrainGroup], out_dir: Path) -> tuple[list, list[str], list[str]]:
    """data.limit swept: the data-needs curve's CSV written; its tables, notes and Markdown."""
    needs, needs_notes = data_needs(groups)
    if not needs.empty:
        write_text(out_dir / DATA_NEEDS_CSV, csv_text(needs))
    curve = data_needs_tables(needs, {g.train: max(g.seen) for g in groups if g.seen})
    return curve, needs_notes, data_needs_markdown(curve, needs_notes)


def _to_say(paths: list[Path], runs: list, unpaired: list[str], omitted, best, tuned) -> list[str]:
    """The lines said once the report is written: unread runs, edited files, unpaired
    comparisons, what was left out, the best runs and the tuned studies."""
    return [
        *unread_runs(paths),
        *edited_notes(runs),
        *unpaired,
        *(o.line() for o in omitted),
        *(b.line() for b in best),
        *(line for t in tuned for line in t.lines),
    ]


def _sections(groups: list[TrainGroup], palette: dict, out_dir: Path) -> tuple[list, list]:
    """One section of the page per training range, its plots written into ``out_dir``; and
    each range's probe rows (probes.csv)."""
    sections, probe_rows = [], []
    for group in groups:
        plots = draw_plots(group, palette)
        for p in (p for kind in plots.values() for p in kind):
            write_bytes(out_dir / p.file, p.png)
        table = summary_table(group) if not group.agg.empty else None
        probes, rows = probe_section(group)
        probe_rows.append(rows)
        sections.append(
            Section(
                group.train,
                plots,
                table,
                gallery(group),
                findings(group),
                probes,
                calibration(group),
                curve_notes(group.runs),
            )
        )
    return sections, probe_rows


def left_out(groups, agg, runs, sections, needs_drawn: bool, ex) -> list[Omitted]:
    """The optional sections the runs look like they want but that cannot be drawn, each
    with its own module's reason (report.omitted)."""
    whys = swept_section.left_out(agg, counted(runs))
    out = [Omitted(swept_section.SECTION, why) for why in whys]
    calibrated = any(s.calibration for s in sections)
    more = [
        (datacurve.SECTION, datacurve.left_out(groups, needs_drawn)),
        (calibration_section.SECTION, calibration_section.left_out(groups, calibrated)),
        (explorer_section.SECTION, explorer_section.left_out(ex, runs)),
    ]
    return out + [Omitted(section, why) for section, why in more if why]


def _unpaired(compare_notes: list[str]) -> list[str]:
    """When nothing was paired: why, in one line."""
    if not compare_notes:
        return []
    more = len(compare_notes) - 1
    return [
        f"no paired differences: {compare_notes[0]}"
        + (f" ({more} more reason(s) in summary.md)" if more else "")
    ]


def _tuned(out_dir: Path, paths: list[Path], runs: list, palette: dict, warn) -> list:
    """The sections of the ``attnlab sweep tuned`` studies under ``paths``, their plots and
    expected_max.csv written into ``out_dir`` (report.tuned); an unreadable study is left
    out, said through ``warn``."""
    tuned = []
    for root in find_studies(paths):
        try:
            tuned.append(tuned_section(root, runs, palette))
        except StudyUnreadable as err:
            if warn is not None:
                warn(str(err))
    for t in tuned:
        write_bytes(out_dir / t.plot.file, t.plot.png)
    if tuned:
        write_text(out_dir / EXPECTED_MAX_CSV, csv_text(expected_max_csv(tuned)))
    return tuned
