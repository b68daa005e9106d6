"""The bench's ``curves`` section (issue 59 item 2): a candidate's pace is measured by a real
``train.minutes`` run, each budget trains the steps that pace gives it, and its best
checkpoint reads a test folder it never trained or chose on, split into the lengths it was
trained on and the others. Real trainings and evaluations (attnlab subprocesses) at tiny
sizes; no timing is asserted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from attnlab.bench import curves
from attnlab.bench.sections import SECTIONS
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.tasks.compose import compose

TINY = ["preset=tiny", "eval.maps_k=0", "train.val_every=5"]


def _folder(out: Path, lengths: list[int], seed: int) -> Path:
    data = compose(["preset=tiny"]).data
    n = torch.tensor(lengths)
    return export_folder(StripSynth(data).sample(n, torch.Generator().manual_seed(seed)), out)


@pytest.fixture(scope="module")
def strips(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("curves")
    _folder(root / "train", [1, 2, 3] * 16, 0)
    _folder(root / "val", [1, 2, 3] * 4, 1)
    _folder(root / "test", [1, 2, 3, 4] * 3, 2)  # length 4: never trained on
    return root


@pytest.fixture
def commands_in_process(monkeypatch, tmp_path):
    """The section's ``attnlab`` commands run by the CLI in this process
    (``helpers.cli.bench_commands``): what a subprocess adds is not what these tests check."""
    from helpers.cli import bench_commands

    monkeypatch.setattr(curves, "attnlab", bench_commands("curves", tmp_path))


def test_a_budget_trains_the_steps_its_measured_pace_gives_and_reads_the_test_once(
    strips, commands_in_process
):
    name = "plain CRNN (reference)"
    assert "curves" in SECTIONS and name in curves.CANDIDATES
    out = strips / "out"
    args = (strips / "train", strips / "val", strips / "test", out, [0.02])
    r = curves.run(*args, [name], calibrate=0.04, extra=TINY)
    c = r["curves"][name]
    measured = c["pace"]["measured"]
    assert measured["ended_by"] == "minutes" and measured["minutes"] == 0.04
    assert c["pace"]["steps_per_minute"] == pytest.approx(
        measured["steps_taken"] / measured["minutes_spent"], rel=0.01
    )
    x = c["at"]["0.02"]
    assert x["steps"] == max(1, round(0.02 * c["pace"]["steps_per_minute"]))
    metrics = json.loads((Path(x["run"]) / "metrics.json").read_text())
    assert metrics["step"] == x["steps"] and metrics["best"]["exact_acc"] == x["val_exact"]
    overrides = (Path(x["run"]) / ".hydra" / "overrides.yaml").read_text()
    # its own one-cycle schedule, warmed up over a tenth of its steps, on one thread
    assert f"optim.warmup_steps={max(1, round(0.1 * x['steps']))}" in overrides
    assert "optim.schedule=linear" not in overrides and "train.threads=1" in overrides
    assert x["test_seen"]["n"] == 9 and x["test_unseen"]["n"] == 3
    assert 0 <= x["test_seen"]["correct"] <= 9
    # asked again: the runs are read, not trained again (same figures, no new run)
    again = curves.run(*args, [name], calibrate=0.04, extra=TINY)
    assert again["curves"][name]["at"] == c["at"]


def test_the_other_candidates_decay_linearly_and_a_given_pace_is_not_measured(
    strips, capsys, commands_in_process
):
    # folders whose names Hydra would read as a sweep (a comma) reach the runs as paths
    odd = strips / "odd, dir"
    odd.mkdir()
    for part in ("train", "val", "test"):
        (odd / part).symlink_to(strips / part, target_is_directory=True)
    out = odd / "out 2"
    args = (odd / "train", odd / "val", odd / "test", out, [0.5])
    r = curves.run(*args, ["ctc 32 px"], extra=TINY, paces={"ctc 32 px": 6.0})
    x = r["curves"]["ctc 32 px"]["at"]["0.5"]
    assert x["steps"] == 3 and not (out / "pace").exists()
    assert Path(x["run"]).parent == out / "runs"
    overrides = (Path(x["run"]) / ".hydra" / "overrides.yaml").read_text()
    assert "optim.schedule=linear" in overrides and "model=ctc" in overrides
    curves.show(r)
    assert "ctc 32 px" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown candidate"):
        curves.run(*args, ["ctc 99 px"], extra=TINY)


def test_every_candidate_has_its_own_folder_name_that_hydra_reads_as_one_path():
    slugs = [curves.slug(name) for name in curves.CANDIDATES]
    assert len(set(slugs)) == len(slugs)
    assert all(re.fullmatch(r"[0-9A-Za-z]+(-[0-9A-Za-z]+)*", s) for s in slugs), slugs
    assert curves.slug("crnn 64 px, wide stages") == "crnn-64-px-wide-stages"


def test_exact_accuracy_is_pooled_over_seen_and_unseen_lengths(tmp_path):
    f = tmp_path / "m.csv"
    rows = '1,"seen",10,0.9\n2,"seen",30,0.5\n"all","seen",40,0.6\n'
    f.write_text('"length","split","n","exact_acc"\n' + rows)
    seen, unseen = curves.split_exact(f)
    assert seen == {"correct": 24, "n": 40, "exact": 0.6} and unseen is None


def test_every_candidate_composes_and_the_wide_one_differs_from_the_recipe_only_in_its_stages():
    """Each candidate's keys make a config whose reader builds; the larger encoder is the
    recipe's 64-px reader with crnn's own conv stages and nothing else changed."""
    from attnlab.models import registry
    from attnlab.models.base import count_parameters
    from attnlab.tasks.recipe import recipe_keys

    configs = {name: compose(list(keys)) for name, keys in curves.CANDIDATES.items()}
    params = {
        name: count_parameters(registry.build(cfg.model, cfg.data.height, cfg.data.charset))
        for name, cfg in configs.items()
    }
    recipe, wide = compose(recipe_keys(64)), configs["crnn 64 px, wide stages"]
    assert list(recipe.model.conv_channels) == [16, 24, 32, 48, 64]
    assert list(wide.model.conv_channels) == list(compose(["model=crnn"]).model.conv_channels)
    wide.model.conv_channels = recipe.model.conv_channels
    assert wide == recipe
    assert params["crnn 64 px"] == 278_187 < params["crnn 64 px, wide stages"] == 624_507
