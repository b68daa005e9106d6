"""What an evaluation says and where it goes (issue #57, frictions): the packaged reader's
evaluation says where it is written before its tables (it has no run directory), and a
reader whose weights are not an attention (the CTC readers: path posteriors) shows no
"attention entropy". Real commands: ``attnlab eval pretrained --folder F`` and a tiny CTC
run beside the session's attention run."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from helpers.cli import run_cli
from helpers.groups import plain_folder

pytestmark = pytest.mark.slow  # a tiny training and three evaluations


def test_the_packaged_readers_evaluation_says_where_it_goes(tmp_path):
    folder = plain_folder(tmp_path / "F", 12, seed=5)
    res = run_cli(
        "eval", "pretrained", "--folder", folder, "eval.n_boot=10", "eval.maps_k=0", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    written = [p for p in (tmp_path / "pretrained-32_eval").iterdir()]
    assert len(written) == 1 and (written[0] / "eval.json").is_file()
    before_tables = res.stdout.split("###")[0]
    assert "no run directory" in before_tables and str(written[0]) in before_tables
    helped = run_cli("eval", "--help", cwd=tmp_path)
    assert "pretrained-H_eval/" in " ".join(helped.stdout.split())


def test_no_attention_entropy_for_a_reader_without_attention(trained, tmp_path):
    ctc = tmp_path / "ctc"
    res = run_cli(
        "train", "preset=tiny", "train.progress=plain", "train.threads=1", "model=ctc",
        f"hydra.run.dir={ctc}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    attention = tmp_path / "attention"
    shutil.copytree(trained["attention"], attention, ignore=shutil.ignore_patterns(".lock"))
    folder = plain_folder(tmp_path / "F", 12, seed=5)
    for run, has in ((ctc, False), (attention, True)):
        for extra in ([], ["--folder", folder]):
            res = run_cli("eval", run, *extra, "eval.n_boot=10", "eval.maps_k=0", cwd=tmp_path)
            assert res.returncode == 0, res.stderr
            assert ("attention entropy" in res.stdout) is has
        for ev in (run / "eval").iterdir():
            table = pd.read_csv(ev / "metrics_by_length.csv")
            assert bool(table["entropy"].notna().any()) is has, ev
            assert ("attention entropy" in (ev / "metrics_by_length.md").read_text()) is has
