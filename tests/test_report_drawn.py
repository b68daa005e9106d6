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


def _set(run: Path, key: str, value) -> None:
    """Edit one key of a hand-made run's composed config (as a sweep over it would write)."""
    from omegaconf import OmegaConf

    path = run / ".hydra" / "config.yaml"
    cfg = OmegaConf.load(path)
    OmegaConf.update(cfg, key, value, force_add=True)
    OmegaConf.save(cfg, path)


def test_the_glyph_bank_note_names_the_cause_the_records_show(tmp_path):
    """Issue 50 item 7: a sweep over data.variants on one set of packages drew two banks
    because of the config key, not 'other package versions'; other packages are named."""
    a = write_run(tmp_path / "runs" / "a", seed=0, reader="attention")
    b = write_run(tmp_path / "runs" / "b", seed=1, reader="attention")
    _set(a, "data.variants", 2)
    _set(b, "data.variants", 3)
    _drawn_by(a, "1" * 32)
    _drawn_by(b, "2" * 32)
    found = discover_runs([tmp_path / "runs"])
    assign_variants(found)
    (note,) = bank_notes(found)
    assert "2 different glyph banks" in note and "differ in data.variants" in note
    assert "package versions" not in note
    record = json.loads(RunDir(b).metrics_file.read_text(encoding="utf-8"))
    record["drawn_by"]["packages"]["pillow"] = "0.0.1"
    RunDir(b).metrics_file.write_text(json.dumps(record), encoding="utf-8")
    _set(b, "data.variants", 2)
    found = discover_runs([tmp_path / "runs"])
    assign_variants(found)
    (note,) = bank_notes(found)
    assert "other package versions drew other glyphs (pillow 0.0.1, " in note
    assert "data.variants" not in note


def test_an_edited_drawn_by_is_named_and_the_rest_reported(tmp_path):
    """Issue 50 item 18: a glyph_bank written as a list, number or table killed the report."""
    runs = [write_run(tmp_path / "runs" / f"r{i}", seed=i) for i in range(4)]
    for run, bank in zip(runs, [["x"], 5, {"a": 1}, "1" * 32], strict=True):
        _drawn_by(run, bank)
    build_report([tmp_path / "runs"], tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    said = [line for line in summary.splitlines() if "unreadable record of what drew it" in line]
    assert len(said) == 3, said
    assert any("glyph_bank is a list" in s for s in said)
    assert any("glyph_bank is a number (5)" in s for s in said)
    assert any("glyph_bank is a table" in s for s in said)
    assert (tmp_path / "report" / "index.html").is_file()
