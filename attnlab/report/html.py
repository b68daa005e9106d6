"""The report's pieces -> index.html, one self-contained page rendered by Jinja2.

All markup lives in ``templates/`` and every inserted value is autoescaped there, so a run
path, an error message or an evaluation name cannot break the page. Images are embedded as
base64 data URIs (the ``data_uri`` filter), so index.html can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from attnlab.report.aggregate import MIN_SEEDS_T
from attnlab.report.calibration import ReaderCalibration
from attnlab.report.figures import Plot
from attnlab.report.gallery import MAX_MAPS_SHOWN, ReaderMaps
from attnlab.report.probes import ProbeSection
from attnlab.report.reader_styles import description, ordered
from attnlab.report.run_info import RunInfo
from attnlab.report.tables import SummaryTable

TEMPLATE = "index.html.j2"


@dataclass
class Section:
    """One training range on the page: its plots by kind, summary table and map gallery."""

    train: str
    plots: dict[str, list[Plot]]
    table: SummaryTable | None  # None: no evaluation of this range counts
    gallery: list[ReaderMaps]
    findings: list[str]  # sentences generated from the numbers (report.findings)
    probes: ProbeSection | None = None  # what `attnlab probe` found (report.probes)
    calibration: list[ReaderCalibration] = field(default_factory=list)  # report.calibration
    # beside the training curves: runs trained to a budget in minutes (report.budgets)
    curve_notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReaderView:
    name: str
    colour: str
    description: str


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def display_path(path: Path | str) -> str:
    """Relative to the working directory when below it (shorter), else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("attnlab.report", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "j2"), default=True),
        undefined=StrictUndefined,  # a misspelt name in a template fails loudly
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["data_uri"] = data_uri
    env.filters["display_path"] = display_path
    env.filters["file_uri"] = lambda p: Path(p).resolve().as_uri()
    return env


def render_index(
    paths: list[Path],
    runs: list[RunInfo],
    sections: list[Section],
    colours: dict[str, str],
    dup_notes: list[str],
    comparisons: list[SummaryTable] | None = None,
    compare_notes: list[str] | None = None,
    method: str = "",
    swept: list[Plot] | None = None,
    explorer=None,  # report.explorer.Explorer: the explorer section's data and code
    data_needs: list[SummaryTable] | None = None,  # report.datacurve: data.limit swept
    data_needs_notes: list[str] | None = None,
    data_needs_method: str = "",
    data_needs_heading: str = "",
    objectives: dict | None = None,  # report.objectives: run path -> its objective
    best: list | None = None,  # report.objectives.Best: the best run of each sweep
    omitted: list | None = None,  # report.omitted.Omitted: sections wanted but not drawn
    cost: dict[str, str] | None = None,  # report.cost: title -> HTML table
    tuned: list | None = None,  # report.tuned.TunedSection: attnlab sweep tuned's studies
) -> str:
    readers = [ReaderView(r, colours[r], description(r)) for r in ordered(colours)]
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            paths=paths,
            runs=runs,
            bad=[r for r in runs if r.problems],
            trains=[s.train for s in sections],
            readers=readers,
            evals=sorted({e for r in runs for e in r.evals}),
            sections=sections,
            dup_notes=dup_notes,
            comparisons=comparisons or [],
            compare_notes=compare_notes or [],
            method=method,
            swept=swept or [],
            min_seeds_t=MIN_SEEDS_T,
            max_maps=MAX_MAPS_SHOWN,
            generated=datetime.now().strftime("%Y-%m-%d %H:%M"),
            explorer=explorer,
            cost=cost or {},
            data_needs=data_needs or [],
            data_needs_notes=data_needs_notes or [],
            data_needs_method=data_needs_method,
            data_needs_heading=data_needs_heading,
            objectives=objectives or {},
            best=best or [],
            best_paths={b.run.path for b in best or []},
            omitted=omitted or [],
            tuned=tuned or [],
        )
    )
