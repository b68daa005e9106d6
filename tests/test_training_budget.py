"""train.minutes: a budget in wall time beside train.steps and train.patience (whichever ends
first), the schedule sized to it and reaching zero at its end, a resume that spends what was
left, the budget recorded where the report can read it (metrics.json, status.json, the
checkpoint); and the trainer's state: checkpoints of the LambdaLR days still resume (cosine)
or are refused in one line (the older one-cycle)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch
from helpers.readers import tiny_config

from attnlab.training.budget import Budget
from attnlab.training.optim import linear_factor

TINY = ["preset=tiny", "train.progress=plain", "train.threads=1"]
BUDGETED = [*TINY, "train.minutes=0.1", "train.steps=100000", "optim.schedule=linear"]


def _lrs(run) -> list[tuple[int, float]]:
    rows = csv.DictReader((run / "history.csv").open())
    return [(int(r["step"]), float(r["lr"])) for r in rows if r["lr"]]


def test_the_horizon_is_the_steps_the_minutes_left_hold_and_the_schedule_ends_there():
    # 100 steps took 30 s: the 30 s left, less 3 s kept for the final validation and 0.3 s
    # for a margin of one step, hold 89 more steps, so the horizon is step 189
    budget = Budget(minutes=1.0, steps=10**6, earlier_s=30.0, earlier_steps=100, val_s=3.0)
    assert budget.horizon(100) == pytest.approx(189.0)
    assert linear_factor(189, 0, budget.horizon(100)) == 0.0  # zero at the budget's end
    assert linear_factor(150, 0, budget.horizon(100)) == pytest.approx(39 / 189)
    assert budget.time_left(100)
    assert Budget(minutes=1.0, steps=150, earlier_s=30.0, earlier_steps=100).horizon(100) == 150
    spent = Budget(minutes=1.0, steps=10**6, earlier_s=59.5, earlier_steps=100)
    assert not spent.time_left(100) and spent.horizon(100) == 100.0
    assert Budget(minutes=None, steps=30).horizon(7) == 30.0  # steps only: train.steps


def test_whichever_of_steps_patience_and_minutes_comes_first_ends_the_run():
    train = SimpleNamespace(steps=50, patience=1, objective=None)
    rows = [
        {"step": 0, "val_exact_acc": 0.0},
        {"step": 10, "val_exact_acc": 0.5},
        {"step": 20, "val_exact_acc": 0.4},
    ]
    left = Budget(minutes=1.0, steps=50, earlier_s=10.0, earlier_steps=20)
    gone = Budget(minutes=1.0, steps=50, earlier_s=60.0, earlier_steps=20)
    state = SimpleNamespace(step=20, history=rows[:2], budget=None)
    assert left.ended_by(state, train) is None
    assert gone.ended_by(state, train) == "minutes"
    assert left.ended_by(SimpleNamespace(step=20, history=rows, budget=None), train) == "patience"
    assert gone.ended_by(SimpleNamespace(step=50, history=rows, budget=None), train) == "steps"


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory, attnlab_run):
    """A tiny run of train.minutes=0.1 (6 s) with a train.steps it cannot reach."""
    tmp = tmp_path_factory.mktemp("budget")
    res = attnlab_run("train", *BUDGETED, f"hydra.run.dir={tmp / 'run'}", cwd=tmp)
    assert res.returncode == 0, res.stderr
    return tmp / "run"


def test_a_run_ends_within_its_minutes_with_the_rate_near_zero(budgeted):
    metrics = json.loads((budgeted / "metrics.json").read_text())
    budget = metrics["budget"]
    assert budget["minutes"] == 0.1 and budget["steps"] == 100000
    assert budget["ended_by"] == "minutes" and budget["steps_taken"] == metrics["step"] > 5
    assert 0.05 < budget["minutes_spent"] <= 0.1  # validations and checkpoints included
    assert metrics["elapsed_s"] <= 6.0 and metrics["stopped_early"] is None
    # recorded where the report can read it: status.json and the checkpoint too
    status = json.loads((budgeted / "status.json").read_text())
    assert status["state"] == "complete" and status["budget"] == budget
    last = torch.load(budgeted / "checkpoints" / "last.pt", weights_only=True)
    assert last["timing"]["budget"] == budget
    # the linear schedule, sized to the minutes: down after the warm-up, near zero at the end
    lrs = _lrs(budgeted)
    peak = max(lr for _, lr in lrs)
    falling = [lr for step, lr in lrs if step >= 5]
    assert falling == sorted(falling, reverse=True) and falling[-1] < 0.2 * peak
    assert lrs[-1][0] == metrics["step"]  # the last step's rate is logged
    said = (budgeted / "train.log").read_text()
    assert said.count("s a step here, the 99980 steps left would take about") == 1
    assert "train.minutes=0.1 ends it within 6 s" in said


def test_the_run_says_early_what_the_rest_of_its_steps_would_take(caplog):
    """PACE_STEPS into a command, once: the steps left at the pace measured, in words."""
    from attnlab.training.budget import PACE_STEPS

    budget = Budget(minutes=None, steps=1000)
    budget.started, budget.start_step = time.perf_counter() - 0.5 * PACE_STEPS, 0
    with caplog.at_level("INFO", logger="attnlab.train"):
        for step in range(1, 2 * PACE_STEPS):
            budget.say_pace(step)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"at 0.5 s a step here, the {1000 - PACE_STEPS} steps left")
    assert "about 8 min" in lines[0] and "train.minutes=M sizes the run" in lines[0]


def test_a_spent_budget_asked_again_trains_nothing(budgeted, copy_run, attnlab_run, tmp_path):
    run = copy_run(budgeted)
    before = (run / "metrics.json").read_text()
    res = attnlab_run("train", *BUDGETED, f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    said = res.stdout + res.stderr
    assert "nothing to train" in said and "a larger train.minutes" in said
    assert (run / "metrics.json").read_text() == before


def test_a_budget_of_more_minutes_than_steps_ends_at_the_steps_on_the_same_schedule(
    trained, attnlab_run, tmp_path
):
    """train.minutes=30 with preset=tiny's 30 steps: the steps end it first, and the rates
    are those of the run without a budget (the trained fixture)."""
    run = tmp_path / "run"
    res = attnlab_run("train", *TINY, "train.minutes=30", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["step"] == 30 and metrics["budget"]["ended_by"] == "steps"
    assert _lrs(run) == _lrs(trained["attention"])


def test_a_resumed_budget_spends_what_was_left(tmp_path, attnlab_run, cli_env):
    args = [*BUDGETED[:-1], "train.checkpoint_every=5", f"hydra.run.dir={tmp_path / 'run'}"]
    run, last = tmp_path / "run", tmp_path / "run" / "checkpoints" / "last.pt"
    cmd = [sys.executable, "-m", "attnlab.cli", "train", *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=cli_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 120
    while not last.exists() and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "metrics.json").exists(), "the run finished before it could be killed"
    first = torch.load(last, weights_only=True)
    spent_s, killed_at = first["timing"]["train_seconds"], first["step"]
    assert 0 < spent_s < 6.0
    res = attnlab_run("train", *args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"resumed from {last} at step {killed_at}" in (run / "train.log").read_text()
    budget = json.loads((run / "metrics.json").read_text())["budget"]
    assert budget["ended_by"] == "minutes" and budget["steps_taken"] > killed_at
    assert spent_s / 60 < budget["minutes_spent"] <= 0.1  # the whole budget, not 0.1 more


@pytest.mark.parametrize("value", ["-1", "0", "abc", "true", "nan", "inf", "1e9"])
def test_a_bad_budget_is_refused_in_one_line(value, attnlab_run, tmp_path):
    run = tmp_path / "run"
    res = attnlab_run("train", *TINY, f"train.minutes={value}", f"hydra.run.dir={run}",
                      cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "train.minutes" in res.stderr, res.stderr
    assert not run.exists()


def _as_lambdalr(last, schedule_fn, steps: int) -> None:
    """Rewrite ``last``'s schedule as torch's LambdaLR saved it before the schedule had a
    horizon (attnlab's checkpoints until then): its state after ``steps`` steps."""
    payload = torch.load(last, weights_only=True)
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    old = torch.optim.lr_scheduler.LambdaLR(opt, schedule_fn)
    for _ in range(steps):
        opt.step()
        old.step()
    payload["scheduler"] = old.state_dict()
    torch.save(payload, last)


def test_a_checkpoint_of_the_lambdalr_days_resumes_the_same_numbers(tmp_path):
    from attnlab.runs.rundir import RunDir
    from attnlab.training.optim import lr_factor
    from attnlab.training.trainer import Trainer

    cfg = tiny_config("ctc", "train.steps=12")
    whole = Trainer(cfg, RunDir(tmp_path / "whole"))
    for _ in range(12):
        whole.advance()
    cut = Trainer(cfg, RunDir(tmp_path / "cut"))
    for _ in range(6):
        cut.advance()
    cut.save("last")
    o = cfg.optim
    _as_lambdalr(cut.run_dir.checkpoint("last"), lambda s: lr_factor(s, 5, 12, o.min_lr_ratio), 6)
    resumed = Trainer(cfg, RunDir(tmp_path / "cut"))
    assert resumed.resumed and resumed.step == 6
    for _ in range(6):
        resumed.advance()
    theirs, ours = whole.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)


def test_an_older_one_cycle_checkpoint_is_refused_in_one_line(tmp_path):
    from attnlab.errors import UserError
    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    cfg = tiny_config("ctc", "train.steps=12", "optim.schedule=onecycle")
    cut = Trainer(cfg, RunDir(tmp_path / "cut"))
    cut.advance()
    cut.save("last")
    _as_lambdalr(cut.run_dir.checkpoint("last"), lambda s: 0.04, 1)
    with pytest.raises(UserError) as err:
        Trainer(cfg, RunDir(tmp_path / "cut"))
    assert "\n" not in str(err.value) and "optim.schedule=onecycle" in str(err.value)
    assert "last.pt" in str(err.value) and "new run directory" in str(err.value)
