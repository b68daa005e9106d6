"""The report shows what drew each run (metrics.json ``drawn_by``: package versions and the
glyph bank, attnlab.runs.drawn) and says in one line when runs it averages or compares were
drawn from different glyph banks."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.runs import write_run

from attnlab.report import build_report, discover_runs
from attnlab.report.variants import assign_variants, bank_notes
from attnlab.runs import drawn
from attnlab.runs.rundir import RunDir


def _drawn_by(run: Path, bank: str) -> dict:
    """Give a hand-made run the record a training writes, with glyph bank ``bank``."""
    record = {"packages": drawn.package_versions(), "glyph_bank": bank}
    metrics = RunDir(run).metrics_file
    data = json.loads(metrics.read_text(encoding="utf-8"))
    metrics.write_text(json.dumps({**data, "drawn_by": record}), encoding="utf-8")
    return record


def test_runs_drawn_from_other_glyph_banks_are_said_in_one_line(tmp_path):
    runs = {
        "a0": write_run(tmp_path / "runs" / "a0", seed=0, reader="attention"),
        "a1": write_run(tmp_path / "runs" / "a1", seed=1, reader="attention"),
        "f0": write_run(tmp_path / "runs" / "f0", seed=0, reader="fixed"),
    }
    banks = {"a0": "1" * 32, "a1": "2" * 32, "f0": "1" * 32}  # a1 drew other glyphs
    records = {name: _drawn_by(run, banks[name]) for name, run in runs.items()}
    build_report([tmp_path / "runs"], tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    said = [line for line in summary.splitlines() if "glyph banks" in line]
    assert len(said) == 1, said
    assert "trained on lengths 1-8" in said[0] and "2 different glyph banks" in said[0]
    assert "11111111" in said[0] and "22222222" in said[0]
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert ">drawn by</th>" in page and page.count("different glyph banks") == 1
    for record in records.values():  # each run's row: the digest of its own record
        assert f"<code>{drawn.short(record)}</code>" in page
    assert drawn.short(records["a0"]) != drawn.short(records["a1"])

    # One bank for every run (the others recorded none: older runs): nothing to say.
    _drawn_by(runs["a1"], banks["a0"])
    RunDir(runs["f0"]).metrics_file.write_text(
        json.dumps(
            {
                **json.loads(RunDir(runs["f0"]).metrics_file.read_text(encoding="utf-8")),
                "drawn_by": None,
            }
        )
    )
    found = discover_runs([tmp_path / "runs"])
    assign_variants(found)
    assert [r.glyph_bank for r in found] == [banks["a0"], banks["a0"], None]
    assert bank_notes(found) == []
