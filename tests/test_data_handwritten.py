"""attnlab.data.handwritten (scripts/handwritten_strips.py's composition): composed strips say
what they are composed of (issue #45).
With ``--groups K`` the pool's samples are split into K disjoint groups and each strip is
made of one group's samples, so holding out whole groups (data.val_share) holds out strips
of samples no training strip holds; ``samples.csv`` records each strip's pool, group and
samples. scikit-learn is not an attnlab dependency: its digits are replaced here by 120
drawn glyphs (what is tested is the composition, the files and the split over them).
From issue #60, an npz file of real handwriting (``--npz``): its pools split by sample and
stratified by digit, strips composed as a writer writes, and a bad file refused in one line;
the project's 2,500 MNIST digits (../shared beside the clone, or ATTNLAB_HANDWRITING_NPZ:
skipped where absent) and tiny npz files made here."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.readers import tiny_config
from PIL import Image

from attnlab.data import handwritten, handwritten_npz, handwritten_pools
from attnlab.errors import UserError
from attnlab.io import file_digest
from attnlab.runs.rundir import RunDir
from attnlab.training.trainer import Trainer

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "handwritten_strips.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("handwritten_strips", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _glyphs(pool: str, size: int):
    """120 stand-in samples: random ink blobs (size, 6-10), labels 0-9 in turn."""
    gen = torch.Generator().manual_seed(3 if pool == "train" else 4)
    ink = [torch.rand(size, 6 + i % 5, generator=gen).round() for i in range(120)]
    return ink, [str(i % 10) for i in range(120)]


def _write(script, monkeypatch, out: Path, *args: str) -> list[dict[str, str]]:
    """The script's command line, run in-process on the stand-in glyphs."""
    monkeypatch.setattr(handwritten_pools, "digits", _glyphs)
    assert script.main([str(out), *args]) == 0
    with open(out / "samples.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("by", ["block", "random"])
def test_groups_of_disjoint_samples_held_out_whole(script, monkeypatch, tmp_path, by):
    out = tmp_path / "hw"
    rows = _write(script, monkeypatch, out, "--images", "train", "--lengths", "1-3",
                  "--per-length", "20", "--groups", "6", "--group-by", by)  # fmt: skip
    header = (out / "labels.csv").read_text().splitlines()[0]
    assert header == "filename,label,group"
    samples: dict[str, set[str]] = {}
    for r in rows:
        samples.setdefault(r["group"], set()).update(r["samples"].split())
    assert len(samples) == 6 and all(r["pool"] == "train" for r in rows)
    assert sum(len(s) for s in samples.values()) == len(set().union(*samples.values()))
    spans = sorted((min(map(int, s)), max(map(int, s))) for s in samples.values())
    consecutive = all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert consecutive == (by == "block")  # blocks: each group a run of consecutive samples
    cfg = tiny_config("attention", "data=folder", f"data.path={out}", "data.val_share=0.34")
    trainer = Trainer(cfg, RunDir(tmp_path / "run"))
    split = trainer.split
    assert len(split["held_out_groups"]) == 2
    of = {r["filename"]: set(r["samples"].split()) for r in rows}
    held = set().union(*(of[i] for i in split["held_out"]))
    trained = set().union(*(of[i] for i in trainer.stream.cache.ids))
    assert held and trained and not held & trained  # sample by sample


def test_without_groups_the_group_is_the_pool(script, monkeypatch, tmp_path):
    rows = _write(script, monkeypatch, tmp_path / "hw", "--images", "test", "--lengths", "1-2",
                  "--per-length", "5")  # fmt: skip
    assert {r["group"] for r in rows} == {"test"} and len(rows) == 10
    # a share of one pool's strips would be made of samples trained on: refused, one line
    cfg = tiny_config("attention", "data=folder", f"data.path={tmp_path / 'hw'}")
    with pytest.raises(UserError, match="every strip is in group 'test'.*data.val_path"):
        Trainer(cfg, RunDir(tmp_path / "run"))
    with pytest.raises(UserError, match="--groups 60: 2 samples a group, fewer than the 3"):
        handwritten.write_strips(tmp_path / "few", "test", (1, 3), 5, groups=60, glyphs=_glyphs)


def test_the_script_refuses_in_one_line_with_status_2(script, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(handwritten_pools, "digits", _glyphs)
    out = tmp_path / "few"
    assert script.main([str(out), "--images", "test", "--lengths", "1-3", "--groups", "60"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "handwritten_strips: error: --groups 60: 2 samples a group, fewer than the 3 digits of "
        "the longest strip (distinct samples); give fewer groups\n"
    )
    assert not out.exists()  # nothing written
    assert script.main([str(out), "--images", "test", "--lengths", "3-1"]) == 2
    assert "--lengths 3-1: give LO-HI digits" in capsys.readouterr().err


def test_composition_is_the_seeds_and_a_filled_folder_is_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    said = handwritten.write_strips(a, "train", (2, 3), 4, seed=5, glyphs=_glyphs)
    assert (
        said
        == f"wrote 8 strips (lengths 2-3, train samples, 1 group(s) of disjoint samples) to {a}"
    )
    handwritten.write_strips(b, "train", (2, 3), 4, seed=5, glyphs=_glyphs)
    files = sorted(p.name for p in a.iterdir())
    assert len(files) == 8 + 2 and files == sorted(p.name for p in b.iterdir())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)  # same seed, same bytes
    labels = (a / "labels.csv").read_text().splitlines()[1:]
    assert [len(line.split(",")[1]) for line in labels] == [2, 2, 2, 2, 3, 3, 3, 3]
    with pytest.raises(UserError, match="labels.csv exists: choose another folder"):
        handwritten.write_strips(a, "train", (2, 3), 4, glyphs=_glyphs)


# --- an npz file of real handwriting (issue #60): pools by sample, strips as a writer writes --

NPZ = Path(__file__).resolve().parents[2] / "shared" / "data" / "handwritten_digits.npz"
INK = 128  # a strip's pixel darker than this is ink (paper is 0.85-1.0 of white)


@pytest.fixture(scope="module")
def mnist() -> Path:
    """The project's 2,500 MNIST digits (../shared beside the clone, or
    ATTNLAB_HANDWRITING_NPZ); the tests that need them skip where the file is absent."""
    path = Path(os.environ.get("ATTNLAB_HANDWRITING_NPZ") or NPZ)
    if not path.is_file():
        pytest.skip(f"no handwriting file at {path} (set ATTNLAB_HANDWRITING_NPZ)")
    return path


@pytest.fixture(scope="module")
def folders(mnist, tmp_path_factory) -> dict[str, Path]:
    """A training folder (8 groups) and a test folder (another seed) from the file's pools."""
    root = tmp_path_factory.mktemp("hw_npz")
    handwritten.write_strips(root / "train", "train", (1, 8), 12, seed=0, groups=8, npz=mnist)
    handwritten.write_strips(root / "test", "test", (1, 8), 6, seed=1, npz=mnist)
    return {"train": root / "train", "test": root / "test"}


def _rows(folder: Path, name: str) -> list[dict[str, str]]:
    with open(folder / name, newline="") as f:
        return list(csv.DictReader(f))


def _pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"))


def _fake_npz(path: Path, **arrays) -> Path:
    """A tiny npz of 5 samples of each digit (an inked bar 20 high, 4-11 wide), with
    ``arrays`` replacing or (None) removing its keys."""
    images = np.zeros((50, 28, 28), np.uint8)
    for i in range(50):
        images[i, 4:24, 10 : 14 + i % 8] = 255
    found = {"images": images, "labels": np.repeat(np.arange(10, dtype=np.uint8), 5)}
    found.update(arrays)
    np.savez(path, **{k: v for k, v in found.items() if v is not None})
    return path


def test_npz_pools_are_disjoint_by_sample_and_stratified_by_digit(mnist):
    images, labels = handwritten_npz.load_npz(mnist)
    assert images.shape == (2500, 28, 28) and np.bincount(labels).tolist() == [250] * 10
    pools = handwritten_npz.split_pools(labels, 0)
    train, test = set(pools["train"]), set(pools["test"])
    assert len(train) == 2000 and len(test) == 500 and not train & test
    assert train | test == set(range(2500))
    assert np.bincount(labels[sorted(test)]).tolist() == [50] * 10  # 50 of each digit
    assert handwritten_npz.split_pools(labels, 0) == pools  # fixed by the seed
    assert handwritten_npz.split_pools(labels, 1)["test"] != pools["test"]
    # groups of the training pool: disjoint, each holding every digit alike (label order)
    labs = [str(labels[i]) for i in pools["train"]]
    parts = handwritten.partition(2000, 40, 8, torch.Generator().manual_seed(0), "random", labs)
    assert sorted(j for p in parts for j in p) == list(range(2000))
    assert all(sorted(Counter(labs[j] for j in p).values()) == [5] * 10 for p in parts)


def test_a_test_strip_holds_no_sample_of_any_training_strip(folders, mnist):
    train, test = (_rows(folders[k], "samples.csv") for k in ("train", "test"))
    trained = {s for r in train for s in r["samples"].split()}
    tested = {s for r in test for s in r["samples"].split()}
    assert len(train) == 96 and len(test) == 48 and trained and tested
    assert not trained & tested
    _, labels = handwritten_npz.load_npz(mnist)
    pools = handwritten_npz.split_pools(labels, 0)
    assert {int(s) for s in tested} <= set(pools["test"])
    assert {int(s) for s in trained} <= set(pools["train"])
    of: dict[str, set[str]] = {}  # each group's strips draw on its own samples only
    for r in train:
        of.setdefault(r["group"], set()).update(r["samples"].split())
    assert len(of) == 8 and sum(map(len, of.values())) == len(set().union(*of.values()))
    records = [json.loads((folders[k] / "source.json").read_text()) for k in ("train", "test")]
    assert [r["pool"] for r in records] == ["train", "test"]
    assert {r["split_seed"] for r in records} == {0}
    assert records[0]["sha256"] == records[1]["sha256"] == file_digest(mnist)
    assert records[0]["pool_samples"] == {"train": 2000, "test": 500}


def test_strips_are_dark_on_light_cropped_and_scan_high(folders):
    gaps, edges = [], []
    for folder in folders.values():
        for r in _rows(folder, "labels.csv"):
            px = _pixels(folder / r["filename"])
            assert 40 <= px.shape[0] <= 56  # MARGIN + DIGIT_HEIGHT
            assert np.median(px) > 200 and px.min() < 80  # light paper, dark ink
            inked = np.flatnonzero((px < INK).any(0))
            edges += [inked[0], px.shape[1] - 1 - inked[-1]]
            runs = np.diff(inked) - 1
            gaps += runs[runs > 0].tolist()
    # 4-12 px of paper, then the ink (its faint edge lighter than INK: a few px more); the
    # uncropped 28-px boxes leave a median 18 px at the ends and 25 px between digits
    assert max(edges) <= 20 and np.median(edges) <= 12
    assert np.median(gaps) <= 8  # between digits the writer's gaps, a few px


def test_a_writer_leaves_gaps_that_sometimes_touch():
    """``written`` on two bars of ink: scan heights, the writer's gaps, margins of paper."""
    gen = torch.Generator().manual_seed(0)
    heights, gaps, edges = [], [], []
    for _ in range(400):
        px = handwritten_pools.written([torch.ones(20, 4), torch.ones(20, 4)], gen).numpy()
        heights.append(px.shape[0])
        inked = np.flatnonzero((px < 0.5).any(0))
        gaps.append(int((np.diff(inked) - 1).max()))  # 0: the digits touch or overlap
        edges += [inked[0], px.shape[1] - 1 - inked[-1]]
    assert min(heights) == 40 and max(heights) == 56
    assert 0.02 < np.mean(np.array(gaps) == 0) < 0.2  # sometimes touching, mostly apart
    assert 2 <= np.median(gaps) <= 6 and max(gaps) <= 16
    assert min(edges) >= 4 and max(edges) <= 12


def test_the_labels_are_the_composed_digits(folders, mnist):
    images, labels = handwritten_npz.load_npz(mnist)
    corr = []
    for folder in folders.values():
        rows = {r["filename"]: r for r in _rows(folder, "labels.csv")}
        for s in _rows(folder, "samples.csv"):
            ids = [int(i) for i in s["samples"].split()]
            assert rows[s["filename"]]["label"] == "".join(str(labels[i]) for i in ids)
            assert rows[s["filename"]]["group"] == s["group"] and len(set(ids)) == len(ids)
            if len(ids) > 1:
                continue
            # a one-digit strip's ink is its sample's, cropped and scaled
            px = 1 - _pixels(folder / s["filename"]).astype(np.float32) / 255
            seen, want = _inked(px / px.max()), _inked(images[ids[0]] / 255)
            seen = torch.nn.functional.interpolate(
                torch.from_numpy(seen)[None, None], size=want.shape, mode="bilinear", antialias=True
            )[0, 0]
            corr.append(np.corrcoef(seen.flatten(), want.flatten())[0, 1])
    assert len(corr) >= 12 and min(corr) > 0.8


def _inked(ink: np.ndarray) -> np.ndarray:
    """Ink in [0, 1] cropped to where it is over half strength."""
    ys, xs = np.nonzero(ink > 0.5)
    return ink[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1].astype(np.float32)


def test_the_same_seed_gives_the_same_files(mnist, tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, 3), (b, 3), (c, 4)):
        handwritten.write_strips(out, "test", (2, 3), 3, seed=seed, groups=2, npz=mnist)
    files = sorted(p.name for p in a.iterdir())
    assert len(files) == 6 + 3 and files == sorted(p.name for p in b.iterdir())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert (a / "samples.csv").read_bytes() != (c / "samples.csv").read_bytes()


def test_a_small_npz_makes_strips_end_to_end(script, tmp_path, capsys):
    """No shared file needed: a synthetic npz through the script's command line."""
    npz = _fake_npz(tmp_path / "tiny.npz")
    out = tmp_path / "hw"
    assert script.main([str(out), "--npz", str(npz), "--images", "train", "--lengths", "1-3",
                        "--per-length", "4", "--groups", "2"]) == 0  # fmt: skip
    assert capsys.readouterr().out == (
        f"wrote 12 strips (lengths 1-3, train samples of {npz}, 2 group(s) of disjoint "
        f"samples) to {out}\n"
    )
    rows = _rows(out, "samples.csv")
    assert {r["group"] for r in rows} == {"train-000", "train-001"}
    _, labels = handwritten_npz.load_npz(npz)
    assert not {int(s) for r in rows for s in r["samples"].split()} & set(
        handwritten_npz.split_pools(labels, 0)["test"]
    )  # a fifth of each digit (1 of 5) kept for the test pool
    for r in rows:
        px = _pixels(out / r["filename"])
        assert 40 <= px.shape[0] <= 56 and np.median(px) > 200 and px.min() < 80


def test_held_out_groups_of_npz_strips_share_no_sample_with_training(folders, tmp_path):
    cfg = tiny_config("attention", "data=folder", f"data.path={folders['train']}",
                      "data.val_share=0.25")  # fmt: skip
    trainer = Trainer(cfg, RunDir(tmp_path / "run"))
    assert len(trainer.split["held_out_groups"]) == 2
    of = {r["filename"]: set(r["samples"].split()) for r in _rows(folders["train"], "samples.csv")}
    held = set().union(*(of[i] for i in trainer.split["held_out"]))
    trained = set().union(*(of[i] for i in trainer.stream.cache.ids))
    assert held and trained and not held & trained


BAD = {
    "missing": (None, "no such file"),
    "a folder": ("folder", ": not a file"),
    "not npz": ("text", "not a NumPy .npz file of arrays"),
    "npy": ("npy", "not a NumPy .npz file of arrays"),
    "no labels": ({"labels": None}, "no labels array (it holds images); want images (N, 28, 28)"),
    "no arrays": ({"labels": None, "images": None}, "no images or labels array (it holds nothing)"),
    "float images": ({"images": np.zeros((50, 28, 28))}, "images is float64 (50, 28, 28); want"),
    "small images": ({"images": np.zeros((50, 8, 8), np.uint8)}, "images is uint8 (50, 8, 8)"),
    "short labels": ({"labels": np.zeros(49, np.uint8)}, "labels is uint8 (49,) for 50 images"),
    "float labels": ({"labels": np.zeros(50)}, "labels is float64 (50,) for 50 images"),
    "labels over 9": ({"labels": np.arange(50)}, "labels run 0-49; want digits 0-9"),
    "too few": ({"labels": np.repeat(np.arange(10), 5)[::-1] % 9}, "digit 9 has 0 sample(s)"),
    "blank image": ({"images": np.zeros((50, 28, 28), np.uint8)}, "image 0 holds no ink (50 such)"),
    "dark on light": ({"images": np.full((50, 28, 28), 250, np.uint8)}, "images look dark on"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_npz_is_one_line_with_status_2(script, tmp_path, capsys, case):
    content, says = BAD[case]
    npz = tmp_path / "digits.npz"
    if content == "text":
        npz.write_text("images,labels\n")
    elif content == "folder":
        npz.mkdir()
    elif content == "npy":
        with open(npz, "wb") as f:
            np.save(f, np.zeros((50, 28, 28), np.uint8))
    elif content is not None:
        _fake_npz(npz, **content)
    out = tmp_path / "hw"
    assert script.main([str(out), "--npz", str(npz), "--images", "train"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"handwritten_strips: error: --npz {npz}: ") and err.count("\n") == 1
    assert says in err
    assert not out.exists()  # nothing written


def test_npz_options_that_do_not_fit_are_refused(script, tmp_path, capsys):
    npz, out = _fake_npz(tmp_path / "tiny.npz"), tmp_path / "hw"
    assert script.main([str(out), "--npz", str(npz), "--images", "test", "--height", "32"]) == 2
    assert "--height 32: strips of --npz digits take their own height (40-56 px" in (
        capsys.readouterr().err
    )
    assert script.main([str(out), "--npz", str(npz), "--images", "test", "--groups", "2",
                        "--group-by", "block"]) == 2  # fmt: skip
    assert "--group-by block: an npz file's samples are in label order" in capsys.readouterr().err
    long = ["--images", "test", "--lengths", "10-11"]  # the tiny file's test pool: 10 samples
    assert script.main([str(out), "--npz", str(npz), *long]) == 2
    assert "--lengths: 10 samples in the pool, fewer than the 11 digits" in capsys.readouterr().err
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert script.main([str(out), "--npz", str(npz), "--images", "test"]) == 2
    assert f"{out} holds files: choose a new or empty folder" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]  # left as it was
