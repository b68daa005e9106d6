"""The packaged reader (``pretrained``): the file is the one lock-pins.toml pins, it reads
the fixed synthetic test strips as its record says, ``attnlab read --run pretrained`` and
``init_from=pretrained`` use it straight after install, and ``scripts/pretrain.py``'s
packaging step (``attnlab.maintain.packaging.package``) writes a file and record that agree."""

from __future__ import annotations

import csv
import json

import pytest
import tomllib
from helpers.lock import ROOT

from attnlab.errors import UserError
from attnlab.maintain.packaging import PACKAGED, package, reading_check
from attnlab.runs import checkpoint, locate, pretrained

pytestmark = pytest.mark.slow


def test_the_packaged_reader_is_the_pinned_one():
    pins = tomllib.loads((ROOT / "lock-pins.toml").read_text(encoding="utf-8"))
    record = pretrained.record()
    assert pretrained.digest() == pins["pretrained"] == record["sha256"]
    assert record["command"].startswith("attnlab train") and all(
        key in record["command"] for key in PACKAGED
    )
    # the height it reads at, as its own checkpoint says (the recipe keeps it when fine-tuning)
    ckpt = checkpoint.load(pretrained.CHECKPOINT)
    assert record["height"] == ckpt.config["data"]["height"]


def test_it_reads_the_synthetic_test_strips_as_its_record_says():
    said, read = pretrained.record()["reads"], reading_check(pretrained.CHECKPOINT)
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
        *PACKAGED,
        "train.steps=2",
        "train.val_every=2",
        "train.batch_size=8",
        "train.threads=1",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    started = checkpoint.load(run / "checkpoints" / "last.pt").init_from
    assert started["path"] == str(pretrained.CHECKPOINT) and started["reinitialised"] == []


def test_a_folder_named_pretrained_here_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert locate.resolve("pretrained") == pretrained.CHECKPOINT
    (tmp_path / "pretrained").mkdir()
    with pytest.raises(UserError, match="names the packaged reader, and ./pretrained exists"):
        locate.resolve("pretrained")
    assert locate.output_root(pretrained.CHECKPOINT, "eval") == tmp_path / "pretrained_eval"


def test_packaging_a_run_writes_a_file_its_record_and_pin_agree_on(tmp_path, trained):
    pins = tmp_path / "pins.toml"
    pins.write_text("tolerance = 0.1\n\n[table]\nx = 1\n", encoding="utf-8")
    record = package(trained["attention"], "attnlab train preset=tiny", pins, tmp_path)
    made = tmp_path / "pretrained.pt"
    assert record == json.loads((tmp_path / "pretrained.json").read_text(encoding="utf-8"))
    assert record["sha256"] == pretrained.digest(made)
    assert record["reads"] == reading_check(made)
    assert tomllib.loads(pins.read_text(encoding="utf-8"))["pretrained"] == record["sha256"]
    slim = checkpoint.load(made)
    assert slim.optimizer is None and slim.reader == "attention" and slim.step == record["step"]
    assert record["height"] == slim.config["data"]["height"]
    package(trained["attention"], "again", pins, tmp_path)  # the pin replaced, not added
    assert pins.read_text(encoding="utf-8").count("pretrained =") == 1
