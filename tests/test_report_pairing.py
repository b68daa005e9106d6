"""Which reader for my strips? (issue #57): two runs that read one folder at other heights
read the same strips, and the report pairs them strip by strip; a folder whose strips
changed between the two evaluations is still refused. Real runs: the session's tiny
attention run (data.height=32) and one trained here at data.height=24, each evaluated with
``attnlab eval RUN --folder F``, then ``attnlab report``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.cli import run_cli
from helpers.groups import plain_folder

from attnlab.runs.evaldir import STRIP_PRINTS, STRIPS_BY

pytestmark = pytest.mark.slow  # a tiny training and four evaluations


@pytest.fixture(scope="module")
def two_heights(trained, tmp_path_factory):
    """``runs/h32`` (a copy of the session's attention run) and ``runs/h24``, one seed each."""
    root = tmp_path_factory.mktemp("pairing")
    shutil.copytree(
        trained["attention"], root / "runs" / "h32", ignore=shutil.ignore_patterns(".lock")
    )
    res = run_cli(
        "train", "preset=tiny", "train.progress=plain", "train.threads=1", "model=attention",
        "data.height=24", f"hydra.run.dir={root / 'runs' / 'h24'}", cwd=root,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return root


def _eval_folder(root: Path, folder: Path) -> str:
    """Both runs evaluated on ``folder``; the evaluation's name (the same for both)."""
    names = set()
    for run in ("h32", "h24"):
        res = run_cli(
            "eval",
            root / "runs" / run,
            "--folder",
            folder,
            "eval.n_boot=10",
            "eval.maps_k=0",
            cwd=root,
        )
        assert res.returncode == 0, res.stderr
        names |= {p.name for p in (root / "runs" / run / "eval").glob("folder-*")}
    assert len(names) == 1, names
    return names.pop()


def _report(root: Path, out: str) -> pd.DataFrame:
    res = run_cli("report", root / "runs", "--out", root / out, cwd=root)
    assert res.returncode == 0, res.stderr
    path = root / out / "comparisons.csv"
    return pd.read_csv(path, dtype={"length": str}) if path.is_file() else pd.DataFrame()


def test_one_folder_read_at_two_heights_is_paired(two_heights):
    root = two_heights
    folder = plain_folder(root / "F", 24, seed=5)
    name = _eval_folder(root, folder)
    metas = [
        json.loads((root / "runs" / r / "eval" / name / "eval.json").read_text())
        for r in ("h32", "h24")
    ]
    assert all(m["extra"][STRIPS_BY] == "content" for m in metas)
    assert metas[0]["extra"][STRIP_PRINTS] == metas[1]["extra"][STRIP_PRINTS]
    rows = _report(root, "report")
    rows = rows[rows["eval"] == name]
    per_length = rows[~rows["length"].isin(["all"])]
    assert len(rows) and per_length["n_strips"].sum() == 24  # every strip of F, paired once
    assert {"attention · data.height=24", "attention · data.height=32"} == {
        *rows["a"],
        *rows["b"],
    }


def test_a_folder_changed_between_two_evaluations_is_not_paired(two_heights):
    """Same file names and labels (so the same evaluation name), one image replaced by
    another strip between the two runs' evaluations: not the same strips, not paired."""
    root = two_heights
    folder = plain_folder(root / "G", 24, seed=6)
    res = run_cli(
        "eval",
        root / "runs" / "h32",
        "--folder",
        folder,
        "eval.n_boot=10",
        "eval.maps_k=0",
        cwd=root,
    )
    assert res.returncode == 0, res.stderr
    first = (folder / "labels.csv").read_text().splitlines()[1].split(",")[0]
    elsewhere = plain_folder(root / "elsewhere", 1, seed=99)
    theirs = (elsewhere / "labels.csv").read_text().splitlines()[1].split(",")[0]
    shutil.copyfile(elsewhere / theirs, folder / first)  # another strip under its name
    res = run_cli(
        "eval",
        root / "runs" / "h24",
        "--folder",
        folder,
        "eval.n_boot=10",
        "eval.maps_k=0",
        cwd=root,
    )
    assert res.returncode == 0, res.stderr
    name = next(p.name for p in (root / "runs" / "h24" / "eval").glob("folder-G-*"))
    rows = _report(root, "report-g")
    assert rows.empty or not (rows["eval"] == name).any()
    said = (root / "report-g" / "summary.md").read_text()
    assert "did not read the same strips" in said and name in said
