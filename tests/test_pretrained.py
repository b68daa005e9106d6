"""The packaged readers (``pretrained-32``, ``pretrained-64``): each file is the one
lock-pins.toml pins, each reads the fixed synthetic test strips as its record says, ``attnlab
read --run pretrained`` and ``init_from=pretrained`` use them straight after install (the
latter the one nearest the strips' height), and ``scripts/pretrain.py``'s packaging step
(``attnlab.maintain.packaging.package``) writes a file and record that agree."""

from __future__ import annotations

import csv
import json

import pytest
import tomllib
from helpers.lock import ROOT
from helpers.readers import tiny_config, tiny_reader

from attnlab.config import plain_config
from attnlab.errors import UserError
from attnlab.maintain.packaging import PACKAGED, package, pretrain_keys, reading_check
from attnlab.runs import checkpoint, locate, pretrained
from attnlab.tasks.recipe import HEIGHTS

DEFAULT = pretrained.checkpoint_of(pretrained.DEFAULT)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("height", pretrained.HEIGHTS)
def test_each_packaged_reader_is_the_pinned_one(height):
    pins = tomllib.loads((ROOT / "lock-pins.toml").read_text(encoding="utf-8"))
    name, path = pretrained.name_of(height), pretrained.checkpoint_of(height)
    record = pretrained.record(height)
    assert pretrained.digest(path) == pins[name] == record["sha256"] and record["name"] == name
    assert record["command"].startswith("attnlab train") and all(
        key in record["command"].split() for key in pretrain_keys(height)
    )  # the recipe scripts/pretrain.py --height H runs
    # the height it reads at, as its own checkpoint says (the recipe keeps it when fine-tuning)
    ckpt = checkpoint.load(path)
    assert record["height"] == ckpt.config["data"]["height"] == height
    assert record["reader"] == ckpt.reader and f"model={ckpt.reader}" in PACKAGED[height]


def test_a_packaged_reader_for_each_height_the_recipe_reads_at():
    assert tuple(PACKAGED) == HEIGHTS == pretrained.HEIGHTS


@pytest.mark.parametrize("height", pretrained.HEIGHTS)
def test_it_reads_the_synthetic_test_strips_as_its_record_says(height):
    said = pretrained.record(height)["reads"]
    read = reading_check(pretrained.checkpoint_of(height))
    assert read["strips"] == said["strips"] and read["lengths"] == said["lengths"]
    # another CPU sums floats in another order: at most two strips read otherwise
    assert abs(read["exact_acc"] - said["exact_acc"]) <= 2 / said["strips"] + 1e-9
    assert said["exact_acc"] >= 0.9  # a starting point worth starting from


def test_read_run_pretrained_reads_exported_strips(tmp_path, attnlab_run):
    res = attnlab_run(
        "data", "export", tmp_path / "strips", "--n", "6", "--lengths", "3-6", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    with open(tmp_path / "strips" / "labels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    files = [tmp_path / "strips" / r["filename"] for r in rows]
    res = attnlab_run("read", *files, "--run", "pretrained", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    header, *lines = res.stdout.splitlines()
    assert header.split() == ["file", "reading", "confidence"]
    readings = [line.split()[1] for line in lines]
    assert len(readings) == len(rows)
    right = sum(got == r["label"] for got, r in zip(readings, rows, strict=True))
    assert right >= len(rows) - 1, (readings, [r["label"] for r in rows])


def test_init_from_pretrained_fine_tunes_a_folder(tmp_path, attnlab_run):
    res = attnlab_run(
        "data", "export", tmp_path / "mine", "--n", "40", "--lengths", "2-5", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    res = attnlab_run(
        "train",
        "data=folder",
        f"data.path={tmp_path / 'mine'}",
        "init_from=pretrained",
        *PACKAGED[32],
        "train.steps=2",
        "train.val_every=2",
        "train.batch_size=8",
        "train.threads=1",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    started = checkpoint.load(run / "checkpoints" / "last.pt").init_from
    assert started["path"] == str(DEFAULT) and started["reinitialised"] == []


def test_pretrained_is_the_packaged_reader_nearest_the_height_the_strips_are_read_at():
    at = {h: pretrained.checkpoint_of(h) for h in pretrained.HEIGHTS}
    assert locate.resolve("pretrained") == at[32] == DEFAULT  # no height: the default
    assert locate.resolve("pretrained", "best", 40) == at[32]  # nearer 32 on a log scale
    assert locate.resolve("pretrained", "best", 48) == at[64]  # 64/48 < 48/32
    assert locate.resolve("pretrained", "best", 85) == at[64]  # captchas, cropped
    for h in pretrained.HEIGHTS:  # a name says its height, whatever the strips'
        assert locate.resolve(f"pretrained-{h}", "best", 85) == at[h]
    with pytest.raises(UserError, match="no such run directory or checkpoint: pretrained-48"):
        locate.resolve("pretrained-48")


@pytest.mark.parametrize("word", ["pretrained", "pretrained-64"])
def test_a_folder_named_as_a_packaged_reader_here_is_refused_in_one_line(
    word, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert pretrained.is_packaged(locate.resolve(word))
    (tmp_path / word).mkdir()
    with pytest.raises(UserError, match=f"{word} names a packaged reader, and ./{word} exists"):
        locate.resolve(word)
    for h in pretrained.HEIGHTS:  # results about each go to its own folder here
        got = locate.output_root(pretrained.checkpoint_of(h), "eval")
        assert got == tmp_path / f"pretrained-{h}_eval"


def test_packaging_a_run_writes_a_file_its_record_and_pin_agree_on(tmp_path, trained):
    pins = tmp_path / "pins.toml"
    pins.write_text("tolerance = 0.1\n\n[table]\nx = 1\n", encoding="utf-8")
    record = package(trained["attention"], "attnlab train preset=tiny", pins, tmp_path)
    made = tmp_path / "pretrained-32.pt"  # the tiny run reads at 32 px
    assert record == json.loads((tmp_path / "pretrained-32.json").read_text(encoding="utf-8"))
    assert record["sha256"] == pretrained.digest(made)
    assert record["reads"] == reading_check(made)
    assert tomllib.loads(pins.read_text(encoding="utf-8"))["pretrained-32"] == record["sha256"]
    slim = checkpoint.load(made)
    assert slim.optimizer is None and slim.reader == "attention" and slim.step == record["step"]
    assert record["height"] == slim.config["data"]["height"]
    package(trained["attention"], "again", pins, tmp_path)  # the pin replaced, not added
    assert pins.read_text(encoding="utf-8").count("pretrained-32 =") == 1


def test_a_run_of_a_height_no_reader_is_packaged_at_is_refused_in_one_line(tmp_path):
    cfg = tiny_config("ctc", "data.height=48")
    model = tiny_reader("ctc", "data.height=48")
    run = tmp_path / "run48"
    checkpoint.Checkpoint(model.name, model.state_dict(), plain_config(cfg)).save(
        run / "checkpoints" / "best.pt"
    )
    with pytest.raises(UserError, match="trained at 48 px; packaged readers are of 32, 64 px"):
        package(run, "attnlab train data.height=48", None, tmp_path / "out")
    assert not (tmp_path / "out").exists()
