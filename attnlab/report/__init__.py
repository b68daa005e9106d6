"""The experiment report: runs on disk -> tables, plots and one self-contained HTML page.

The flow: `discover` (run directories -> `run_info`'s RunInfo, with their problems;
`run_evals`: the evaluations that count) -> `variants` (runs grouped into configs; seeds
counted) -> `aggregate` (seed aggregation of every metric) -> `compare` (paired differences
between variants: the pairs `pairs` picks, on strips `same_strips` finds the same) ->
`tables` (summary.csv, summary.md),
`figures` and `swept` (plots), `gallery` (attention maps), `calibration`, `probes`,
`findings`, `explorer` (the explorer's data) -> `html` (the Jinja2 page) -> `build` (all of
it). `reader_styles` gives order, colour and description from the reader registry.

torch is imported only where a registry or a metric declaration needs it (`reader_styles`,
`probes`, `variants.flat_config`'s renamed keys), lazily, when there is something to show
(tests/test_report_imports.py).

With five or more seeds a band is a 95% Student-t interval of the mean; with fewer it is the
min-max range of the seeds (one seed: none), and every table and plot says which one it shows.
"""

from attnlab.report.aggregate import AGG_COLUMNS, MIN_SEEDS_T, aggregate, t_quantile_975
from attnlab.report.build import build_report
from attnlab.report.discover import ReportError, discover_runs
from attnlab.report.run_info import RunInfo

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
