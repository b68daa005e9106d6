"""Nothing leaks (issue #32, data): duplicates in every source, a data.val_path overlapping the
training strips, resuming on changed data, an LMDB's evaluation name, list files naming files
outside their folder, LMDB counts, NFD labels, very wide images and FIFOs. Real files: strips
exported with ``export_folder``/``export_lmdb``; the resume test runs the real CLI twice."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import unicodedata

import lmdb
import pytest
import torch
from helpers.readers import tiny_config
from PIL import Image, ImageOps

from attnlab.config import DataConfig
from attnlab.data.dedup import image_key
from attnlab.data.recorded import folder_strips
from attnlab.data.sources import open_source
from attnlab.data.split import held_out
from attnlab.data.strip_cache import decode_all
from attnlab.data.strips import StripSynth
from attnlab.data.write_lmdb import export_lmdb
from attnlab.data.write_strips import export_folder
from attnlab.errors import UserError
from attnlab.runs.rundir import RunDir
from attnlab.training.trainer import Trainer

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1"]


@pytest.fixture(scope="module")
def strips():
    """40 strips of lengths 1-3 (seed 7)."""
    gen = torch.Generator().manual_seed(7)
    synth = StripSynth(tiny_config("attention").data)
    return synth.sample(torch.randint(1, 4, (40,), generator=gen), gen)


@pytest.fixture
def src(tmp_path, strips):
    """The 40 strips as a folder (labels.csv) with a list file of the same rows beside it."""
    folder = export_folder(strips, tmp_path / "src")
    rows = [r.split(",") for r in (folder / "labels.csv").read_text().splitlines()[1:]]
    (folder / "list.txt").write_text("".join(f"{n}\t{label}\n" for n, label in rows))
    return folder


def _trainer(tmp_path, path, *extra):
    cfg = tiny_config("attention", "data=folder", f"data.path={path}", *extra)
    return Trainer(cfg, RunDir(tmp_path / "run"))


def _no_leak(source_path, trainer) -> int:
    """Strip by strip: no training strip has the image of a held-out strip (or of a copy of
    one). Returns how many held-out strips, copies included, were checked."""
    source = open_source(source_path)
    d = trainer.cfg.data
    cache = decode_all(source, d.height, d.crop)
    keys = {i: image_key(im) for i, im in zip(cache.ids, cache.images, strict=True)}  # by id
    split = trainer.split
    held = set(split["held_out"]) | set(split["held_out_copies"])
    held_keys = {keys[i] for i in held}
    trained = trainer.stream.cache.ids
    assert not held & set(trained)
    assert not [i for i in trained if keys[i] in held_keys]
    return len(held)


# -- 1. duplicates in every source ---------------------------------------------------------


def test_repeated_list_rows_are_merged_and_held_out_whole(tmp_path, src, caplog):
    lines = (src / "list.txt").read_text().splitlines()
    (src / "twice.txt").write_text("".join(f"{ln}\n{ln}\n" for ln in lines))
    trainer = _trainer(tmp_path, src / "twice.txt", "data.val_share=0.25")
    split = trainer.split
    assert split["strips"] == 80 and split["merged"] == 40
    assert len(split["held_out"]) == 10 and len(split["held_out_copies"]) == 10
    assert split["trained"] == 30 and len(trainer.stream.cache) == 30
    assert sum(len(b) for b in trainer.val_sets.values()) == 10  # each held-out strip once
    warned = [r for r in caplog.records if "merged" in r.getMessage()]
    assert len(warned) == 1 and "40 duplicate strip(s)" in warned[0].getMessage()
    assert _no_leak(src / "twice.txt", trainer) == 10  # the copies share the held-out ids


def test_byte_copies_symlinks_and_dot_paths_are_merged(tmp_path, src):
    names = [r.split(",")[0] for r in (src / "labels.csv").read_text().splitlines()[1:]]
    rows = (src / "labels.csv").read_text().splitlines()
    extra = []
    for i, name in enumerate(names[:12]):  # 4 byte copies, 4 symlinks, 4 './' spellings
        label = rows[i + 1].split(",")[1]
        if i < 4:
            shutil.copyfile(src / name, src / f"copy_{name}")
            extra.append(f"copy_{name},{label}")
        elif i < 8:
            os.symlink(name, src / f"link_{name}")
            extra.append(f"link_{name},{label}")
        else:
            extra.append(f"./{name},{label}")
    (src / "labels.csv").write_text("\n".join(rows + extra) + "\n")
    trainer = _trainer(tmp_path, src, "data.val_share=0.5")
    split = trainer.split
    assert split["merged"] == 8  # './a.png' is counted once already, when labels.csv is read
    assert len(split["held_out"]) == 20 and split["trained"] == 20
    assert _no_leak(src, trainer) == 20 + len(split["held_out_copies"])


def test_repeated_lmdb_records_are_merged(tmp_path, strips):
    doubled = strips.__class__(
        torch.cat([strips.images, strips.images]),
        torch.cat([strips.widths, strips.widths]),
        strips.labels + strips.labels,
        torch.cat([strips.spans, strips.spans]),
    )
    path = export_lmdb(doubled, tmp_path / "lm")
    trainer = _trainer(tmp_path, path, "data.val_share=0.25")
    split = trainer.split
    assert split["source"] == "lmdb" and split["merged"] == 40
    assert len(split["held_out_copies"]) == 10 and split["trained"] == 30
    assert _no_leak(path, trainer) == 20


def test_a_source_without_duplicates_keeps_its_split(tmp_path, src):
    trainer = _trainer(tmp_path, src, "data.val_share=0.25")
    ids = [e.id for e in open_source(src).entries]
    want = [ids[i] for i in held_out(40, 0.25, trainer.cfg.data.eval_seed)]
    assert trainer.split["held_out"] == want and trainer.split["merged"] == 0
    assert trainer.split["held_out_copies"] == []


def test_one_image_with_two_labels_is_a_contradiction(tmp_path, src):
    name = (src / "labels.csv").read_text().splitlines()[1].split(",")[0]
    shutil.copyfile(src / name, src / "other.png")
    long = "7" * 300
    with open(src / "list.txt", "a") as f:
        f.write(f"other.png\t{long}\n")
    with pytest.raises(UserError) as err:
        _trainer(tmp_path, src / "list.txt", "data.skip_long=true")
    msg = str(err.value)
    assert "\n" not in msg and "list.txt:41" in msg and "list.txt:1" in msg
    assert "7" * 80 in msg and "7" * 81 not in msg


# -- 2. data.val_path overlapping the training strips ----------------------------------------


@pytest.mark.parametrize("how", ["same", "dot", "copy"])
def test_a_val_path_overlapping_training_is_refused(tmp_path, src, how, monkeypatch):
    monkeypatch.chdir(tmp_path)
    val = {"same": "src", "dot": "./src/", "copy": "copy"}[how]
    if how == "copy":
        shutil.copytree(src, tmp_path / "copy")
    with pytest.raises(UserError) as err:
        _trainer(tmp_path, "src", f"data.val_path={val}")
    assert "40 of its 40 strips" in str(err.value) and "\n" not in str(err.value)


# -- 3. resuming on changed data -----------------------------------------------------------


def _files(run):
    return {
        p.relative_to(run).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name not in (".lock", "train.log")
    }


@pytest.mark.slow
def test_resuming_on_changed_data_is_refused(tmp_path, src, strips, attnlab_run):
    run = tmp_path / "run"
    args = [*TINY, "model=attention", "data=folder", "data.path=src", "data.val_share=0.25"]
    args.append(f"hydra.run.dir={run}")
    res = attnlab_run("train", *args, "train.steps=2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    first = json.loads((run / "data_split.json").read_text())
    before = _files(run)
    # 4 strips added (4 strips mirrored left to right: new images, the same labels)
    rows = (src / "labels.csv").read_text().splitlines()[1:5]
    with open(src / "labels.csv", "a") as f:
        for name, label in (r.split(",") for r in rows):
            ImageOps.mirror(Image.open(src / name)).save(src / f"new_{name}")
            f.write(f"new_{name},{label}\n")
    # a fresh split of the grown folder would train on old held-out strips
    fresh = _trainer(tmp_path / "fresh", src, "data.val_share=0.25")
    leaked = set(first["held_out"]) & set(fresh.stream.cache.ids)
    assert leaked  # what the refusal prevents, counted strip by strip
    res = attnlab_run("train", *args, "train.steps=4", cwd=tmp_path)
    assert res.returncode == 2 and "4 strip(s) added" in res.stderr, res.stderr
    assert _files(run) == before  # nothing rewritten, data_split.json included
    # the same command from another directory, where data.path=src is another folder
    other = tmp_path / "elsewhere"
    shutil.copytree(src, other / "src")
    res = attnlab_run("train", *args, "train.steps=4", cwd=other)
    assert res.returncode == 2 and f"not the folder {other / 'src'}" in res.stderr, res.stderr
    # labels changed in place (the 4 new rows dropped again first)
    lines = (src / "labels.csv").read_text().splitlines()[:41]
    name, label = lines[1].split(",")
    lines[1] = f"{name},{'1' if label != '1' else '2'}"
    (src / "labels.csv").write_text("\n".join(lines) + "\n")
    res = attnlab_run("train", *args, "train.steps=4", cwd=tmp_path)
    assert res.returncode == 2 and "labels changed in place" in res.stderr, res.stderr
    assert _files(run) == before


# -- 5. an LMDB's evaluation name ------------------------------------------------------------


def test_a_relabelled_lmdb_gets_its_own_evaluation_name(tmp_path, strips):
    from attnlab.evaluation.evaluate import folder_digest

    d = tiny_config("attention").data
    path = export_lmdb(strips, tmp_path / "lm")
    before = folder_digest(path, folder_strips(path, d, d.crop, warn=print)[0])
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        old = txn.get(b"label-000000001").decode()
        txn.put(b"label-000000001", ("1" if old != "1" else "2").encode())
    env.close()
    after = folder_digest(path, folder_strips(path, d, d.crop, warn=print)[0])
    assert before != after


# -- 8. list files naming files outside their folder -----------------------------------------


@pytest.mark.parametrize("outside", ["../x.png", "ABS"])
def test_a_list_file_naming_a_file_outside_its_folder_is_refused(tmp_path, src, outside):
    name = (src / "labels.csv").read_text().splitlines()[1].split(",")[0]
    shutil.copyfile(src / name, tmp_path / "x.png")
    entry = str(tmp_path / "x.png") if outside == "ABS" else outside
    (src / "out.txt").write_text(f"{name}\t1\n{entry}\t7\n")
    for load in (open_source, lambda p: folder_strips(p, DataConfig(), False, warn=print)):
        with pytest.raises(UserError, match=r"out\.txt:2: .* lies outside .*allow_outside"):
            load(src / "out.txt")
    assert len(open_source(src / "out.txt", allow_outside=True)) == 2  # eval.allow_outside


# -- 10. LMDB counts -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "-3", "4x", ""])
def test_a_bad_lmdb_count_names_the_file_the_key_and_the_value(tmp_path, strips, value):
    path = export_lmdb(strips, tmp_path / "lm")
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(b"num-samples", value.encode())
    env.close()
    with pytest.raises(UserError) as err:
        open_source(path)
    assert str(err.value) == (
        f"{path / 'data.mdb'}: num-samples is {value!r}, not a count (ASCII digits 0-9)"
    )


# -- smaller: NFD labels, very wide images, FIFOs ------------------------------------------


def test_an_nfd_label_is_read_as_nfc(tmp_path, src):
    name = (src / "labels.csv").read_text().splitlines()[1].split(",")[0]
    nfd = unicodedata.normalize("NFD", "é1")
    (src / "nfd.txt").write_text(f"{name}\t{nfd}\n")
    assert len(nfd) == 3
    (entry,) = open_source(src / "nfd.txt").entries
    assert entry.label == "é1" and len(entry.label) == 2


def test_a_very_wide_image_is_refused_by_name(tmp_path, src):
    wide = Image.new("L", (20_000, 32), 255)
    for x in (100, 19_900):  # strokes at both ends (a blank image is refused before its width)
        wide.paste(0, (x, 8, x + 4, 24))
    wide.save(src / "wide.png")
    with open(src / "labels.csv", "a") as f:
        f.write("wide.png,5\n")
    with pytest.raises(UserError) as err:
        _trainer(tmp_path, src)
    msg = str(err.value)
    h = tiny_config("attention").data.height
    assert "labels.csv:42" in msg and "'wide.png'" in msg and f"bound of {16 * h}" in msg


def test_a_fifo_is_not_a_regular_file(tmp_path, src):
    os.mkfifo(src / "pipe.png")
    (src / "fifo.txt").write_text("pipe.png\t1\n")
    with pytest.raises(UserError, match="fifo.txt:1: image file 'pipe.png' .* not a regular"):
        open_source(src / "fifo.txt")
    with open(src / "labels.csv", "a") as f:
        f.write("pipe.png,1\n")
    with pytest.raises(UserError, match="labels.csv:42: .* not a regular file"):
        open_source(src)
