"""A label quoted in a one-line error is cut to at most 80 characters (issue #32, messages):
a contradiction (tests/test_leaks.py), and also a label that is not digits, one with
characters outside data.charset, and one too long for the reader. Real exported strips."""

from __future__ import annotations

import pytest
import torch
from PIL import Image, ImageOps
from readers_util import tiny_config

from attnlab.data.folder import export_folder, read_labels
from attnlab.data.sources import check_charset, open_source
from attnlab.data.strips import StripSynth
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
