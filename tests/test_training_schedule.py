"""optim.schedule (cosine, linear, onecycle) against their references: onecycle is torch's
OneCycleLR (rates and AdamW's beta1, step by step), linear reaches zero at its horizon,
optim.warmup_steps is honoured by every schedule, and what history.csv logs as a step's lr is
the rate that step trained with."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pytest
import torch
from helpers.readers import tiny_config

from attnlab.training.optim import Schedule, factors, linear_factor, lr_factor


def _pair(total: int, warmup: int, floor: float, peak: float = 0.5):
    """torch's OneCycleLR and ours, each over its own AdamW; the rise lasts ``warmup``."""
    theirs = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(3))], lr=peak)
    reference = torch.optim.lr_scheduler.OneCycleLR(
        theirs,
        max_lr=peak,
        total_steps=total,
        pct_start=warmup / total,
        final_div_factor=1 / (25 * floor),  # its last rate: floor x the peak
    )
    ours = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(3))], lr=peak)
    o = SimpleNamespace(schedule="onecycle", warmup_steps=warmup, min_lr_ratio=floor)
    return theirs, reference, ours, Schedule(ours, o, total)


@pytest.mark.parametrize(
    "total, warmup, floor",
    [(100, 30, 0.01), (2500, 750, 0.05), (37, 5, 0.2), (10, 0, 0.1), (7, 2, 0.5)],
)
def test_onecycle_is_torchs_one_cycle_rate_and_beta1_at_every_step(total, warmup, floor):
    theirs, reference, ours, schedule = _pair(total, warmup, floor)
    rates, betas = [], []
    for step in range(total):
        rates.append((theirs.param_groups[0]["lr"], ours.param_groups[0]["lr"]))
        betas.append((theirs.param_groups[0]["betas"], ours.param_groups[0]["betas"]))
        theirs.step(), ours.step()
        if step < total - 1:  # torch refuses a step past its total
            reference.step()
        schedule.step()
        assert schedule.used == pytest.approx(rates[-1][1], rel=1e-15)  # what history logs
    for step, (want, got) in enumerate(rates):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), step
    for step, (want, got) in enumerate(betas):
        assert got[0] == pytest.approx(want[0], rel=1e-12) and got[1] == want[1], step
    # The shape the issue named: the peak at step warmup - 1, the last rate floor x the peak.
    peak_step = max(range(total), key=lambda s: rates[s][1])
    assert peak_step == max(warmup - 1, 0)
    assert rates[-1][1] == pytest.approx(floor * 0.5, rel=1e-12)
    assert {b[0] for _, b in betas} != {0.9}  # beta1 cycles (AdamW's own is 0.9)


def test_linear_warms_up_then_reaches_zero_at_its_horizon():
    assert linear_factor(0, 10, 110) == pytest.approx(0.1)
    assert linear_factor(9, 10, 110) == pytest.approx(1.0)
    assert linear_factor(10, 10, 110) == pytest.approx(1.0)
    assert linear_factor(60, 10, 110) == pytest.approx(0.5)
    assert linear_factor(110, 10, 110) == 0.0
    assert linear_factor(500, 10, 110) == 0.0
    assert linear_factor(50, 0, 100.0) == pytest.approx(0.5)  # a horizon in steps, estimated
    falls = [linear_factor(s, 10, 110) for s in range(10, 111)]
    assert falls == sorted(falls, reverse=True)


def test_a_schedule_resized_reaches_its_end_at_the_new_horizon():
    """A budget in minutes moves the horizon: the rate of the step to come follows it."""
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    o = SimpleNamespace(schedule="linear", warmup_steps=0, min_lr_ratio=0.05)
    schedule = Schedule(opt, o, 1000)
    for _ in range(40):
        schedule.step()
    assert schedule.rate == pytest.approx(0.96)
    schedule.resize(80)  # fewer steps fit than first thought
    assert schedule.rate == pytest.approx(0.5)
    schedule.resize(40)
    assert schedule.rate == 0.0
    for kind in ("cosine", "onecycle"):  # the others reach their floor at the horizon
        o = SimpleNamespace(schedule=kind, warmup_steps=5, min_lr_ratio=0.0)
        assert factors(o, 99, 100)[0] == pytest.approx(0.0, abs=3e-3)
        assert factors(o, 100, 100)[0] == pytest.approx(0.0, abs=1e-12)


def test_every_schedule_honours_warmup_steps(tmp_path):
    """optim.warmup_steps=W: the rate rises over W steps and peaks at optim.lr at step W
    (for onecycle, too: its rise lasts W steps, torch's pct_start = W / steps)."""
    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    for kind in ("cosine", "linear", "onecycle"):
        overrides = [f"optim.schedule={kind}", "optim.warmup_steps=8", "train.steps=30"]
        trainer = Trainer(tiny_config("ctc", *overrides), RunDir(tmp_path / kind))
        used = []
        for _ in range(12):
            trainer.advance()
            used.append(trainer.state.schedule.used)
        lr = trainer.cfg.optim.lr
        assert used[:8] == sorted(used[:8]) and used[0] < 0.2 * lr, kind
        assert used[7] == pytest.approx(lr) and max(used) == pytest.approx(lr), kind
        assert used[11] < lr, kind


def test_history_logs_the_rate_each_step_trained_with(trained):
    """history.csv's lr at step s is the rate of the s-th step (index s - 1), not the next
    step's: preset=tiny is the cosine over 30 steps with a 5-step warm-up."""
    from attnlab.runs import checkpoint

    run = trained["attention"]
    cfg = checkpoint.load(run / "checkpoints" / "last.pt").config
    peak, steps = cfg["optim"]["lr"], cfg["train"]["steps"]
    warmup, floor = cfg["optim"]["warmup_steps"], cfg["optim"]["min_lr_ratio"]
    rows = [r for r in csv.DictReader((run / "history.csv").open()) if r["lr"]]
    assert rows
    for row in rows:
        step = int(row["step"])
        assert float(row["lr"]) == pytest.approx(peak * lr_factor(step - 1, warmup, steps, floor))
    assert float(rows[0]["lr"]) == pytest.approx(peak)  # step 5: the warm-up's last step
