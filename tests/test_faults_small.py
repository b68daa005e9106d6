"""Faults, round three (issue #24): the smaller points. Classes 1-3 are in
test_faults_round3.py, classes 4-9 in test_faults_refusals.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from run_helpers import TINY

from attnlab.config import EvalConfig
from attnlab.data.folder import read_labels
from attnlab.errors import UserError
from attnlab.report.discover import RunInfo, read_run
from attnlab.report.tables import summary_md


def strip_png(path: Path, inverted: bool = False) -> None:
    a = np.full((32, 60), 230, np.uint8)
    a[8:24, 10:20] = 20
    a[8:24, 30:40] = 20
    Image.fromarray(255 - a if inverted else a).save(path)


@pytest.mark.parametrize("name", ["../x.png", "sub/../../x.png", "ABSOLUTE"])
def test_labels_naming_files_outside_the_folder_are_refused_unless_allowed(name, tmp_path):
    folder = tmp_path / "strips"
    (folder / "sub").mkdir(parents=True)
    strip_png(tmp_path / "x.png")
    name = str(tmp_path / "x.png") if name == "ABSOLUTE" else name
    (folder / "labels.csv").write_text(f"filename,label\n{name},12\n")
    with pytest.raises(UserError, match=r"labels\.csv:2: .* lies outside .*allow_outside"):
        read_labels(folder)
    assert read_labels(folder, allow_outside=True)[0][:2] == (name, "12")


def test_a_record_that_spans_lines_is_reported_at_its_own_line(tmp_path):
    folder = tmp_path / "strips"
    folder.mkdir()
    strip_png(folder / "a b.png")
    text = 'filename,label\n"a b.png","1\n2"\n"a b.png",x9\n'
    (folder / "labels.csv").write_text(text)
    with pytest.raises(UserError, match=r"labels\.csv:2: label '1\\n2'"):
        read_labels(folder)
    (folder / "labels.csv").write_text('filename,label\n"a\nb.png",1\na b.png,x9\n')
    with pytest.raises(UserError, match=r"labels\.csv:2: image file"):
        read_labels(folder)
    (folder / "labels.csv").write_text('filename,label\n"a b.png",12\n"a b.png",x9\n')
    with pytest.raises(UserError, match=r"labels\.csv:3: label 'x9'"):
        read_labels(folder)


def test_eval_lengths_are_capped():
    with pytest.raises(UserError, match=r"eval\.lengths.*64"):
        EvalConfig.check(EvalConfig(lengths=[1, 1000]))
    EvalConfig.check(EvalConfig(lengths=[1, 64]))


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


def test_read_quotes_a_name_with_a_newline_and_folder_warnings_go_to_stderr(
    trained, attnlab_cli, tmp_path
):
    odd = tmp_path / "two\nlines.png"
    strip_png(odd)
    res = attnlab_cli("read", odd, "--run", trained["attention"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == 2 and repr(str(odd)) in res.stdout

    folder = tmp_path / "strips"
    folder.mkdir()
    strip_png(folder / "inv.png", inverted=True)
    (folder / "labels.csv").write_text("filename,label\ninv.png,12\n")
    run = tmp_path / "run"
    shutil.copytree(trained["attention"], run, ignore=shutil.ignore_patterns(".lock"))
    res = attnlab_cli("eval", run, "--folder", folder, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "inverted" in res.stderr and "inverted" not in res.stdout


def test_resuming_to_fewer_steps_than_done_says_so(trained, copy_run, attnlab_cli, tmp_path):
    run = copy_run(trained["attention"])
    log = (run / "train.log").read_bytes()
    res = attnlab_cli("train", *TINY, "train.steps=1", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "nothing to train" in res.stdout + res.stderr
    assert (run / "train.log").read_bytes() == log  # a finished run is left as it was
