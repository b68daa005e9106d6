"""The report's modules split by concern (issue 58, item 6) and kept so: the record of a run
and the evaluations that count sit below the walk that finds runs; the check that two
evaluations read the same strips below the paired statistics, and those below the choice of
pairs; a tuned study's files below its section; the build above them all. Each module says
what it is for in its docstring."""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parent.parent / "attnlab" / "report"

# From the ground up: a module may import those before it, never one after it.
FLOW = [
    "run_info",  # RunInfo: what the report knows about one run
    "run_evals",  # which of a run's evaluations count
    "discover",  # run directories on disk -> RunInfo
    "same_strips",  # two evaluations read the same strips, or CompareRefused
    "compare",  # the paired statistics of two variants
    "pairs",  # which variants are paired
    "tuned_study",  # an attnlab sweep tuned study as its files say
    "tuned",  # the study's section of the report
    "build",  # the whole report
]


def report_imports(path: Path) -> set[str]:
    """The attnlab.report modules that ``path`` imports (at its top or in a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "attnlab.report":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnlab.report."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {
                a.name.split(".")[2] for a in node.names if a.name.startswith("attnlab.report.")
            }
    return found


def test_the_split_modules_import_down_the_reports_flow():
    upward = {
        name: sorted(report_imports(REPORT / f"{name}.py") & set(FLOW[i + 1 :]))
        for i, name in enumerate(FLOW)
    }
    assert {name: later for name, later in upward.items() if later} == {}


def test_each_split_module_says_what_it_is_for():
    for name in FLOW:
        doc = ast.get_docstring(ast.parse((REPORT / f"{name}.py").read_text()))
        assert doc and len(doc.split()) > 8, name


def test_the_flow_guard_names_an_import_that_runs_up(tmp_path):
    (tmp_path / "m.py").write_text(
        "from attnlab.report.pairs import comparisons\n\n\n"
        "def f():\n    import attnlab.report.build\n    from attnlab.report import tuned\n"
    )
    assert report_imports(tmp_path / "m.py") == {"pairs", "build", "tuned"}
