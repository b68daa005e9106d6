"""A label quoted in a one-line error is cut to at most 80 characters (issue #32, messages):
a contradiction (tests/test_data_leaks.py), and also a label that is not digits, one with
characters outside data.charset, and one too long for the reader. Real exported strips."""

from __future__ import annotations

import pytest
import torch
from helpers.images import strip_png
from helpers.readers import tiny_config
from PIL import Image, ImageOps

from attnlab.data.folder import read_labels
from attnlab.data.sources import check_charset, open_source
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.errors import UserError
from attnlab.runs.rundir import RunDir
from attnlab.training.trainer import Trainer

LONG = "7" * 300


@pytest.fixture
def src(tmp_path):
    """12 strips of lengths 1-3 as a labels.csv folder."""
    gen = torch.Generator().manual_seed(3)
    synth = StripSynth(tiny_config("attention").data)
    return export_folder(synth.sample(torch.randint(1, 4, (12,), generator=gen), gen),
                         tmp_path / "src")  # fmt: skip


def one_line_with_80(err: pytest.ExceptionInfo, char: str) -> str:
    msg = str(err.value)
    assert "\n" not in msg and char * 80 in msg and char * 81 not in msg, msg
    return msg


def add_row(src, label: str, name: str = "new.png") -> None:
    """Another strip, of its own image (a mirrored one: no copy of another strip)."""
    first = (src / "labels.csv").read_text().splitlines()[1].split(",")[0]
    ImageOps.mirror(Image.open(src / first)).save(src / name)
    with open(src / "labels.csv", "a") as f:
        f.write(f"{name},{label}\n")


def test_a_label_that_is_not_digits(src):
    add_row(src, LONG + "x")
    with pytest.raises(UserError) as err:
        read_labels(src)
    assert "labels.csv:14: label '777" in one_line_with_80(err, "7")


def test_a_label_outside_the_charset(src):
    add_row(src, "a" * 300)
    with pytest.raises(UserError) as err:
        check_charset(open_source(src), "0123456789")
    assert "outside data.charset" in one_line_with_80(err, "a")


def test_a_label_too_long_for_the_reader(src, tmp_path):
    add_row(src, LONG)
    seen = ["data.train_lengths=[1,300]", "eval.lengths=[1,8]"]  # 300 digits: a seen length
    cfg = tiny_config("attention", "data=folder", f"data.path={src}", *seen)
    with pytest.raises(UserError) as err:
        Trainer(cfg, RunDir(tmp_path / "run"))
    assert "too long for the attention reader" in one_line_with_80(err, "7")


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
