"""The report's code path imports no torch (attnlab.report.build: the reader registry, which
does, is consulted lazily): importing the report, its modules and the CLI's report command,
and running that command up to reading runs, costs no torch import (about 2 s of every
``attnlab report``). A module of the report that imports torch at its top, or imports one
that does (the glyph bank's keys from the bank cache, explore.json's reader from the
evaluation that writes it), fails here, named."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import attnlab.report

REPORT_MODULES = sorted(
    f"attnlab.report.{m.name}" for m in pkgutil.iter_modules(attnlab.report.__path__)
)
# What the report reads beside its own modules, also torch-free (a report's explorer reads
# explore.json; the variants name a run's glyph bank by its data keys).
READ_BY_THE_REPORT = ["attnlab.evaluation.explore", "attnlab.data.bank_keys"]

# Runs the imports, then the rest of the check, with a watch on the first import of torch:
# the attnlab modules that were being imported then name the path that pulled it in.
CHECK = """
import importlib.abc, sys, traceback
class Watch(importlib.abc.MetaPathFinder):
    chain = None
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and Watch.chain is None:
            files = [f.filename for f in traceback.extract_stack()]
            Watch.chain = [f.split("attnlab", 1)[1] for f in files if "/attnlab/" in f]
        return None
sys.meta_path.insert(0, Watch())
{imports}
{then}
assert "torch" not in sys.modules, "torch imported by " + " <- ".join(reversed(Watch.chain))
"""


def run_checked(imports: list[str], then: str = "", cwd=None) -> subprocess.CompletedProcess:
    code = CHECK.format(imports="\n".join(f"import {m}" for m in imports), then=then)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_every_report_module_imports_without_torch():
    """All in one process; the path that pulls torch in is named."""
    assert "attnlab.report.variants" in REPORT_MODULES and "attnlab.report.build" in REPORT_MODULES
    then = (
        "import importlib\n"
        f"for name in {[*REPORT_MODULES, *READ_BY_THE_REPORT]!r}:\n"
        "    importlib.import_module(name)\n"
    )
    res = run_checked([], then)
    assert res.returncode == 0, res.stderr.strip().splitlines()[-1]


def test_the_report_command_runs_without_torch_until_it_reads_runs(tmp_path):
    """``attnlab report`` where there is nothing to report on: one line, exit 2, no torch;
    and a run's config read into its variant keys (no reader named) needs none either."""
    (tmp_path / "outputs").mkdir()
    then = (
        "from attnlab.report.variants import flat_config\n"
        "assert flat_config('seed: 3\\ndata:\\n  height: 32\\n')['data.height'] == '32'\n"
        "from attnlab.cli import app\n"
        "try:\n"
        "    app(['report', 'outputs', '--out', 'report'])\n"
        "except SystemExit as stop:\n"
        "    assert stop.code == 2, stop.code\n"
    )
    res = run_checked(["attnlab.cli"], then, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().splitlines() == ["attnlab: error: no runs found under outputs"]
