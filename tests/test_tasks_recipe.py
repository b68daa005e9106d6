"""``attnlab train data=folder`` without a reader trains the own-strips recipe, and
``init_from=RUN`` RUN's own reader (attnlab.tasks.recipe): resolved in one place, so the
CLI (flags in any order), every job of a multirun, ``compose()`` and ``--cfg job`` agree;
anything the command names wins, and the lab's default is left."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnlab.tasks.compose import compose
from attnlab.tasks.recipe import (
    BUDGET,
    HEIGHTS,
    MINUTES,
    READERS,
    TIERS,
    budget_of,
    command_with,
    height_for,
    minutes_named,
    reader_at,
    reader_keys,
    recipe_keys,
    resolve,
)


def scaled_strips(folder, scale: float, lmdb: bool = False):
    """Synthetic strips (32 px, ink as the generator places it) scanned at ``scale``: a
    folder of PNGs ``scale`` times taller, or (``lmdb``) the 32-px strips in an LMDB."""
    import torch
    from PIL import Image

    from attnlab.config import DataConfig
    from attnlab.data.strips import StripSynth
    from attnlab.data.write_lmdb import export_lmdb
    from attnlab.data.write_strips import export_folder

    gen = torch.Generator().manual_seed(3)
    strips = StripSynth(DataConfig()).sample(torch.tensor([2, 5, 8, 3, 6, 1]), gen)
    if lmdb:
        return export_lmdb(strips, folder)
    export_folder(strips, folder)
    for png in folder.glob("*.png"):
        with Image.open(png) as im:
            size = (round(im.width * scale), round(im.height * scale))
            im.resize(size, Image.BICUBIC).save(png)
    return folder


SHORT = reader_keys(READERS[32])  # strips read at 32 px: the default height


def with_recipe(args: list[str]) -> tuple[list[str], str | None]:
    """The command as the CLI hands it to Hydra, and the line it says."""
    return command_with(args)


def test_a_folder_without_a_reader_gets_the_recipe_after_its_own_keys_and_a_line():
    args, said = with_recipe(["data=folder", "data.path=mine"])  # no such folder: 32 px
    assert args == ["data=folder", "data.path=mine", *SHORT, *BUDGET]
    assert said.startswith("attnlab train: data=folder without model=: the own-strips recipe")
    assert "data.height=32, the default" in said


@pytest.mark.parametrize(
    "args",
    [
        ["data.path=mine"],  # the synthetic default: the lab's reader
        ["data=folder", "model=attention"],  # a reader named
        ["-m", "data=folder", "data.path=a,b"],  # a multirun: each job adds its own
    ],
)
def test_what_the_command_names_is_left_as_it_is(args):
    assert with_recipe(args) == (args, None)


def test_the_keys_given_win_and_a_preset_brings_its_own_budget():
    args, said = with_recipe(["data=folder", "optim.lr=0.01", "train.steps=50"])
    # train.steps named: the user's budget, no minutes beside it
    rest = [b for b in BUDGET if not b.startswith(("train.steps=", "train.minutes="))]
    assert args == ["data=folder", "optim.lr=0.01", "train.steps=50", *SHORT, *rest]
    assert "optim.lr" not in said and "the budget: train.steps=50 as given" in said
    args, _ = with_recipe(["data=folder", "preset=tiny"])
    assert args == ["data=folder", "preset=tiny", *SHORT]
    # a height given: the reader of the height nearest it
    args, said = with_recipe(["data=folder", "data.height=80"])
    assert args == ["data=folder", "data.height=80", *reader_keys(READERS[64]), *BUDGET]
    assert "data.height=80 as given" in said
    # +key and ++key name the key too
    args, _ = with_recipe(["data=folder", "++train.steps=7", "+model=ctc"])
    assert args == ["data=folder", "++train.steps=7", "+model=ctc"]


def test_a_budget_in_minutes_picks_the_reader_that_reads_most_within_it_and_says_so():
    """``train.minutes=M``: the reader of M's tier at the strips' height, the recipe's steps
    ceiling and schedule beside it, and a line that says what was chosen, for which budget
    and how long it takes; the default budget when none is named."""
    assert all(t[0][0] == 0 for t in TIERS.values())  # every budget has a reader
    assert all(
        [start for start, _ in t] == sorted({start for start, _ in t}) for t in TIERS.values()
    )
    for height, tiers in TIERS.items():
        for start, reader in tiers:
            for minutes in (start + 0.5, start * 1.01 + 0.01):
                args, said = with_recipe(
                    ["data=folder", f"data.height={height}", f"train.minutes={minutes:g}"]
                )
                assert reader_at(height, minutes) == reader and f"model={reader}" in args
                assert not [a for a in args[3:] if a.startswith("train.minutes=")]
                assert "train.steps=1000000" in args and "optim.schedule=linear" in args
                assert f"model={reader} reads the most at {height} px" in said
                assert f"train.minutes={minutes:g} (as given): training ends within" in said
    args, said = with_recipe(["data=folder", "data.height=64"])
    assert f"model={READERS[64]}" in args and f"train.minutes={MINUTES:g}" in args
    assert f"train.minutes={MINUTES:g} (the default budget): training ends within" in said
    assert READERS == {h: reader_at(h, MINUTES) for h in HEIGHTS}
    # train.minutes=null (off): the steps are the budget, no ceiling of a million steps
    for off in ("null", "0", "0.00", "'~'"):
        args, said = with_recipe(["data=folder", f"train.minutes={off}"])
        assert not [a for a in args if a.startswith("train.steps=")], args
        assert f"train.minutes={off} as given: train.steps" in said
    # a train.minutes that is not a number: the default budget's reader (the config says why)
    args, _ = with_recipe(["data=folder", "data.height=64", "train.minutes=soon"])
    assert f"model={READERS[64]}" in args


@pytest.mark.parametrize(
    "value, minutes",
    [(None, None), ("null", None), ("~", None), ("0", None), ("0.0", None), ("'7.5'", 7.5),
     ("30", 30.0), ("-3", MINUTES), ("nan", MINUTES), ("inf", MINUTES), ("soon", MINUTES)],
)  # fmt: skip
def test_train_minutes_is_read_in_one_place(value, minutes):
    """``minutes_named``: the one reading of the command's train.minutes, which both the
    budget (off or on) and the reader's tier (its value) ask."""
    args = ["data=folder"] + ([] if value is None else [f"train.minutes={value}"])
    assert minutes_named(args) == minutes
    assert budget_of(args) == (minutes or MINUTES)


def test_self_training_gets_a_budget_in_steps_not_minutes():
    """data.unlabelled trains in rounds sized in steps and refuses train.minutes: the recipe
    gives it ROUNDS_BUDGET, never the minutes that self-training would refuse."""
    from attnlab.tasks.recipe import ROUNDS_BUDGET

    args, said = with_recipe(["data=folder", "data.unlabelled=more"])
    assert args == ["data=folder", "data.unlabelled=more", *SHORT, *ROUNDS_BUDGET]
    assert not [a for a in args if a.startswith("train.minutes=")]
    assert "data.unlabelled: rounds sized in steps" in said
    args, _ = with_recipe(["data=folder", "data.unlabelled=null"])  # none: the minutes
    assert f"train.minutes={MINUTES:g}" in args


@pytest.mark.parametrize("named", ["data.augment=[affine]", "data.elastic=1.0", "data.augmented=1"])
def test_an_augmentation_the_user_names_is_never_turned_off_by_the_recipe(named):
    """The 64-px reader trains without augmentation unless the user names one: then none of
    the recipe's augmentation keys is added (the user's choice applies whole)."""
    args, _ = with_recipe(["data=folder", "data.height=64", named])
    assert "model=crnn" in args and "optim.lr=0.002" in args
    assert not {"data.augmented=0", "data.elastic=0"} & set(args)
    plain, _ = with_recipe(["data=folder", "data.height=64"])
    assert {"data.augmented=0", "data.elastic=0"} <= set(plain)


@pytest.mark.parametrize(
    "named", ["encoder=resnet", "encoder=column", "model.conv_channels=[8,16,16,32,32]"]
)
def test_an_encoder_or_stages_the_user_names_replace_the_recipes_narrow_stages(named):
    """The 64-px reader trains with narrower stages than crnn's own, and its line says so,
    unless the user names an encoder or stages of their own: then the recipe's stages are
    left out, and the command composes (an encoder without conv stages would refuse them)."""
    from attnlab.tasks.recipe import NARROW_STAGES

    plain, said = with_recipe(["data=folder", "data.height=64"])
    assert NARROW_STAGES in plain and "model=crnn" in plain
    assert f" {NARROW_STAGES} " in said  # the line names the stages, as every other choice
    args, said = with_recipe(["data=folder", "data.height=64", named])
    assert NARROW_STAGES not in args and NARROW_STAGES not in said
    assert "model=crnn" in args and "optim.lr=0.002" in args
    cfg = compose([a for a in args if a != "data=folder"])
    if named.startswith("model.conv_channels"):
        assert list(cfg.model.conv_channels) == [8, 16, 16, 32, 32]
    else:
        assert cfg.model.backbone == named.split("=")[1]


def test_augmentations_named_where_none_would_apply_are_refused_in_one_line(tmp_path):
    from attnlab.errors import UserError
    from attnlab.training.prepare import check_training

    cfg = compose(["preset=tiny", "data=folder", "data.height=64", "data.augment=[blur]",
                   "data.augmented=0", f"data.path={tmp_path}"])  # fmt: skip
    with pytest.raises(UserError, match=r"data\.augment=\['blur'\]: with data\.augmented=0"):
        check_training(cfg)


@pytest.mark.parametrize("scale, height", [(1.0, 32), (1.3, 32), (1.5, 64), (2.0, 64), (2.7, 64)])
def test_the_recipe_reads_strips_at_the_height_nearest_their_own(tmp_path, scale, height):
    folder = scaled_strips(tmp_path / "strips", scale)
    mine = ["data=folder", f"data.path={folder}"]
    args, said = with_recipe(mine)
    assert args == [*mine, *recipe_keys(height), *BUDGET]
    assert "(the strips' own height: " in said


def test_the_recipes_height_reads_an_lmdb_and_the_nearest_height_on_a_log_scale(tmp_path):
    lmdb = scaled_strips(tmp_path / "lmdb", 1.0, lmdb=True)
    got = resolve(["data=folder", f"data.path={lmdb}"])
    assert got.keys[:2] == recipe_keys(32)[:2] and "once cropped to their ink" in got.line
    assert HEIGHTS == (32, 64) and set(READERS) == set(HEIGHTS)
    assert [height_for(h) for h in (8, 32, 45, 46, 60, 85, 400)] == [32, 32, 32, 64, 64, 64, 64]


def test_compose_gives_the_config_the_command_line_trains(attnlab_run, tmp_path):
    """``compose()`` and ``attnlab train --cfg job``, with the flag before or after the
    keys, print the same config: the recipe's reader at the strips' height."""
    folder = scaled_strips(tmp_path / "tall", 2.0)
    mine = ["data=folder", f"data.path={folder}"]
    cfg = compose(mine)
    assert cfg.model.name == READERS[64] and cfg.data.height == 64 and cfg.train.patience is None
    assert cfg.train.minutes == MINUTES and cfg.optim.schedule == "linear"
    for args in (["--cfg", "job", *mine], [*mine, "--cfg", "job"]):
        res = attnlab_run("train", *args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"name: {READERS[64]}" in res.stdout and "height: 64" in res.stdout
        assert "(the strips' own height" in res.stdout


def test_every_job_of_a_multirun_measures_its_own_folder(attnlab_run, tmp_path):
    """``-m data.path=A,B`` with the flag first (once Hydra's usage text): each job's
    config is the recipe's for its own strips, and says so in its line."""
    short, tall = scaled_strips(tmp_path / "short", 1.0), scaled_strips(tmp_path / "tall", 2.0)
    sweep = tmp_path / "sweep"
    res = attnlab_run(
        "train", "-m", "data=folder", f"data.path={short},{tall}", "preset=tiny",
        "train.steps=1", "train.threads=1", "data.val_share=0.5",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    from omegaconf import OmegaConf

    got = {}
    for job in ("0", "1"):
        cfg = OmegaConf.load(sweep / job / ".hydra" / "config.yaml")
        got[str(cfg.data.path)] = (cfg.model.name, cfg.data.height)
    assert got == {str(short): (READERS[32], 32), str(tall): (READERS[64], 64)}
    assert res.stdout.count("the own-strips recipe") == 2


def _source(tmp_path, *keys: str):
    """A tiny run of ``keys`` (trained in-process, two steps), and its config."""
    from attnlab.runs.rundir import RunDir
    from attnlab.training.trainer import Trainer

    run = tmp_path / "source"
    cfg = compose(["preset=tiny", "train.steps=2", "train.threads=1", *keys])
    Trainer(cfg, RunDir(run)).run()
    return run, cfg


def test_init_from_a_run_keeps_its_reader_encoder_height_and_charset(tmp_path):
    run, before = _source(tmp_path, "model=ctc", "data.height=48", "model.hidden=24",
                          "data.charset=0123456789X")  # fmt: skip
    for extra in ([], ["data=folder", f"data.path={tmp_path}"]):
        cfg = compose([f"init_from={run}", "preset=tiny", *extra])
        assert cfg.model == before.model, extra
        assert (cfg.data.height, cfg.data.charset) == (48, "0123456789X")
    got = resolve([f"init_from={run}"])
    assert got.line.startswith(f"attnlab train: init_from={run}: model=ctc data.height=48")
    assert "its ctc reader" in got.line and "at 48 px" in got.line
    # what the user gives wins where the weights can take it: a charset maps rows by character
    cfg = compose([f"init_from={run}", "preset=tiny", "data.charset=0123456789"])
    assert cfg.data.charset == "0123456789" and cfg.model.name == "ctc"


def test_init_from_trains_every_tensor_of_the_run_and_refuses_keys_that_cannot_fit(
    tmp_path, attnlab_run
):
    run, _ = _source(tmp_path, "model=attention", "model.hidden=24")
    tuned = tmp_path / "tuned"
    base = ["train", "preset=tiny", "train.steps=1", "train.threads=1", f"init_from={run}"]
    res = attnlab_run(*base, f"hydra.run.dir={tuned}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    import torch

    ckpt = torch.load(tuned / "checkpoints" / "last.pt", weights_only=False)
    assert ckpt["init_from"]["reinitialised"] == [] and ckpt["init_from"]["reader"] == "attention"
    for key, says in [
        ("model=ctc", "model=ctc but the source is an attention reader"),
        ("model.hidden=16", "model.hidden=16 but the source run's is 24"),  # the encoder's
        ("model.attn_dim=40", "model.attn_dim=40 cannot fit the source's weights"),  # decoder
    ]:
        res = attnlab_run(*base, key, f"hydra.run.dir={tmp_path / 'x'}", cwd=tmp_path)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, res.stderr
        assert says in lines[0] and "init_from keeps the source's reader" in lines[0]


def test_init_from_pretrained_takes_the_packaged_reader_and_its_height():
    from attnlab.runs.pretrained import record

    packaged = record()
    cfg = compose(["data=folder", "init_from=pretrained"])
    assert cfg.model.name == packaged["reader"] and cfg.data.height == packaged["height"]
    got = resolve(["data=folder", "init_from=pretrained"])
    assert f"its {packaged['reader']} reader" in got.line
    assert set(BUDGET) <= set(got.keys)


def test_init_from_pretrained_takes_the_packaged_reader_nearest_the_strips_height(tmp_path):
    folder = scaled_strips(tmp_path / "tall", 2.0)  # 64 px once cropped
    got = resolve(["data=folder", f"data.path={folder}", "init_from=pretrained"])
    assert "data.height=64" in got.keys and "model=ctc" in got.keys
    assert "pretrained-64, its ctc reader" in got.line and "nearest the strips' own" in got.line
    asked = resolve(["data=folder", "data.height=48", "init_from=pretrained"])
    assert "pretrained-64, its ctc reader" in asked.line and "data.height=48 as given" in asked.line
    assert "data.height=64" not in asked.keys  # the height given stays the command's
    named = resolve(["data=folder", f"data.path={folder}", "init_from=pretrained-32"])
    assert "data.height=32" in named.keys  # a name says its height: the strips' is then said
    assert f"is nearer 64, at which the recipe trains model={READERS[64]}" in named.line


def test_the_folder_is_decoded_once_for_the_recipes_height_and_training(tmp_path, monkeypatch):
    """The strips the recipe measures are the ones training reads: each file is decoded
    once, and the strips read are the same as a fresh decode's."""
    from attnlab.data import sources, strip_cache

    folder = scaled_strips(tmp_path / "tall", 2.0)
    files = sorted(p.name for p in folder.glob("*.png"))
    fresh = strip_cache.decode_all(sources.open_source(folder, warn=print), 64, True)
    calls = []
    real = strip_cache.decode
    monkeypatch.setattr(
        strip_cache, "decode", lambda p, *a, **k: calls.append(p) or real(p, *a, **k)
    )
    cfg = compose(["data=folder", f"data.path={folder}"])
    assert cfg.data.height == 64 and len(calls) == len(files)
    _, cache = strip_cache.read_source(str(folder), "data.path", cfg.data, print)
    assert sorted(Path(p).name for p in calls) == files  # none decoded twice
    for a, b in zip(cache.images, fresh.images, strict=True):
        assert torch.equal(a, b)
