"""Files of a run that are not what attnlab wrote: a readings.csv edited by hand (eval.json
records the sha256 of the tables it wrote), a malformed readings.csv, a run folder without
its config. Each is said in one line naming the file, by ``attnlab report`` and by
``attnlab.results``; none is counted, none is a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.runs import evaluated_copies

import attnlab
from attnlab.runs.evaldir import DIGESTS

EVAL = "synthetic-greedy"


@pytest.fixture(scope="module")
def evaluated(trained, tmp_path_factory, attnlab_run) -> dict[str, Path]:
    """Both tiny runs copied and evaluated once (few strips)."""
    return evaluated_copies(
        trained, tmp_path_factory.mktemp("evaluated"), attnlab_run, "eval.explore_n=0"
    )


def _copy(run: Path, dest: Path, seed: int = 0) -> Path:
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
    cfg = dest / ".hydra" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("seed: 0", f"seed: {seed}", 1))
    return dest


def _edit(readings: Path, column: str, value: str) -> None:
    frame = pd.read_csv(readings, dtype=str, keep_default_na=False)
    frame.loc[0, column] = value
    frame.to_csv(readings, index=False)


def test_edited_or_malformed_readings_and_a_run_without_config_are_said(
    evaluated, attnlab_run, tmp_path
):
    runs = tmp_path / "runs"
    fixed = _copy(evaluated["fixed"], runs / "fixed")
    edited = _copy(evaluated["attention"], runs / "edited")
    readings = edited / "eval" / EVAL / "readings.csv"
    wrong = pd.read_csv(readings, dtype=str)["correct"].str.lower().eq("false").idxmax()
    frame = pd.read_csv(readings, dtype=str, keep_default_na=False)
    frame.loc[wrong, "correct"] = "True"  # a failure made a success by hand
    frame.to_csv(readings, index=False)
    # written before eval.json recorded digests: read as before; its sub column is broken
    legacy = _copy(evaluated["attention"], runs / "legacy", seed=1)
    meta_file = legacy / "eval" / EVAL / "eval.json"
    meta = json.loads(meta_file.read_text())
    assert set(meta["extra"].pop(DIGESTS)) == {"metrics_by_length.csv", "readings.csv"}
    meta_file.write_text(json.dumps(meta))
    _edit(legacy / "eval" / EVAL / "readings.csv", "sub", "1.5")
    orphan = _copy(evaluated["fixed"], runs / "orphan", seed=2)
    (orphan / ".hydra" / "config.yaml").unlink()

    res = attnlab_run("report", runs, "--out", tmp_path / "report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    said = (res.stdout + res.stderr).splitlines()
    changed = [line for line in said if "was changed after the evaluation wrote it" in line]
    assert len(changed) == 1 and str(readings) in changed[0]
    unread = [line for line in said if str(orphan) in line]
    assert len(unread) == 1 and "no .hydra/config.yaml" in unread[0]
    assert "Traceback" not in res.stderr
    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    attention = summary[summary["reader"] == "attention"]
    assert set(attention["n_seeds"]) == {1}  # the legacy run counts, the edited one does not
    md = (tmp_path / "report" / "summary.md").read_text()
    assert f"{legacy / 'eval' / EVAL / 'readings.csv'}: line 2, column sub: '1.5'" in md
    assert str(orphan) in md

    res = attnlab.results(runs)
    assert any(str(readings) in n and "was changed" in n for n in res.notes)
    assert any(str(orphan) in n and "no .hydra/config.yaml" in n for n in res.notes)
    assert any("column sub: '1.5' is not a whole number" in n for n in res.notes)
    assert set(res.readings["run"]) == {str(fixed.resolve())}  # nothing of the others
    assert str(orphan) not in set(res.runs["run"])
    counted = res.metrics[res.metrics["reader"] == "attention"]["run"]
    assert set(counted) == {str(legacy.resolve())}


def test_a_run_folder_without_its_config_is_named_when_it_is_all_there_is(
    evaluated, attnlab_run, tmp_path
):
    orphan = _copy(evaluated["fixed"], tmp_path / "runs" / "orphan")
    (orphan / ".hydra" / "config.yaml").unlink()
    with pytest.raises(attnlab.UserError, match="no .hydra/config.yaml") as err:
        attnlab.results(tmp_path / "runs")
    assert str(orphan) in str(err.value)
    res = attnlab_run("report", tmp_path / "runs", "--out", tmp_path / "r", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and str(orphan) in res.stderr
