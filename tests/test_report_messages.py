"""What `attnlab report` says (issue #32): `--compare A A` is refused, an evaluation that
cannot be paired is skipped in one warning line when another can be, and a report that
succeeds writes nothing on stderr (matplotlib's layout warnings included). Real commands
on hand-made run directories in the on-disk formats (tests/test_report.py)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import yaml
from helpers.runs import add_readings, write_run

from attnlab.report.discover import read_run
from attnlab.report.run_info import RunInfo
from attnlab.report.tables import summary_md
from attnlab.runs.evaldir import STRIP_PRINTS
from attnlab.runs.rundir import RunDir


def two_readers(root):
    a = write_run(root / "a", seed=0, train=(1, 1), lengths=range(1, 3))
    b = write_run(root / "b", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 3))
    add_readings(a, {1: [1, 1], 2: [1, 0]})
    add_readings(b, {1: [1, 0], 2: [0, 0]})
    return a, b


def test_compare_a_variant_with_itself_is_refused(attnlab_run, tmp_path):
    two_readers(tmp_path / "runs")
    for pair in (("attention", "attention"), ("fixed", "fixed")):
        res = attnlab_run("report", tmp_path / "runs", "--out", tmp_path / "r", "--compare",
                          *pair, cwd=tmp_path)  # fmt: skip
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert f"both name the variant '{pair[0]}'" in res.stderr
    assert not (tmp_path / "r").exists()


def test_one_evaluation_that_cannot_be_paired_is_skipped_not_the_whole_compare(
    attnlab_run, tmp_path
):
    a, b = two_readers(tmp_path / "runs")
    for run in (a, b):  # a second evaluation of both runs ...
        ev = RunDir(run).eval_dir("synthetic-greedy").path
        shutil.copytree(ev, ev.parent / "synthetic-beam4")
    meta = RunDir(b).eval_dir("synthetic-beam4").meta_file  # ... on other strips for B
    data = json.loads(meta.read_text())
    data["extra"][STRIP_PRINTS]["2"] = "another eval_seed"
    meta.write_text(json.dumps(data))
    out = tmp_path / "r"
    res = attnlab_run("report", tmp_path / "runs", "--out", out, "--compare", "attention",
                      "fixed", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith("attnlab: warning: --compare: skipped train 1-1, eval synthetic-beam4")
    assert "did not read the same strips at length 2" in line
    rows = pd.read_csv(out / "comparisons.csv", dtype={"length": str})
    assert set(rows["eval"]) == {"synthetic-greedy"}
    total = rows[(rows["length"] == "all") & (rows["split"] == "seen")].iloc[0]
    assert total["exact_diff"] == 0.5  # length 1: A 2/2 right, B 1/2
    assert "not compared: train 1-1, eval synthetic-beam4" in (out / "summary.md").read_text()

    # When no evaluation can be paired, the command is refused with the reason.
    data = json.loads(RunDir(b).eval_dir("synthetic-greedy").meta_file.read_text())
    data["extra"][STRIP_PRINTS]["1"] = "another eval_seed"
    RunDir(b).eval_dir("synthetic-greedy").meta_file.write_text(json.dumps(data))
    res = attnlab_run("report", tmp_path / "runs", "--out", out, "--compare", "attention",
                      "fixed", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "refusing to pair them" in res.stderr


def test_a_report_that_succeeds_is_quiet_on_stderr(attnlab_run, tmp_path):
    """A study's 30 learning rates (an Optuna sweep): the swept plot's many values once made
    matplotlib warn "Tight layout not applied" on stderr."""
    for i in range(30):
        run = write_run(tmp_path / "runs" / f"t{i}", seed=0, acc={8: 0.5 + i / 100})
        config = yaml.safe_load(run.joinpath(".hydra/config.yaml").read_text())
        config["optim"] = {"lr": 0.001 + i * 0.0012345678}
        run.joinpath(".hydra/config.yaml").write_text(yaml.safe_dump(config))
    res = attnlab_run("report", tmp_path / "runs", "--out", tmp_path / "r", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert list((tmp_path / "r").glob("swept_optim_lr*.png"))  # the plot that warned is drawn


def test_reader_and_run_names_are_no_raw_html_in_summary_md(tmp_path):
    run = RunInfo(path=tmp_path, reader="<script>x</script>", problems=["no <b>evaluation</b>"])
    text = summary_md([tmp_path], [run], [], [])
    assert "<script>" not in text and "<b>" not in text
    assert "\\<script\\>x\\</script\\>" in text


def test_an_interrupted_run_without_a_checkpoint_is_not_called_resumable(trained, copy_run):
    run = copy_run(trained["attention"])
    (run / "checkpoints" / "last.pt").unlink()
    status = {"state": "interrupted", "step": 0, "error": "interrupted (Interrupted)"}
    (run / "status.json").write_text(json.dumps(status))
    text = "; ".join(read_run(run).problems)
    assert "resumable" not in text and "no checkpoint yet" in text
