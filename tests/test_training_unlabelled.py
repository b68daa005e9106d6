"""Self-training on strips nobody labelled (``data.unlabelled=DIR``: attnlab.data.unlabelled,
attnlab.training.selftrain): each round's threshold and strips taken recorded, the
unlabelled strips refused in any held-out or test set, a resume exact, bad values refused.

The runs start from the packaged reader (``init_from=pretrained``), which reads the tiny
strips right from step 0: its confident readings reach the 99% validation precision, so a
round takes strips after a few steps (a reader trained from scratch for seconds reads none).
"""

from __future__ import annotations

import csv
import json
import logging
import shutil

import pytest
import torch
from helpers.readers import tiny_config

from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.runs.rundir import RunDir
from attnlab.tasks.compose import compose
from attnlab.training import session
from attnlab.training.selftrain import PRECISION, threshold
from attnlab.training.trainer import Trainer


@pytest.fixture(scope="module")
def strips(tmp_path_factory):
    """80 labelled strips (lengths 1-3) and 40 others: ``labelled`` (labels.csv),
    ``unlabelled`` (the 40 images, no labels.csv) and ``named`` (the 40 with their labels)."""
    root = tmp_path_factory.mktemp("unlabelled")
    synth = StripSynth(tiny_config("attention").data)
    gen = torch.Generator().manual_seed(5)
    export_folder(synth.sample(torch.randint(1, 4, (80,), generator=gen), gen), root / "labelled")
    named = export_folder(
        synth.sample(torch.randint(1, 4, (40,), generator=gen), gen), root / "named"
    )
    shutil.copytree(named, root / "unlabelled", ignore=shutil.ignore_patterns("labels.csv"))
    return {name: root / name for name in ("labelled", "unlabelled", "named")}


def args(strips, *more: str) -> list[str]:
    return [
        "preset=tiny", "train.progress=plain", "train.threads=1", "init_from=pretrained",
        "data=folder", f"data.path={strips['labelled']}", f"data.unlabelled={strips['unlabelled']}",
        "train.steps=6", "train.val_every=3", *more,
    ]  # fmt: skip


def _last(run):
    return torch.load(run / "checkpoints" / "last.pt", weights_only=True)


def test_the_threshold_is_the_lowest_confidence_validation_reads_precisely_above():
    conf = [0.99, 0.95, 0.9, 0.9, 0.5, 0.4]
    right = [True, True, True, False, True, False]
    assert threshold(conf, right, 0.99) == 0.95  # 0.9's tie holds a wrong reading
    assert threshold(conf, right, 0.75) == 0.5  # 4 right of 5 at or above 0.5
    assert threshold([0.9, 0.8], [False, True], 0.99) is None


def test_rounds_are_recorded_and_a_run_killed_between_them_resumes_exactly(
    strips, tmp_path, killed_and_resumed, attnlab_run
):
    # checkpoints at a round's end and start only: the kill lands between rounds
    whole, cut, step = killed_and_resumed(args(strips, "train.checkpoint_every=100"), tmp_path)
    assert step == 6  # the end of round 0, before or after the step between rounds
    metrics = json.loads((whole / "metrics.json").read_text())["self_training"]
    first, second = metrics["rounds"]
    assert first["round"] == 0 and first["taken"] == 0 and first["improved"]
    assert second["round"] == 1 and second["start_step"] == 6 and 0 < second["taken"] <= 40
    assert 0 < second["threshold"] <= 1 and second["precision"] >= PRECISION
    assert second["val_before"] == first["val_after"] and not second["improved"]
    assert metrics["stopped"].startswith("round 1 read no better validation")
    assert json.loads((whole / "metrics.json").read_text())["step"] == 12
    a, b = _last(whole), _last(cut)
    assert a["self_training"] == b["self_training"]  # the strips taken, their readings
    assert len(a["self_training"]["taken"]) == second["taken"]
    assert len(a["data_split"]["unlabelled_keys"]) == 40
    assert "self-training round 1 from step 6" in (whole / "train.log").read_text()

    # attnlab eval RUN --folder: a folder holding a strip of data.unlabelled is refused
    res = attnlab_run("eval", whole, "--folder", strips["named"], "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "40 of its 40 strips were trained on" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_run_stopped_inside_a_later_round_resumes_exactly(strips, tmp_path):
    class Stop(Exception):
        pass

    def stop_at_9(step: int, loss: float) -> None:
        if step == 9:
            raise Stop

    overrides = args(strips, "train.checkpoint_every=2")
    whole = session.train(compose(overrides), tmp_path / "whole")
    trainer = Trainer(compose(overrides), RunDir(tmp_path / "cut"))
    with pytest.raises(Stop):
        trainer.run(on_step=stop_at_9)
    saved = _last(tmp_path / "cut")
    assert saved["step"] == 8 and saved["self_training"]["round"] == 1
    resumed = session.train(compose(overrides), tmp_path / "cut")
    assert resumed["val"] == whole["val"] and resumed["self_training"] == whole["self_training"]
    a, b = _last(tmp_path / "whole"), _last(tmp_path / "cut")
    assert a["step"] == b["step"] == 12
    assert all(torch.equal(v, b["model"][k]) for k, v in a["model"].items())
    assert a["self_training"] == b["self_training"]


def test_a_larger_train_rounds_trains_on_a_run_its_cap_stopped(strips, tmp_path, caplog):
    """train.rounds=0 ends the rounds after round 0, at the cap the record names; asked
    again with the same cap the run trains nothing and says what would train it on; asked
    with train.rounds=1 it trains round 1 from there and ends exactly as a run given
    train.rounds=1 from the start."""
    base = args(strips, "train.checkpoint_every=100")
    caplog.set_level(logging.INFO, logger="attnlab.train")
    whole = session.train(compose([*base, "train.rounds=1"]), tmp_path / "whole")
    assert len(whole["self_training"]["rounds"]) == 2 and whole["self_training"]["max_rounds"] == 1
    assert "step 6/6 " in caplog.text and "step 12/12 " in caplog.text  # each round's end
    run = tmp_path / "capped"
    first = session.train(compose([*base, "train.rounds=0"]), run)
    assert first["step"] == 6 and len(first["self_training"]["rounds"]) == 1
    assert first["self_training"]["stopped"].endswith("the cap (train.rounds=0)")
    rows = csv.DictReader((run / "history.csv").open())
    vals = [float(r["val_exact_acc"]) for r in rows if r["val_exact_acc"]]
    rising = [li for li in caplog.text.splitlines() if "still improving" in li]
    if vals[-1] > max(vals[:-1]):  # the best validation is the last: more rounds, not steps
        assert len(rising) == 1 and rising[0].endswith("train.rounds=1"), rising
    else:
        assert rising == []
    again = session.train(compose([*base, "train.rounds=0"]), run)
    assert again["step"] == 6 and "a larger train.rounds trains on" in caplog.text
    resumed = session.train(compose([*base, "train.rounds=1"]), run)
    assert resumed["val"] == whole["val"] and resumed["self_training"] == whole["self_training"]
    a, b = _last(tmp_path / "whole"), _last(run)
    assert a["step"] == b["step"] == 12
    assert all(torch.equal(v, b["model"][k]) for k, v in a["model"].items())
    assert a["self_training"] == b["self_training"]


def test_a_run_still_improving_is_told_more_rounds_at_its_cap_and_more_steps_a_round(
    tmp_path, caplog
):
    """The line a run whose last validation is its best ends with: a self-training run its
    cap stopped is told a larger train.rounds; one stopped otherwise, a larger train.steps
    (the steps of a round), never twice the steps of all its rounds."""
    from types import SimpleNamespace

    from attnlab.runs.rundir import RunDir
    from attnlab.training.selftrain import Rounds
    from attnlab.training.session import _say_if_still_improving

    def told(improved: bool) -> str:
        caplog.clear()
        entry = {"round": 2, "improved": improved}
        rounds = Rounds(pool=[], cap=2, round=2, log=[entry], stopped="ended")
        history = [{"step": 0, "val_exact_acc": 0.5}, {"step": 12, "val_exact_acc": 0.9}]
        state = SimpleNamespace(history=history, rounds=rounds)
        train = SimpleNamespace(objective=None, steps=4, minutes=None)
        trainer = SimpleNamespace(cfg=SimpleNamespace(train=train), state=state)
        trainer.ended_by = lambda: "steps"
        with caplog.at_level(logging.WARNING, logger="attnlab.train"):
            _say_if_still_improving(RunDir(tmp_path), trainer)
        (line,) = [li for li in caplog.text.splitlines() if "still improving" in li]
        return line

    assert told(True).endswith("read better trained on: train.rounds=4 into the same run directory")
    assert told(False).endswith("trained on: train.steps=8 into the same run directory")


def _refused(attnlab_run, cwd, *overrides: str) -> str:
    res = attnlab_run("train", *overrides, f"hydra.run.dir={cwd / 'run'}", cwd=cwd)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (cwd / "run" / "checkpoints").exists()
    return res.stderr


def test_an_unlabelled_strip_in_the_held_out_set_is_refused(strips, tmp_path, attnlab_run):
    val = tmp_path / "val"  # data.val_path holding one of the unlabelled images
    shutil.copytree(strips["named"], val)
    err = _refused(attnlab_run, tmp_path, *args(strips, f"data.val_path={val}"))
    assert "data.unlabelled=" in err and "40 of its 40 strips have the image of a held-out" in err


def test_bad_unlabelled_folders_are_refused_in_one_line(strips, tmp_path, attnlab_run):
    empty = tmp_path / "empty"
    empty.mkdir()
    err = _refused(attnlab_run, tmp_path, *args(strips, f"data.unlabelled={empty}"))
    assert "holds no images" in err
    err = _refused(attnlab_run, tmp_path, *args(strips, f"data.unlabelled={tmp_path / 'nope'}"))
    assert "no such folder" in err
    err = _refused(attnlab_run, tmp_path, *args(strips, f"data.unlabelled={strips['named']}"))
    assert "holds labels.csv" in err
    (empty / "notes.txt").write_text("x")
    err = _refused(attnlab_run, tmp_path, *args(strips, f"data.unlabelled={empty}"))
    assert "not an image file (first: 'notes.txt')" in err
    err = _refused(attnlab_run, tmp_path, *args(strips, "train.minutes=1"))
    assert "train.minutes=1" in err and "rounds" in err
    err = _refused(attnlab_run, tmp_path, "preset=tiny", f"data.unlabelled={strips['unlabelled']}")
    assert "data.unlabelled" in err and "needs data=folder" in err
    err = _refused(attnlab_run, tmp_path, *args(strips, "train.rounds=-1"))
    assert "train.rounds=-1" in err and "whole number of self-training rounds" in err
    err = _refused(attnlab_run, tmp_path, "preset=tiny", "train.rounds=5")
    assert "train.rounds=5" in err and "needs data.unlabelled" in err


def test_the_strips_data_limit_leaves_out_may_come_unlabelled(strips, tmp_path, attnlab_run):
    """A pool of 80 labelled strips given whole as data.unlabelled too (its images, no
    labels.csv): with data.limit=20 only the 20 drawn are trained with their labels, so the
    other 60 are the unlabelled pool (the data-needs curve's third arm); without data.limit
    every one is trained with its label, and the folder is refused in one line."""
    images = tmp_path / "pool_images"
    shutil.copytree(strips["labelled"], images, ignore=shutil.ignore_patterns("labels.csv"))
    pool = [f"data.unlabelled={images}", f"data.val_path={strips['named']}"]
    run = tmp_path / "limited"
    res = attnlab_run(
        "train", *args(strips, *pool, "data.limit=20", f"hydra.run.dir={run}"), cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    record = json.loads((run / "data_split.json").read_text())
    assert record["trained"] == 20 and record["unlabelled"]["dropped"] == 20, record
    assert len(record["unlabelled_keys"]) == 60  # all of them count as trained on
    err = _refused(attnlab_run, tmp_path, *args(strips, *pool))
    assert "every one of its 80 strips is a strip trained with its label" in err
