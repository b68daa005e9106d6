"""Hydra sweepers that optimise (issue #32): the direction follows train.objective, a sweep
that needs a number without one is refused before any trial, and a failing trial no longer
ends a study without its results. Real Optuna studies on preset=tiny (hydra-optuna-sweeper,
the dev extra); Nevergrad's and Ax's keys through the same check on their configs' layout."""

from __future__ import annotations

import json

import pytest
import yaml
from omegaconf import OmegaConf

from attnlab.config import TrainConfig
from attnlab.errors import UserError
from attnlab.tasks.sweepers import apply, settings

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")

STUDY = ["train", "-m", "preset=tiny", "train.progress=plain", "train.threads=1",
         "hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0"]  # fmt: skip


def objectives(sweep):
    return {p.parent: json.loads(p.read_text())["value"] for p in sweep.glob("*/objective.json")}


@pytest.mark.slow
def test_a_maximised_objective_gets_a_maximising_study(attnlab_run, tmp_path):
    # The command: Optuna's default direction is minimize, val_exact is maximised.
    sweep = tmp_path / "study"
    res = attnlab_run(
        *STUDY, "hydra.sweeper.n_trials=3", "train.objective=val_exact",
        "optim.lr=interval(0.0001,0.01)", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    # (a range whose three seeded draws read differently at preset=tiny: 0.0625, 0.0208)
    assert res.returncode == 0, res.stderr[-3000:]
    values = objectives(sweep)
    assert len(values) == 3 and len(set(values.values())) > 1  # a best and a worst to tell
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(max(values.values()))
    assert "attnlab sets hydra.sweeper.direction=maximize" in res.stdout
    for trial in values:  # every trial records the direction its study used, as an override
        hydra = yaml.safe_load((trial / ".hydra/hydra.yaml").read_text())["hydra"]
        assert hydra["sweeper"]["direction"] == "maximize"
        assert "hydra.sweeper.direction=maximize" in hydra["overrides"]["hydra"]


@pytest.mark.parametrize(
    "args, said",
    [
        (["optim.lr=interval(0.001,0.05)"], "set train.objective to one of val_exact"),
        (
            ["train.objective=val_cer", "hydra.sweeper.direction=maximize"],
            "hydra.sweeper.direction=maximize disagrees with train.objective=val_cer",
        ),
        (
            ["train.objective=val_exact", "hydra.sweeper.direction=[maximize,minimize]"],
            "names 2 directions",
        ),
        (["train.objective=unseen_exact"], "is measured by an evaluation"),
    ],
)
def test_a_sweep_that_cannot_work_is_refused_before_any_trial(attnlab_run, tmp_path, args, said):
    sweep = tmp_path / "study"
    res = attnlab_run(*STUDY, "hydra.sweeper.n_trials=2", *args, f"hydra.sweep.dir={sweep}",
                      cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2, res.stderr[-3000:]
    assert said in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not sweep.exists()  # no trial ran


@pytest.mark.slow
def test_a_failing_trial_leaves_the_finished_trials_results(attnlab_run, tmp_path):
    # warmup -1 is refused by the config check: that trial fails, the others train.
    sweep = tmp_path / "study"
    res = attnlab_run(
        *STUDY, "hydra.sweeper.n_trials=4", "train.objective=val_cer",
        "optim.warmup_steps=choice(0,-1)", "optim.lr=interval(0.001,0.05)",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    failed = res.stdout.count("Failed experiment: optim.warmup_steps=-1: must be >= 0")
    values = objectives(sweep)
    assert failed >= 1 and len(values) >= 1 and failed + len(values) == 4
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(min(values.values()))  # val_cer: minimised
    assert results["best_params"]["optim.warmup_steps"] == 0

    # Every trial failed: one line, not Optuna's traceback.
    res = attnlab_run(
        *STUDY, "hydra.sweeper.n_trials=2", "train.objective=val_cer",
        "optim.warmup_steps=choice(-2,-1)", f"hydra.sweep.dir={tmp_path / 'none'}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("attnlab: error: hydra/sweeper=optuna stopped the study: No trials")
    assert "Traceback" not in res.stderr


def sweep_config(sweeper: dict, objective: str | None, overrides: list[str]):
    """A sweep's composed config, as far as the check reads it."""
    return OmegaConf.create(
        {"train": {**OmegaConf.to_container(OmegaConf.structured(TrainConfig)),
                   "objective": objective},
         "hydra": {"sweeper": sweeper, "overrides": {"hydra": overrides}}}
    )  # fmt: skip


# Their plugins' config.py (Hydra 1.3): Nevergrad's optim.maximize, Ax's two minimize keys.
NEVERGRAD = {
    "_target_": "hydra_plugins.hydra_nevergrad_sweeper.nevergrad_sweeper.NevergradSweeper",
    "optim": {"optimizer": "NGOpt", "maximize": False, "max_failure_rate": 0.0},
}
AX = {
    "_target_": "hydra_plugins.hydra_ax_sweeper.ax_sweeper.AxSweeper",
    "ax_config": {"experiment": {"minimize": True}, "early_stop": {"minimize": True}},
}


def test_nevergrad_and_ax_directions_follow_the_objective():
    cfg = sweep_config(NEVERGRAD, "val_exact", ["hydra/sweeper=nevergrad"])
    assert settings(cfg, "train") == {"optim.maximize": True, "optim.max_failure_rate": 1.0}
    apply(cfg, settings(cfg, "train"))
    assert cfg.hydra.sweeper.optim.maximize is True
    assert "hydra.sweeper.optim.maximize=true" in cfg.hydra.overrides.hydra
    assert settings(cfg, "train") == {}  # now agreed, and its failure rate named

    named = ["hydra.sweeper.optim.maximize=true"]
    cfg = sweep_config({**NEVERGRAD, "optim": {"maximize": True}}, "val_cer", named)
    with pytest.raises(
        UserError, match="optim.maximize=true disagrees with train.objective=val_cer"
    ):
        settings(cfg, "train")

    cfg = sweep_config(AX, "unseen_exact", [])
    assert settings(cfg, "sweep") == {
        "ax_config.experiment.minimize": False, "ax_config.early_stop.minimize": False,
    }  # fmt: skip
    named = ["hydra.sweeper.ax_config.experiment.minimize=true"]
    with pytest.raises(UserError, match="experiment.minimize=true disagrees"):
        settings(sweep_config(AX, "seen_exact", named), "sweep")
    with pytest.raises(UserError, match="needs one number from each trial: set train.objective"):
        settings(sweep_config(AX, None, []), "sweep")
    basic = {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"}
    assert settings(sweep_config(basic, None, []), "train") == {}
