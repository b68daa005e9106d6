"""attnlab.data.handwritten (scripts/handwritten_strips.py's composition): composed strips say
what they are composed of (issue #45).
With ``--groups K`` the pool's samples are split into K disjoint groups and each strip is
made of one group's samples, so holding out whole groups (data.val_share) holds out strips
of samples no training strip holds; ``samples.csv`` records each strip's pool, group and
samples. scikit-learn is not an attnlab dependency: its digits are replaced here by 120
drawn glyphs (what is tested is the composition, the files and the split over them)."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest
import torch
from helpers.readers import tiny_config

from attnlab.data import handwritten
from attnlab.errors import UserError
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
    monkeypatch.setattr(handwritten, "digits", _glyphs)
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
    monkeypatch.setattr(handwritten, "digits", _glyphs)
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
