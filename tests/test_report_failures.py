"""How the report words failures beyond the seen lengths (report.findings, report.failures):
every class named with its share, largest first, and the legend of the classes; an
evaluation written before these classes (old columns stopped_early, skipped_ahead,
other_error) gets its shares recomputed from its readings.csv. Hand-made runs on disk, in the
files' own formats (tests/helpers/runs.py); the report is the real one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.runs import write_run

from attnlab.evaluation.analysis import FAILURE_LEGEND, FAILURE_MODES, OLD_FAILURE_MODES
from attnlab.evaluation.metrics import METRIC
from attnlab.report import build_report, discover_runs
from attnlab.runs.evaldir import DIGESTS
from attnlab.runs.rundir import RunDir

EVAL = "synthetic-greedy"
# (truth, reading) per length; seen 1-2, unseen 3-4
STRIPS = {
    1: [("1", "1"), ("2", "2")],
    2: [("12", "12"), ("34", "3")],  # seen: one stopped short
    3: [("123", "12"), ("456", "4566"), ("789", "789"), ("012", "912")],
    4: [("1234", "134"), ("5678", "67"), ("9012", "0129"), ("3456", "3456")],
}
# unseen (8 strips): stopped short 123->12, 5678->67; skipped a digit 1234->134;
# ran long 456->4566; misread 012->912; other 9012->0129 (a shift); correct 789, 3456
UNSEEN = {"skipped_digit": 1, "stopped_short": 2, "ran_long": 1, "misread": 1, "other": 1}


def old_evaluation(root: Path) -> Path:
    """A run whose evaluation has the old failure columns only, and its readings.csv."""
    acc = {n: sum(t == r for t, r in p) / len(p) for n, p in STRIPS.items()}
    run = write_run(
        root / "run", seed=0, reader="fixed", train=(1, 2), lengths=range(1, 5), acc=acc
    )
    ev = RunDir(run).eval_dir(EVAL)
    rows = [
        {"source": f"test-len{n:02d}#{i}", "length": n, "truth": t, "reading": r,
         "confidence": 0.5, "correct": t == r, "sub": 0, "ins": 0, "del": 0,
         "mode": "other_error" if t != r else "correct", "oracle_reading": ""}
        for n, pairs in STRIPS.items() for i, (t, r) in enumerate(pairs)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(ev.readings, index=False)
    table = pd.read_csv(ev.table_csv, dtype={"length": str})
    counts = {str(n): len(p) for n, p in STRIPS.items()}
    counts["all"] = 0
    table["n"] = [counts[n] for n in table["length"]]
    table.loc[table["length"] == "all", "n"] = [4, 8]  # seen 1-2: 4 strips, unseen 3-4: 8
    for old in OLD_FAILURE_MODES:
        table[old] = 0.125  # what an older attnlab wrote: not read by the report
    table.to_csv(ev.table_csv, index=False)
    meta = json.loads(ev.meta_file.read_text(encoding="utf-8"))
    meta["extra"].pop(DIGESTS)  # an older attnlab recorded no digests of its tables either
    ev.meta_file.write_text(json.dumps(meta), encoding="utf-8")
    return run


def test_an_old_evaluation_gets_the_classes_from_its_readings(tmp_path):
    run = old_evaluation(tmp_path)
    (info,) = discover_runs([run])
    table = info.eval_tables[EVAL].set_index(["length", "split"])
    unseen = table.loc[("all", "unseen")]
    assert {m: unseen[m] for m in FAILURE_MODES} == {m: k / 8 for m, k in UNSEEN.items()}
    assert table.loc[("2", "seen"), "stopped_short"] == 0.5
    assert table.loc[("4", "unseen"), "other"] == 0.25
    assert table.loc[("all", "seen"), "stopped_short"] == 0.25


def test_findings_name_every_class_largest_first_with_the_legend(tmp_path):
    run = old_evaluation(tmp_path)
    build_report([run], tmp_path / "report")
    md = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    (line,) = [x for x in md.splitlines() if x.startswith("- fixed (synthetic-greedy)")]
    said = ", ".join(
        f"{100 * k / 8:.1f}% {METRIC[m].label}"
        for m, k in sorted(UNSEEN.items(), key=lambda kv: -kv[1])
    )
    assert f"beyond the seen lengths 75.0% of strips fail: {said}" in line
    legend = [x for x in md.splitlines() if x.startswith("- Failure classes")]
    assert len(legend) == 1
    for m in FAILURE_MODES:  # each class's words, in the order they are tried
        assert f"{METRIC[m].label}: {FAILURE_LEGEND[m]}" in legend[0]
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "Failure classes (each failed strip in the first that applies)" in page


def test_an_evaluation_whose_readings_do_not_match_its_table_is_not_guessed(tmp_path):
    run = old_evaluation(tmp_path)
    readings = RunDir(run).eval_dir(EVAL).readings
    frame = pd.read_csv(readings, dtype=str)
    frame.iloc[:-1].to_csv(readings, index=False)  # one strip fewer than the table counts
    (info,) = discover_runs([run])
    new = [m for m in FAILURE_MODES if m not in OLD_FAILURE_MODES]
    assert info.eval_tables[EVAL][new].isna().all().all()
    build_report([run], tmp_path / "report")
    assert "Failure classes" not in (tmp_path / "report" / "summary.md").read_text()


@pytest.mark.parametrize("old", OLD_FAILURE_MODES)
def test_old_class_columns_are_not_report_metrics(old):
    assert old not in METRIC or old in FAILURE_MODES
