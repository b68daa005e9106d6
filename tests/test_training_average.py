"""optim.schedule's cosine and optim.ema (an average of the weights, the weights a run
validates and reads with): their closed forms, and a tiny run (with the one-cycle schedule,
checked against torch's in test_training_schedule.py) that resumes exactly."""

from __future__ import annotations

import json
import math

import pytest
import torch
from helpers.runs import TINY

from attnlab.training.average import WeightAverage
from attnlab.training.optim import lr_factor


def test_the_cosine_schedule_warms_up_then_decays_to_its_floor():
    # The formula every earlier run trained with: (s + 1) / warmup, then a cosine.
    assert lr_factor(0, 10, 110, 0.05) == pytest.approx(0.1)
    assert lr_factor(9, 10, 110, 0.05) == pytest.approx(1.0)
    assert lr_factor(10, 10, 110, 0.05) == pytest.approx(1.0)
    assert lr_factor(60, 10, 110, 0.05) == pytest.approx(0.05 + 0.95 * 0.5)
    assert lr_factor(110, 10, 110, 0.05) == pytest.approx(0.05)
    assert lr_factor(500, 10, 110, 0.05) == pytest.approx(0.05)


def test_the_average_follows_its_closed_form_and_copies_integer_buffers():
    model = torch.nn.BatchNorm1d(2)
    average = WeightAverage(model, decay=0.9)
    start = model.weight.detach().clone()
    values = [torch.tensor([2.0, 4.0]), torch.tensor([-1.0, 3.0]), torch.tensor([5.0, 0.0])]
    expected = start.clone()
    for step, value in enumerate(values, start=1):
        with torch.no_grad():
            model.weight.copy_(value)
        model.num_batches_tracked += 1
        average.update(model, step)
        d = min(0.9, (1 + step) / (10 + step))
        expected = d * expected + (1 - d) * value
    assert torch.allclose(average.state["weight"], expected)
    assert int(average.state["num_batches_tracked"]) == 3
    with average.applied(model):
        assert torch.allclose(model.weight, expected)
    assert torch.equal(model.weight.detach(), values[-1])  # the trained weights back


@pytest.fixture(scope="module")
def averaged(tmp_path_factory, attnlab_run):
    """A tiny attention run with optim.ema and the one-cycle schedule (rising over 9 steps:
    the history's rows every 5 steps see it rise, then fall)."""
    tmp = tmp_path_factory.mktemp("averaged")
    args = [*TINY, "optim.ema=0.9", "optim.schedule=onecycle", "optim.warmup_steps=9"]
    res = attnlab_run("train", *args, f"hydra.run.dir={tmp / 'run'}", cwd=tmp)
    assert res.returncode == 0, res.stderr
    return tmp / "run", args


def test_an_averaged_run_validates_and_saves_the_average(averaged):
    from attnlab.runs import checkpoint
    from attnlab.runs.rundir import RunDir
    from attnlab.tasks.compose import compose
    from attnlab.training.trainer import Trainer
    from attnlab.training.validation import validate

    run, args = averaged
    last = run / "checkpoints" / "last.pt"
    ckpt = checkpoint.load(last)
    assert ckpt.trained is not None and set(ckpt.trained) == set(ckpt.model)
    assert any(not torch.equal(ckpt.model[k], ckpt.trained[k]) for k in ckpt.model)
    # What eval, read and export rebuild is the average, and it reads the validation sets
    # exactly as the run's last validation says.
    reader, _ = ckpt.rebuild(last)
    cfg = compose([a for a in args if a != "train.progress=plain"])
    sets = Trainer(cfg, RunDir(run)).val_sets  # resumed: nothing trained or written
    val, _ = validate(reader, sets, torch.device("cpu"), False, 0)
    metrics = json.loads((run / "metrics.json").read_text())
    assert val["exact_acc"] == metrics["val"]["exact_acc"]
    assert math.isclose(val["cer"], metrics["val"]["cer"])
    rows = [line.split(",") for line in (run / "history.csv").read_text().splitlines()[1:]]
    lrs = [float(row[2]) for row in rows if row[2]]
    assert lrs[0] < max(lrs) and lrs[-1] < max(lrs)  # one cycle: up, then down


def test_an_averaged_run_resumes_to_the_same_numbers(tmp_path, killed_and_resumed):
    args = [*TINY, "optim.ema=0.9", "optim.schedule=onecycle", "train.steps=60"]
    whole, cut, killed_at = killed_and_resumed(
        [*args, "train.checkpoint_every=10", "train.val_every=20"], tmp_path
    )
    assert 0 < killed_at < 60
