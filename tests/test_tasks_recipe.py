"""``attnlab train data=folder`` without a reader trains the own-strips recipe
(attnlab.tasks.recipe): the reader of the height nearest the strips' own, until it stops
improving; anything the command names wins, and the lab's default is left."""

from __future__ import annotations

import pytest

from attnlab.tasks.recipe import (
    BUDGET,
    HEIGHTS,
    READERS,
    height_for,
    reader_keys,
    recipe_keys,
    with_recipe,
)


def scaled_strips(folder, scale: float, lmdb: bool = False):
    """Synthetic strips (32 px, ink as the generator places it) scanned at ``scale``: a
    folder of PNGs ``scale`` times taller, or (``lmdb``) the 32-px strips in an LMDB."""
    import torch
    from PIL import Image

    from attnlab.config import DataConfig
    from attnlab.data.export import export_folder
    from attnlab.data.sources import export_lmdb
    from attnlab.data.strips import StripSynth

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


def test_a_folder_without_a_reader_gets_the_recipe_first_and_a_line():
    args, said = with_recipe(["data=folder", "data.path=mine"])  # no such folder: 32 px
    assert args == [*SHORT, *BUDGET, "data=folder", "data.path=mine"]
    assert said.startswith("attnlab train: data=folder without model=: the own-strips recipe")
    assert "data.height=32, the default" in said


@pytest.mark.parametrize(
    "args",
    [
        ["data.path=mine"],  # the synthetic default: the lab's reader
        ["data=folder", "model=attention"],  # a reader named
        ["data=folder", "init_from=outputs/run"],  # another run's reader, fine-tuned
    ],
)
def test_what_the_command_names_is_left_as_it_is(args):
    assert with_recipe(args) == (args, None)


def test_the_keys_given_win_and_a_preset_brings_its_own_budget():
    args, said = with_recipe(["data=folder", "optim.lr=0.01", "train.steps=50"])
    rest = [b for b in BUDGET if not b.startswith("train.steps=")]
    assert args == [*SHORT, *rest, "data=folder", "optim.lr=0.01", "train.steps=50"]
    assert "optim.lr" not in said
    args, _ = with_recipe(["data=folder", "preset=tiny"])
    assert args == [*SHORT, "data=folder", "preset=tiny"]
    # a height given: the reader of the height nearest it
    args, said = with_recipe(["data=folder", "data.height=80"])
    assert args == [*reader_keys(READERS[64]), *BUDGET, "data=folder", "data.height=80"]
    assert "data.height=80 as given" in said


def test_init_from_pretrained_takes_the_packaged_reader_and_its_height():
    from attnlab.runs.pretrained import record

    packaged = record()
    args, said = with_recipe(["data=folder", "init_from=pretrained"])
    tuned = ["data=folder", "init_from=pretrained"]
    assert args == [*reader_keys(packaged["reader"]), *BUDGET, *tuned]
    assert f"the packaged {packaged['reader']} reader at its own {packaged['height']} px" in said


def test_the_command_line_composes_the_recipe(attnlab_run, tmp_path):
    res = attnlab_run("train", "data=folder", f"data.path={tmp_path}", "--cfg", "job", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"name: {READERS[32]}" in res.stdout and "own-strips recipe" in res.stdout


@pytest.mark.parametrize("scale, height", [(1.0, 32), (1.3, 32), (1.5, 64), (2.0, 64), (2.7, 64)])
def test_the_recipe_reads_strips_at_the_height_nearest_their_own(tmp_path, scale, height):
    folder = scaled_strips(tmp_path / "strips", scale)
    mine = ["data=folder", f"data.path={folder}"]
    args, said = with_recipe(mine)
    assert args == [*recipe_keys(height), *BUDGET, *mine]
    assert "(the strips' own height: " in said
    # The packaged reader keeps its own height, and says when the strips' is nearer another.
    tuned = [*mine, "init_from=pretrained"]
    args, said = with_recipe(tuned)
    assert args == [*reader_keys(READERS[32]), *BUDGET, *tuned]
    hint = f"is nearer {height}, at which the recipe trains model={READERS[height]}"
    assert (hint in said) == (height != 32)


def test_the_recipes_height_reads_an_lmdb_and_the_nearest_height_on_a_log_scale(tmp_path):
    lmdb = scaled_strips(tmp_path / "lmdb", 1.0, lmdb=True)
    args, said = with_recipe(["data=folder", f"data.path={lmdb}"])
    assert args[:2] == recipe_keys(32) and "once cropped to their ink" in said
    assert HEIGHTS == (32, 64) and set(READERS) == set(HEIGHTS)
    assert [height_for(h) for h in (8, 32, 45, 46, 60, 85, 400)] == [32, 32, 32, 64, 64, 64, 64]


def test_the_command_line_trains_tall_strips_at_64_with_their_reader(attnlab_run, tmp_path):
    folder = scaled_strips(tmp_path / "tall", 2.0)
    args = ["train", "data=folder", f"data.path={folder}", "--cfg", "job"]
    res = attnlab_run(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "height: 64" in res.stdout and f"name: {READERS[64]}" in res.stdout
    assert "data.height=64 " in res.stdout and "(the strips' own height" in res.stdout
