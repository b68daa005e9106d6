"""A new user's first hour on the command line (issue #36): reader keys listed with their
defaults and allowed values, a typo in a config group answered with its choices, a refused
command that leaves no directory it made, data preview taking train's overrides, and an
optimising sweep that names its trials and its best one. In-process through Typer's runner
where the subprocess is not what is tested; the Optuna study is a real subprocess."""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.config import ModelConfig
from attnlab.models import config_keys, registry
from attnlab.tasks import outdirs
from attnlab.tasks.compose import compose


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """``cli(*args)`` runs ``attnlab ARGS`` in this process, in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def run(*args: object):
        return CliRunner().invoke(app, [str(a) for a in args])

    return run


def error_line(res) -> str:
    """The one line a refused command says, checked to be the only one on stderr."""
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: error: "), res.stderr
    return lines[0]


# --- 1. attnlab readers lists each reader's own keys ----------------------------------------


def test_readers_lists_every_readers_own_keys_with_defaults_and_allowed_values(cli):
    res = cli("readers")
    assert res.exit_code == 0, res.stderr
    sections = res.stdout.split("\nmodel=")
    for name in registry.names():
        spec = registry.get(name)
        body = next(s for s in sections if s.startswith(f"{name}\n"))
        shared = {f.name for f in dataclasses.fields(ModelConfig)}
        own = [f for f in dataclasses.fields(spec.config) if f.name not in shared]
        assert own or "(no keys of its own)" in body
        for f in own:  # every field the reader adds, with its default
            default = getattr(spec.config(name=name), f.name)
            default = getattr(default, "value", default)
            text = "null" if default is None else str(default)
            text = text.lower() if isinstance(default, bool) else text
            assert f"model.{f.name}={text} " in body, (name, f.name, body)
    # The key: its values, as the type that Hydra checks allows them.
    transformer = next(s for s in sections if s.startswith("transformer\n"))
    row = next(ln for ln in transformer.splitlines() if "model.pos=" in ln).split()
    assert row[:2] == ["model.pos=sinusoidal", "sinusoidal|learned|relative|rotary|none"]
    for value in row[1].split("|"):  # each listed value composes
        cfg = compose(["preset=tiny", "model=transformer", f"model.pos={value}"])
        assert cfg.model.pos.value == value
    assert "model.hidden=64 " in sections[-1] and "model.stride=8 " in sections[-1]

    one = cli("readers", "window")
    assert one.exit_code == 0 and one.stdout.splitlines()[0].startswith("window ")
    assert "model.stop=first" in one.stdout and "model.pos=sinusoidal" not in one.stdout
    assert "unknown reader 'nope'" in error_line(cli("readers", "nope"))


class Kind(str, enum.Enum):
    small = "small"
    large = "large"


@dataclass
class _Base:
    name: str = "x"
    shared: int = 1  # not the reader's own


@dataclass
class _Made(_Base):
    # The kind of thing, said over
    # two lines.
    kind: Kind = Kind.large
    other: Kind | None = None  # null = follow kind
    mode: Literal["a", "b"] = "b"
    sizes: list[int] = field(default_factory=lambda: [3, 4])
    flag: bool = False
    # One sentence. A second sentence is left out when the note is too long, as it is here,
    # being well over ninety characters long.
    rate: float = 0.5


def test_keys_come_from_the_dataclass_its_types_and_its_comments():
    keys = {k.name: k for k in config_keys.keys_of(_Made, below=_Base)}
    assert list(keys) == [f"model.{n}" for n in ("kind", "other", "mode", "sizes", "flag", "rate")]
    assert (keys["model.kind"].default, keys["model.kind"].allowed) == ("large", "small|large")
    assert keys["model.kind"].note == "The kind of thing, said over two lines."
    assert keys["model.other"].allowed == "small|large|null"
    assert keys["model.other"].note == "null = follow kind"
    assert (keys["model.mode"].default, keys["model.mode"].allowed) == ("b", "a|b")
    assert (keys["model.sizes"].default, keys["model.sizes"].allowed) == ("[3,4]", "list[int]")
    assert (keys["model.flag"].default, keys["model.flag"].allowed) == ("false", "true|false")
    assert keys["model.rate"].note == "One sentence"
    lines = config_keys.table(list(keys.values()))
    assert lines[0].split() == ["model.kind=large", "small|large", "The", "kind", "of", "thing,",
                                "said", "over", "two", "lines."]  # fmt: skip


# --- 2. a typo in a config group: its choices, for every command ----------------------------

COMMANDS = {
    "train": ["train", "preset=tiny"],
    "sweep": ["sweep", "lengths", "preset=tiny"],
    "eval": ["eval", "some-run"],
    "probe": ["probe", "some-run"],
    "preview": ["data", "preview"],
    "export": ["data", "export", "some-folder"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_typo_in_a_group_names_its_choices(cli, tmp_path, command):
    args = COMMANDS[command]
    cases = [("hydra/launcher=paralel", "-m", "hydra/launcher", "(did you mean "
              "hydra/launcher=parallel?)")]  # fmt: skip
    if command in ("train", "sweep", "preview", "export"):
        cases += [("model=fixd", None, "model", "(did you mean model=fixed?)"),
                  ("data=lb", None, "data", "(did you mean data=lab?)"),
                  ("preset=tny", None, "preset", "(did you mean preset=tiny?)")]  # fmt: skip
    for override, flag, group, hint in cases:
        extra = [flag] if flag and command != "sweep" else []
        line = error_line(cli(*args, override, *extra))
        choices = sorted(
            p.stem
            for p in Path(registry.__file__).parents[2].joinpath("conf", group).glob("*.yaml")
        )
        wanted = f"{override}: no config {group}/{override.split('=')[1]}; choose one of: "
        assert wanted in line and line.endswith(hint), line
        listed = line.split("choose one of: ")[1].split(" (did")[0].split(", ")
        assert set(choices) <= set(listed) and not any(c.endswith("_schema") for c in listed)
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_group_a_command_does_not_take_says_so(cli):
    line = error_line(cli("eval", "some-run", "preset=tiny"))
    assert line == "attnlab: error: config: preset: attnlab eval takes no preset (not one of " \
        "its config groups)"  # fmt: skip


# --- 3. a refused command leaves no directory it made ---------------------------------------


def test_a_refused_train_leaves_no_directory_it_made(cli, tmp_path):
    line = error_line(cli("train", "preset=tiny", "train.steps=0", "train.threads=1"))
    assert line.endswith("train.steps=0: must be >= 1")
    assert not (tmp_path / "outputs").exists()  # no outputs/<date>/<time>/

    (tmp_path / "outputs").mkdir()  # what existed before stays, even empty
    kept = tmp_path / "empty-before"
    kept.mkdir()
    for run in (kept, tmp_path / "new" / "deeper" / "run"):
        error_line(cli("train", "preset=tiny", "train.steps=0", f"hydra.run.dir={run}"))
    assert kept.is_dir() and not list(kept.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty-before", "outputs"]


def test_only_empty_folders_the_command_made_are_removed(tmp_path):
    outdirs.forget()
    run = tmp_path / "a" / "b" / "run"
    outdirs.record(run)
    (run / "empty").mkdir(parents=True)
    (run / "kept").mkdir()
    (run / "kept" / "file.txt").write_text("something")
    removed = outdirs.remove_created()
    assert sorted(p.name for p in removed) == ["empty"]
    assert (run / "kept" / "file.txt").read_text() == "something"

    outdirs.record(tmp_path / "a")  # exists: nothing recorded, nothing removed
    outdirs.record(tmp_path / "c" / "d")
    (tmp_path / "c" / "d").mkdir(parents=True)
    assert outdirs.remove_created() == [tmp_path / "c" / "d", tmp_path / "c"]
    assert (tmp_path / "a").is_dir() and not (tmp_path / "c").exists()


# --- 4. the data commands take train's overrides --------------------------------------------


def test_data_commands_take_the_overrides_of_train(cli, tmp_path):
    for overrides in (["preset=tiny"], ["preset=tiny", "data=clean", "model=fixed"]):
        strips = compose(overrides, config_name="strips")
        assert strips.data == compose(overrides).data  # the strips training would draw
    assert compose(["preset=tiny"], config_name="strips").data.train_lengths == [1, 3]

    res = cli("data", "preview", "preset=tiny", "preview.n=3", "preview.out=p.png")
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    res = cli("data", "export", "out", "--n", "3", "preset=tiny", "data=clean", "model=fixed")
    assert res.exit_code == 0, res.stderr
    assert len(pd.read_csv(tmp_path / "out" / "labels.csv", dtype=str)) == 3


# --- 5. an optimising sweep names its trials and its best one -------------------------------


def test_an_optuna_study_names_its_trials_and_its_best(attnlab_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep = tmp_path / "study"
    res = attnlab_run(
        "train", "-m", "preset=tiny", "train.progress=plain", "train.threads=1",
        "hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0", "hydra.sweeper.n_trials=2",
        "train.objective=val_exact", "optim.lr=interval(0.001,0.05)",
        "optim.warmup_steps=choice(0,-1)", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_csv(sweep / "trials.csv", dtype={"dir": str})
    assert list(table.columns) == ["trial", "dir", "overrides", "objective", "value", "state"]
    assert list(table.trial) == [0, 1] and set(table.objective) == {"val_exact"}
    failed = res.stdout.count("Failed experiment: optim.warmup_steps=-1: must be >= 0")
    assert (table.state == "failed").sum() == failed and table[
        table.state == "failed"
    ].value.isna().all()
    for row in table.itertuples():
        trial = sweep / row.dir
        said = yaml.safe_load((trial / ".hydra/overrides.yaml").read_text())
        assert row.overrides.split() == said  # the trial's own overrides
        if row.state == "complete":
            value = json.loads((trial / "objective.json").read_text())["value"]
            assert row.value == pytest.approx(value)
    done = table[table.state == "complete"]
    best = done.sort_values(["value", "trial"], ascending=[False, True]).iloc[0]
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(best.value)
    lr = yaml.safe_load((sweep / best.dir / ".hydra/config.yaml").read_text())["optim"]["lr"]
    if (done.value == best.value).sum() == 1:  # a tie may name either trial
        assert results["best_params"]["optim.lr"] == pytest.approx(lr)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("best trial: "))
    assert line.startswith(f"best trial: {best.trial} (val_exact={best.value:.6g}, maximized), "
                           f"directory {sweep / best.dir}; 2 trials ({failed} failed) in "
                           f"{sweep / 'trials.csv'}")  # fmt: skip
    for clutter in ("A new study created", "Study name:", "Storage:", "Sampler:", "setup plugin"):
        assert clutter not in res.stdout + res.stderr, clutter
    assert "attnlab sets hydra.sweeper.direction=maximize" in res.stdout


def test_the_best_trial_follows_the_objectives_direction():
    from attnlab.tasks.trials import best_of, optimising

    def trial(n, value, objective="val_cer", state="complete"):
        return {"trial": n, "value": value, "objective": objective, "state": state}

    cer = [trial(0, 0.4), trial(1, 0.2), trial(2, None, state="failed"), trial(3, 0.2)]
    assert best_of(cer)["trial"] == 1  # minimised; the first of a tie, as Optuna picks
    exact = [trial(0, 0.4, "val_exact"), trial(1, 0.2, "val_exact")]
    assert best_of(exact)["trial"] == 0  # maximised
    assert best_of([trial(0, None, state="failed")]) is None

    from hydra.types import RunMode
    from omegaconf import OmegaConf

    def sweep(target, mode=RunMode.MULTIRUN):
        return OmegaConf.create({"hydra": {"mode": mode, "sweeper": {"_target_": target}}})

    optuna = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert optimising(sweep(optuna))
    assert not optimising(sweep("hydra._internal.core_plugins.basic_sweeper.BasicSweeper"))
    assert not optimising(sweep(optuna, RunMode.RUN))
