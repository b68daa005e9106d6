"""Runs on disk -> summary.csv, summary.md, plot PNGs and a self-contained index.html.

Only reads run directories (through attnlab.rundir) and never imports torch itself; the
reader registry, which does, is consulted lazily for reader order, colours and descriptions.
Every file is written whole or not at all (attnlab.io), with the umask's usual mode.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from attnlab.io import PARTIAL, WriteError, write_bytes, write_text
from attnlab.report.aggregate import aggregate, duplicate_seed_notes, train_groups
from attnlab.report.calibration import calibration
from attnlab.report.discover import ReportError, discover_runs
from attnlab.report.figures import draw_plots
from attnlab.report.findings import findings
from attnlab.report.gallery import gallery
from attnlab.report.html import Section, render_index
from attnlab.report.probes import probe_section, probes_csv, probes_markdown
from attnlab.report.readers import colours
from attnlab.report.tables import summary_md, summary_table

INDEX = "index.html"
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
PROBES_CSV = "probes.csv"  # written only when some run has a probe


def build_report(paths: list[Path], out_dir: Path) -> Path:
    """Write the report of every run under `paths` into `out_dir`; returns index.html's path.

    Raises ReportError when a path does not exist or no run is found under `paths`; a run
    that is broken, partial or stale is listed with its problems, never a crash. The report
    is written all or nothing: built in a hidden folder beside `out_dir`, then swapped in,
    so a failure (a full disk) leaves an earlier report in `out_dir` as it was.
    """
    paths = [Path(p) for p in paths]
    runs = discover_runs(paths)
    if not runs:
        raise ReportError(f"no runs found under {', '.join(str(p) for p in paths)}")
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(
            tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=PARTIAL, dir=out_dir.parent)
        )
    except OSError as err:
        raise WriteError(f"cannot write {out_dir}: {err.strerror or err}") from err
    try:
        _write(paths, runs, work)
        _swap_in(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out_dir / INDEX


def _swap_in(work: Path, out_dir: Path) -> None:
    """Put the finished report `work` in place of `out_dir`. Files of `out_dir` that are not
    the report's (a note someone keeps there) are copied over first, so nothing is lost."""
    os.chmod(work, 0o777 & ~_umask())  # mkdtemp's 0700 would hide it from colleagues
    if not out_dir.exists():
        work.rename(out_dir)
        return
    old = out_dir.parent / f".{out_dir.name}.old{PARTIAL}"
    try:
        for entry in out_dir.iterdir():
            if not (work / entry.name).exists():
                copy = shutil.copytree if entry.is_dir() else shutil.copy2
                copy(entry, work / entry.name)
        shutil.rmtree(old, ignore_errors=True)
        out_dir.rename(old)
        work.rename(out_dir)
    except OSError as err:
        if old.exists() and not out_dir.exists():
            old.rename(out_dir)
        raise WriteError(f"cannot write {out_dir}: {err.strerror or err}") from err
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write(paths: list[Path], runs: list, out_dir: Path) -> Path:
    agg = aggregate(runs)
    palette = colours(r.reader_name for r in runs)
    sections, probe_rows = [], []
    for group in train_groups(runs, agg):
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
            )  # fmt: skip
        )
    dup_notes = duplicate_seed_notes(runs)
    tables = [s.table for s in sections if s.table is not None]
    write_text(out_dir / SUMMARY_CSV, agg.to_csv(index=False))
    said = {s.train: s.findings for s in sections}
    if (probes_text := probes_csv(probe_rows)) is not None:
        write_text(out_dir / PROBES_CSV, probes_text)
    probe_lines = probes_markdown([s.probes for s in sections if s.probes is not None])
    write_text(out_dir / SUMMARY_MD, summary_md(paths, runs, tables, dup_notes, said, probe_lines))
    return write_text(out_dir / INDEX, render_index(paths, runs, sections, palette, dup_notes))
