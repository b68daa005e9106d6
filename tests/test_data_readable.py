"""An image that holds nothing to read (blank, all black, a few pixels) is refused by one rule
(``pixels.check_readable``) on every path: training and validation folders, ``attnlab eval
--folder``, ``attnlab read`` (with a run or an export), the Python API. And what attnlab
says about the images it does read: deep samples scaled by their range, file names as a
terminal shows them, light ink on dark paper said once with a count (issue 57)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.images import write_folder
from helpers.readers import strips
from helpers.runs import TINY, one_line_error
from PIL import Image

import attnlab
from attnlab.config import DataConfig
from attnlab.data import pixels
from attnlab.data.notes import INVERTED, Tally, shown
from attnlab.data.recorded import folder_strips
from attnlab.errors import UserError

BLANK = {  # what holds nothing to read, and the words that refuse it
    "white": (np.full((32, 90), 255, np.uint8), "no contrast"),
    "black": (np.zeros((32, 90), np.uint8), "no contrast"),
    "grey": (np.full((32, 90), 128, np.uint8), "no contrast"),
    "3x3": (np.array([[0, 255, 0], [255, 0, 255], [0, 255, 0]], np.uint8), "too small"),
    "2x40": (np.tile(np.array([[0], [255]], np.uint8), (1, 40)), "too small"),
}


def add_blank(folder: Path, kind: str = "white", name: str = "blank.png") -> int:
    """A blank (or tiny) image labelled 5 appended to the folder; its labels.csv line."""
    Image.fromarray(BLANK[kind][0]).save(folder / name)
    with open(folder / "labels.csv", "a") as f:
        f.write(f"{name},5\n")
    return len((folder / "labels.csv").read_text().splitlines())


# --- one rule --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BLANK))
def test_every_loader_refuses_what_holds_nothing_to_read(kind, tmp_path):
    a, words = BLANK[kind]
    Image.fromarray(a).save(tmp_path / "b.png")
    with pytest.raises(UserError, match=rf"b\.png: .*{words}.*nothing to read$"):
        pixels.load_image(tmp_path / "b.png", 32)  # attnlab read, read --onnx, the API by path
    with pytest.raises(UserError, match="nothing to read$"):
        pixels.prepare(a.astype(np.float32) / 255, 32)  # Export.read of an array
    folder = write_folder(tmp_path / "f", n=3)
    line = add_blank(folder, kind)
    with pytest.raises(UserError, match=rf"labels\.csv:{line}: .*blank\.png: .*{words}"):
        folder_strips(folder, DataConfig(), crop=True)  # train, validate, eval --folder


def test_a_blank_strip_in_training_data_is_refused(tmp_path, attnlab_run):
    folder = write_folder(tmp_path / "src")
    line = add_blank(folder)
    res = attnlab_run("train", *TINY, "data=folder", "data.path=src",
                      f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)  # fmt: skip
    one_line_error(res, f"labels.csv:{line}:", "blank.png", "no contrast", "nothing to read")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_blank_strip_in_validation_data_is_refused(tmp_path, attnlab_run):
    write_folder(tmp_path / "src", n=12)
    val = write_folder(tmp_path / "val", n=4, seed=21)
    line = add_blank(val, "black")
    res = attnlab_run("train", *TINY, "data=folder", "data.path=src", "data.val_path=val",
                      f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)  # fmt: skip
    one_line_error(res, f"val/labels.csv:{line}:", "blank.png", "no contrast")


def test_eval_folder_refuses_a_blank_strip(trained, tmp_path, attnlab_run, copy_run):
    run = copy_run(trained["attention"])
    folder = write_folder(tmp_path / "test", n=4, seed=33)
    line = add_blank(folder, "3x3", "tiny.png")
    res = attnlab_run("eval", run, "--folder", folder, "eval.maps_k=0", cwd=tmp_path)
    one_line_error(res, f"labels.csv:{line}:", "tiny.png", "too small to hold a digit")
    assert not (run / "eval").exists() or not any((run / "eval").glob("folder-*"))


def test_read_and_the_api_refuse_blank_files_and_read_the_rest(trained, tmp_path, attnlab_run):
    run = trained["attention"]
    write_folder(tmp_path / "s", n=2)
    for kind in ("white", "black", "3x3"):
        Image.fromarray(BLANK[kind][0]).save(tmp_path / "s" / f"{kind}.png")
    files = [tmp_path / "s" / n for n in ("s00.png", "white.png", "black.png", "3x3.png")]
    res = attnlab_run("read", *files, "--run", run, cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("attnlab: error:")]
    assert [e.split(": ")[2] for e in errors] == [str(f) for f in files[1:]]
    assert all(e.endswith("nothing to read") for e in errors)
    assert [r.split()[0] for r in res.stdout.splitlines()[1:]] == [str(files[0])]
    reader = attnlab.load(run)
    for f in files[1:]:
        with pytest.raises(attnlab.UserError, match="nothing to read$"):
            reader.read(f)
        with pytest.raises(attnlab.UserError, match="nothing to read$"):
            reader.read(Image.open(f))


# --- deep samples ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda a: Image.fromarray(a.astype(np.int32) * 65793),  # 32-bit TIFF, 24-bit values
        lambda a: Image.fromarray(a.astype(np.float32) * 65793),  # float TIFF, 0..2**24-1
        lambda a: Image.fromarray(a.astype(np.int32) * 257),  # 16-bit values, as before
    ],
    ids=["i32-24bit", "f32-24bit", "i32-16bit"],
)
def test_a_32bit_tiff_is_scaled_by_its_range(make, ref8, tmp_path):
    make(ref8).save(tmp_path / "deep.tif")
    got = pixels.load_image(tmp_path / "deep.tif", ref8.shape[0])
    want = pixels.load_image(_png(ref8, tmp_path / "ref.png"), ref8.shape[0])
    assert np.abs(got - want).max() <= 1.5 / 255


def _png(a: np.ndarray, path: Path) -> Path:
    Image.fromarray(a).save(path)
    return path


# --- names -----------------------------------------------------------------------------------


def test_names_are_shown_as_a_terminal_shows_them():
    assert shown(os.fsdecode(b"/d/n\xffme.png")) == "/d/n\\xffme.png"
    assert shown(Path(os.fsdecode(b"caf\xe9.png"))) == "caf\\xe9.png"
    assert shown("café ✓.png") == "café ✓.png"
    assert shown("a\nb.png") == repr("a\nb.png")


def test_read_prints_a_name_that_is_not_utf8_as_a_terminal_does(trained, ref8, tmp_path,
                                                                 attnlab_run):  # fmt: skip
    good = Path(os.fsdecode(os.fsencode(tmp_path) + b"/n\xffme.png"))
    bad = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bl\xe9nk.png"))
    Image.fromarray(ref8).save(good)
    Image.fromarray(BLANK["white"][0]).save(bad)
    res = attnlab_run("read", good, bad, "--run", trained["attention"], cwd=tmp_path)
    assert res.returncode == 2
    assert res.stdout.splitlines()[1].startswith(f"{tmp_path}/n\\xffme.png  ")
    assert f"attnlab: error: {tmp_path}/bl\\xe9nk.png: no contrast" in res.stderr
    assert "\\udc" not in res.stdout + res.stderr


# --- light ink on dark paper: once, with a count ---------------------------------------------


def test_inversion_is_said_once_with_a_count_for_a_folder(tmp_path):
    folder = write_folder(tmp_path / "neg", n=30, invert=True)
    said: list[str] = []
    batch, _ = folder_strips(folder, DataConfig(), crop=True, warn=said.append)
    assert len(batch) == 30
    assert said == [
        f"{folder / 'labels.csv'}:2: {folder / 's00.png'} and 29 more of the 30 images: "
        "light ink on dark paper: each inverted to read it"
    ]


def test_inversion_is_said_once_by_read_eval_and_the_api(trained, tmp_path, attnlab_run,
                                                         copy_run, capsys):  # fmt: skip
    folder = write_folder(tmp_path / "neg", n=6, seed=41, invert=True)
    files = sorted(folder.glob("*.png"))
    res = attnlab_run("read", *files, "--run", trained["attention"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        f"attnlab: warning: {files[0]} and 5 more of the 6 images: light ink on dark paper: "
        "each inverted to read it"
    ]
    run = copy_run(trained["attention"])
    res = attnlab_run(
        "eval", run, "--folder", folder, "eval.n_boot=10", "eval.maps_k=0", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert [ln for ln in res.stderr.splitlines() if "light ink" in ln] == [
        f"attnlab: warning: {folder / 'labels.csv'}:2: {files[0]} and 5 more of the 6 "
        "images: light ink on dark paper: each inverted to read it"
    ]
    capsys.readouterr()
    attnlab.load(trained["attention"]).read([Image.open(f) for f in files])
    assert capsys.readouterr().err.splitlines() == [
        "attnlab: warning: <image 0> and 5 more of the 6 images: light ink on dark paper: "
        "each inverted to read it"
    ]


def test_a_tally_names_the_first_and_passes_other_notes_on():
    said: list[str] = []
    tally = Tally(said.append, by_name=True)
    tally(f"x.csv:12: b.png: {INVERTED}")
    tally("x.csv:3: c.png: 3 frames (pages): only the first is read")
    tally(f"x.csv:3: a.png: {INVERTED}")
    tally(f"x.csv:4: t.png: 9.0 times taller than wide: a strip is one row; {INVERTED}")
    tally.close(5)
    assert said == [
        "x.csv:3: c.png: 3 frames (pages): only the first is read",
        f"x.csv:4: t.png: 9.0 times taller than wide: a strip is one row; {INVERTED}",
        "x.csv:3: a.png and 1 more of the 5 images: light ink on dark paper: each inverted "
        "to read it",
    ]
    tally(f"one.png: {INVERTED}")
    tally.close(1)
    assert said[-1] == f"one.png: {INVERTED}"


def test_blank_strips_never_reach_a_batch():
    """The generator's own strips always have contrast: the rule refuses only images."""
    s = strips([1, 4, 8], seed=2)
    for i in range(len(s)):
        pixels.check_readable(s.images[i, :, : int(s.widths[i])].numpy(), "strip")
    assert torch.all(s.images.amin((1, 2)) < 0.5)
