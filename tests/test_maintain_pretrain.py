"""scripts/pretrain.py: each packaged reader's recipe (the recipe's packaged reader and its
height, on faces, bent glyphs, captcha-like clutter and damage), reproducible from its
seed, packaged into a folder of one's choosing with a record of what it trained on, the
package's own readers and pins left alone; --no-train packages a run only if this same
command trained it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from helpers.cli import run_cli
from helpers.readers import tiny_config

from attnlab.maintain import packaging
from attnlab.runs import checkpoint, pretrained
from attnlab.tasks import recipe

ROOT = Path(__file__).resolve().parent.parent
TINY = ["preset=tiny", "train.threads=1", "train.progress=plain", "train.val_every=4"]


def _script():
    spec = importlib.util.spec_from_file_location("pretrain", ROOT / "scripts" / "pretrain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("height", recipe.HEIGHTS)
def test_the_recipe_is_the_recipes_packaged_reader_and_height_on_the_mixture(height):
    keys = dict(k.split("=", 1) for k in packaging.pretrain_keys(height))
    assert keys["model"] == recipe.reader_at(height, 0.0)  # the shortest budgets' reader
    assert keys["data.height"] == str(height)
    assert float(keys["data.clutter"]) > 0 and float(keys["data.elastic"]) > 0
    assert float(keys["data.jpeg"]) > 0
    drawn_only = not any(
        k.startswith(("data=", "data.path", "data.mix")) for k in packaging.pretrain_keys(height)
    )
    assert drawn_only


def test_the_command_carries_the_seed_and_the_budget_in_minutes():
    script = _script()
    args = script.argparse.Namespace(
        height=64, out="o", seed=3, minutes=8.0, steps=500, overrides=["train.threads=1"]
    )
    cmd = script.command(args)
    keys = packaging.pretrain_keys(64)
    assert cmd[2 : 2 + len(keys)] == list(keys)
    assert {"seed=3", "train.minutes=8.0", "train.steps=500", "train.threads=1"} <= set(cmd)
    assert cmd[-1] == "hydra.run.dir=o"
    args.minutes = None
    assert not any(a.startswith("train.minutes") for a in script.command(args))


def test_pretrain_packages_into_a_folder_records_what_it_trained_on_and_repeats(
    tmp_path, monkeypatch
):
    pins = ROOT / "lock-pins.toml"
    packaged = [pretrained.checkpoint_of(h) for h in pretrained.HEIGHTS]
    before = (pins.read_bytes(), *(p.read_bytes() for p in packaged))
    run, into = tmp_path / "run", tmp_path / "packaged"
    monkeypatch.setattr(sys, "argv", ["pretrain.py"])
    code = _script().main(
        ["--out", str(run), "--into", str(into), "--seed", "5", "--steps", "8", *TINY]
    )
    assert code == 0
    assert (pins.read_bytes(), *(p.read_bytes() for p in packaged)) == before  # left alone
    record = json.loads((into / "pretrained-32.json").read_text(encoding="utf-8"))
    assert record["sha256"] == pretrained.digest(into / "pretrained-32.pt")
    assert record["reader"] == "ctc" and record["height"] == 32
    seen = record["trained_on"]
    assert seen["seed"] == 5 and seen["budget"]["steps"] == 8
    assert seen["data"]["source"] == "synthetic" and seen["data"]["path"] is None
    assert seen["data"]["mix"] == 0.0  # no labelled strip (no captcha, no MNIST) in it
    assert seen["data"]["clutter"] == 0.5 and seen["data"]["elastic"] == 1.5
    assert seen["faces"] >= 60  # the glyph bank's faces
    assert seen["trained"]["steps"] == record["step"] and seen["trained"]["seconds"] >= 0
    # The same seed trains the same weights (CPU, one thread).
    again = tmp_path / "again"
    keys = packaging.pretrain_keys(32)
    args = [*keys, "seed=5", "train.steps=8", *TINY, f"hydra.run.dir={again}"]
    assert run_cli("train", *args, cwd=tmp_path).returncode == 0
    a = checkpoint.load(into / "pretrained-32.pt").model
    b = checkpoint.load(again / "checkpoints" / "best.pt").model
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # --no-train packages the run this same command trained, and no other.
    later = tmp_path / "later"
    same = ["--out", str(run), "--into", str(later), "--seed", "5", "--steps", "8", *TINY]
    assert _script().main(["--no-train", *same]) == 0
    again_record = json.loads((later / "pretrained-32.json").read_text(encoding="utf-8"))
    assert again_record["sha256"] == record["sha256"]
    other = ["--no-train", "--out", str(run), "--into", str(tmp_path / "no"), "--seed", "6"]
    assert _script().main([*other, "--steps", "8", *TINY]) == 2
    assert not (tmp_path / "no").exists()


def test_no_train_names_what_differs_from_the_run(tmp_path):
    script = _script()
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(
        "- model=ctc\n- data.height=64\n- seed=0\n- train.minutes=80\n", encoding="utf-8"
    )
    cmd = ["attnlab", "train", "model=ctc", "data.height=64", "seed=0", "train.minutes=80.0"]
    assert script.trained_otherwise(run, [*cmd, f"hydra.run.dir={run}"]) is None  # 80 = 80.0
    said = script.trained_otherwise(run, [*cmd[:-1], "train.minutes=60"])
    assert said == "train.minutes: 80 there, 60 here"
    said = script.trained_otherwise(run, [*cmd, "train.threads=1"])
    assert said == "train.threads: (none) there, 1 here"
    assert script.trained_otherwise(tmp_path, cmd).startswith("no ")


def test_the_record_names_labelled_strips_and_no_faces_when_none_were_drawn():
    cfg = tiny_config("ctc", "data.clutter=0.5", "seed=2", "train.minutes=3")
    drawn = packaging.trained_on(cfg)
    assert drawn["faces"] >= 60 and drawn["seed"] == 2 and drawn["budget"]["minutes"] == 3
    assert drawn["data"]["font_sizes"] == [26] and "trained" not in drawn
    cfg.data.source, cfg.data.path, cfg.data.clutter = "folder", "strips/train", 0.0
    read = packaging.trained_on(cfg, {"train_seconds": 12.5, "steps": 40})
    assert read["faces"] == 0 and read["data"]["path"] == "strips/train"
    assert read["trained"] == {"seconds": 12.5, "steps": 40}
