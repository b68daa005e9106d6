"""The experiment report: runs on disk -> tables, plots and one self-contained HTML page.

Modules, one concern each: `discover` (run directories -> RunInfo, with their problems),
`aggregate` (seed aggregation of every metric), `tables` (summary tables, summary.md),
`figures` (matplotlib plots), `gallery` (attention maps), `readers` (order, colour and
description from the reader registry), `html` (the Jinja2 page) and `build` (all of it).

With five or more seeds a band is a 95% Student-t interval of the mean; with fewer it is the
min-max range of the seeds, and every table and plot says which one it shows.
"""

from attnlab.report.aggregate import AGG_COLUMNS, MIN_SEEDS_T, aggregate, t_quantile_975
from attnlab.report.build import build_report
from attnlab.report.discover import ReportError, RunInfo, discover_runs

__all__ = [
    "AGG_COLUMNS",
    "MIN_SEEDS_T",
    "ReportError",
    "RunInfo",
    "aggregate",
    "build_report",
    "discover_runs",
    "t_quantile_975",
]
