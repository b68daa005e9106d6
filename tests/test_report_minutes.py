"""The report's training curves against minutes as well as steps (issue #59): each run's
validations at the training seconds its history.csv logs (``train_seconds``), and beside the
curves which runs were trained to a budget in minutes (``train.minutes``), what they spent
and what ended them. Hand-written runs in the formats train.py writes."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from helpers.runs import write_run

from attnlab.report import build_report, discover_runs
from attnlab.report.aggregate import aggregate, train_groups
from attnlab.report.figures import minutes_figure

SECONDS_PER_STEP = {"attention": 0.07, "fixed": 0.12}


def timed(run, minutes: float, steps_taken: int, spent: float, ended_by: str):
    """Make ``run`` one trained to ``train.minutes=minutes``: its config, its metrics.json's
    budget, and the training seconds of each validation in history.csv."""
    cfg_file = run / ".hydra" / "config.yaml"
    cfg = yaml.safe_load(cfg_file.read_text())
    cfg["train"]["minutes"] = minutes
    cfg_file.write_text(yaml.safe_dump(cfg, sort_keys=False))
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["budget"] = {
        "minutes": minutes,
        "steps": 100000,
        "minutes_spent": spent,
        "steps_taken": steps_taken,
        "ended_by": ended_by,
        "validation_s": 0.5,
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    history = pd.read_csv(run / "history.csv")
    per = SECONDS_PER_STEP[cfg["model"]["name"]]
    validated = history["val_exact_acc"].notna()
    history.loc[validated, "train_seconds"] = history.loc[validated, "step"] * per + 0.5
    history.to_csv(run / "history.csv", index=False)
    return history.loc[validated]


def test_curves_are_drawn_against_minutes_and_the_budget_is_said_beside_them(tmp_path):
    a = write_run(tmp_path / "runs/a", seed=0, reader="attention")
    f = write_run(tmp_path / "runs/f", seed=0, reader="fixed")
    write_run(tmp_path / "runs/old", seed=1, reader="attention")  # before train_seconds
    expected = {
        "attention": timed(a, 2.0, 1500, 1.8, "minutes"),
        "fixed": timed(f, 2.0, 900, 1.9, "steps"),  # its train.steps came first
    }
    runs = discover_runs([tmp_path / "runs"])
    (group,) = train_groups(runs, aggregate(runs))
    fig = minutes_figure(group, {"attention": "#1f77b4", "fixed": "#d62728"})
    ax = fig.axes[0]
    drawn = sorted((tuple(line.get_xdata()), tuple(line.get_ydata())) for line in ax.lines[:2])
    want = sorted(
        (tuple(h["train_seconds"] / 60), tuple(100 * h["val_exact_acc"])) for h in expected.values()
    )
    assert drawn == [(pytest.approx(x), pytest.approx(y)) for x, y in want]
    assert len(ax.lines) == 3  # two runs (the old one has no seconds) and the budget's line
    assert tuple(ax.lines[2].get_xdata()) == (2.0, 2.0)  # at train.minutes

    out = tmp_path / "report"
    page = build_report([tmp_path / "runs"], out).read_text()
    assert (out / "training_1_8.png").is_file()  # against steps, as before
    assert (out / "training_1_8_minutes.png").read_bytes()[:4] == b"\x89PNG"
    note = (
        "2 of 3 run(s) trained to a budget in minutes (train.minutes=2): 1200 [900-1500] steps "
        "in 1.85 [1.8-1.9] minutes (median [range]); 1 of 2 ended by steps before the minutes "
        "ran out; at equal minutes, read the curves against minutes, not steps"
    )
    untimed = "1 run(s) have no train_seconds in history.csv"
    assert note in page and untimed in page
    summary = (out / "summary.md").read_text()
    assert "## Training curves (against steps and minutes)" in summary
    assert f"- train 1-8: {note}" in summary


def test_runs_of_steps_alone_keep_their_curves_against_steps_and_nothing_else(tmp_path):
    write_run(tmp_path / "runs/a", seed=0, reader="attention")
    write_run(tmp_path / "runs/f", seed=0, reader="fixed")
    out = tmp_path / "report"
    page = build_report([tmp_path / "runs"], out).read_text()
    assert (out / "training_1_8.png").is_file()
    assert not list(out.glob("*minutes*.png"))
    assert "budget in minutes" not in page and "train_seconds" not in page
    assert "Training curves (against steps and minutes)" not in (out / "summary.md").read_text()
