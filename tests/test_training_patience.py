"""train.patience: a run ends after K validations without a better train.objective; a run
whose best validation is its last says so, with the command that trains it on."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.runs import TINY

# A learning rate that changes nothing a validation can see: no validation is ever better
# than the first trained one, so patience runs out after exactly K more.
STALLED = [*TINY, "model=fixed", "optim.lr=1e-12", "train.steps=60", "train.val_every=5"]


def _validations(run: Path) -> pd.DataFrame:
    history = pd.read_csv(run / "history.csv")
    return history.dropna(subset=["val_exact_acc"]).query("step > 0")


def test_validations_no_better_than_the_start_do_not_spend_patience(attnlab_run, tmp_path):
    """0% = 0% is not "no improvement": a run whose validations never beat step 0's trains
    to train.steps (before: it stopped at step 15, having read nothing)."""
    run = tmp_path / "run"
    res = attnlab_run("train", *STALLED, "train.patience=2", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    history = pd.read_csv(run / "history.csv").dropna(subset=["val_exact_acc"])
    assert history["val_exact_acc"].nunique() == 1  # no validation beats the start
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["step"] == 60 and metrics["stopped_early"] is None
    assert "stopped early" not in (run / "train.log").read_text()


def test_one_objective_chooses_best_pt_patience_and_the_sweepers_value(attnlab_run, tmp_path):
    """train.objective=val_cer: best.pt, metrics.json's best, stopped_early and
    objective.json all name the validation with the lowest CER (the first of equal ones)."""
    from attnlab.runs import checkpoint

    run = tmp_path / "run"
    args = [*TINY, "model=fixed", "train.steps=60", "train.val_every=5", "train.patience=2"]
    where = f"hydra.run.dir={run}"
    res = attnlab_run("train", *args, "train.objective=val_cer", where, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = _validations(run)
    best_i = int(rows["val_cer"].to_numpy().argmin())
    step, cer = int(rows["step"].iloc[best_i]), float(rows["val_cer"].iloc[best_i])
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["best"]["step"] == step and metrics["best"]["measure"] == "val_cer"
    assert metrics["best"]["cer"] == pytest.approx(cer, abs=1e-6)
    assert checkpoint.load(run / "checkpoints" / "best.pt").step == step
    objective = json.loads((run / "objective.json").read_text())
    assert objective["value"] == pytest.approx(cer, abs=1e-6)
    if metrics["stopped_early"] is not None:
        assert metrics["stopped_early"]["best_step"] == step
    # resumed with another measure, best.pt would mean two things: refused
    res = attnlab_run("train", *args, "train.steps=90", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 2 and "chosen by val_cer" in res.stderr, res.stderr


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
    # the objective's measure chooses best.pt: it makes a variant, with or without patience
    assert identity(flatten(run), "1-8") != identity(flatten(unpatient_cer), "1-8")
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
