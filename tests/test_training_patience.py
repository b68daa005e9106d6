"""train.patience: a run ends after K validations without a better train.objective; a run
whose best validation is its last says so, with the command that trains it on."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.runs import TINY, checksums

# A learning rate that changes nothing a validation can see: no validation is ever better
# than the first trained one, so patience runs out after exactly K more.
STALLED = [*TINY, "model=fixed", "optim.lr=1e-12", "train.steps=60", "train.val_every=5"]


def _validations(run: Path) -> pd.DataFrame:
    history = pd.read_csv(run / "history.csv")
    return history.dropna(subset=["val_exact_acc"]).query("step > 0")


def _expected_stop(run: Path, patience: int) -> int:
    """The step at which K validations have passed without a better val_exact, read from
    the run's own history (the first best counts: only a strictly better value improves)."""
    rows = _validations(run)
    best = rows["val_exact_acc"].to_numpy().argmax()
    return int(rows["step"].iloc[best + patience])


@pytest.mark.slow
def test_patience_stops_a_tiny_run_early_and_resuming_it(attnlab_run, tmp_path):
    run = tmp_path / "run"
    res = attnlab_run("train", *STALLED, "train.patience=2", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    metrics = json.loads((run / "metrics.json").read_text())
    stop = _expected_stop(run, 2)
    assert stop < 60 and metrics["step"] == stop
    early = metrics["stopped_early"]
    assert early["step"] == stop and early["patience"] == 2 and early["measure"] == "val_exact"
    assert json.loads((run / "status.json").read_text())["state"] == "complete"
    assert (run / "checkpoints" / "best.pt").is_file()
    assert int(_validations(run)["step"].max()) == stop  # no validation after the stop
    log = (run / "train.log").read_text()
    assert f"stopped early at step {stop} of 60: 2 validations without a better val_exact" in log
    assert "still improving" not in log

    # Asked again with more steps: it stopped early, nothing to train, left as it was.
    before = checksums(run)
    res = attnlab_run("train", *STALLED, "train.steps=90", "train.patience=2",
                      f"hydra.run.dir={run}", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    said = res.stdout + res.stderr
    assert f"nothing to train: {run} stopped early at step {stop}" in said
    assert "a larger train.patience, or train.patience=null, trains on" in said
    assert checksums(run) == before

    # A larger patience trains on from last.pt, to its own stop.
    res = attnlab_run("train", *STALLED, "train.patience=3", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    again = json.loads((run / "metrics.json").read_text())
    assert again["step"] == _expected_stop(run, 3) > stop
    assert again["stopped_early"]["patience"] == 3
    steps = pd.read_csv(run / "history.csv")["step"]
    assert steps.is_monotonic_increasing and steps.is_unique  # one history, continued


def test_a_run_whose_best_validation_is_its_last_says_so_with_the_command(attnlab_run, tmp_path):
    run = tmp_path / "run"
    args = [*TINY, "model=fixed", "train.val_every=30", "train.objective=val_cer"]
    res = attnlab_run("train", *args, f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    history = pd.read_csv(run / "history.csv").dropna(subset=["val_cer"])
    steps, cer = history["step"].tolist(), history["val_cer"].tolist()
    assert cer[-1] < min(cer[:-1])  # the last validation is the best: it is still improving
    (line,) = [li for li in (run / "train.log").read_text().splitlines() if "still improving" in li]
    assert f"val_cer {cer[-1]:.4f}) is the last one, at step {steps[-1]}" in line
    assert f"hydra.run.dir={run}" in line and line.endswith(f"train.steps={2 * steps[-1]}")
    assert "train.objective=val_cer" in line  # the run's own command, with more steps


def test_patience_is_checked_and_counts_for_variants_and_resumes(attnlab_run, tmp_path):
    from attnlab.config.keys import flatten
    from attnlab.report.variants import identity
    from attnlab.runs.resume import check_same_config

    res = attnlab_run("train", *TINY, "train.patience=-1", cwd=tmp_path)
    assert res.returncode == 2 and "train.patience" in res.stderr
    assert res.stderr.count("\n") == 1
    run = {"seed": 0, "train": {"steps": 30, "patience": None, "objective": None}}
    patient = {"seed": 0, "train": {"steps": 30, "patience": 3, "objective": None}}
    check_same_config(run, patient, Path("last.pt"))  # where a run ends: a resume may change it
    older = flatten({"seed": 0, "train": {"steps": 30, "objective": None}})  # before the key
    assert identity(flatten(run), "1-8") == identity(older, "1-8")  # the same variant
    assert identity(flatten(run), "1-8") != identity(flatten(patient), "1-8")
    by_cer = {"seed": 0, "train": {"steps": 30, "patience": 3, "objective": "val_cer"}}
    unpatient_cer = {"seed": 0, "train": {"steps": 30, "patience": None, "objective": "val_cer"}}
    # the objective is what a sweeper is told, unless patience watches it
    assert identity(flatten(run), "1-8") == identity(flatten(unpatient_cer), "1-8")
    assert identity(flatten(patient), "1-8") != identity(flatten(by_cer), "1-8")


@pytest.mark.parametrize(
    ("values", "since", "best"),
    [([0.1, 0.2, 0.2, 0.1], 2, 1), ([0.1, 0.2, 0.3], 0, 2), ([0.5, 0.4, 0.3], 2, 0)],
)
def test_validations_since_the_best_are_counted_from_the_history(values, since, best):
    from attnlab.training.validation import standing

    history = [{"step": 0, "val_exact_acc": 0.9, "val_cer": 0.0}]  # step 0: not counted
    history += [{"step": 10 * (i + 1), "loss": 1.0} for i in range(len(values))]
    for i, v in enumerate(values):
        history.append({"step": 10 * (i + 1), "val_exact_acc": v, "val_cer": 1 - v})
    for objective in (None, "val_cer", "seen_cer"):
        now = standing(history, objective)
        assert (now.since_best, now.best_step) == (since, 10 * (best + 1))
        assert now.validations == len(values)
