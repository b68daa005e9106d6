"""``attnlab train data=folder`` without a reader trains the own-strips recipe
(attnlab.tasks.recipe); anything the command names wins, and the lab's default is left."""

from __future__ import annotations

import pytest

from attnlab.tasks.recipe import BUDGET, HEIGHTS, OWN_STRIPS, height_for, with_recipe


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


def test_a_folder_without_a_reader_gets_the_recipe_first_and_a_line():
    args, said = with_recipe(["data=folder", "data.path=mine"])
    assert args == [*OWN_STRIPS, *BUDGET, "data=folder", "data.path=mine"]
    assert said.startswith("attnlab train: data=folder without model=: the own-strips recipe")


@pytest.mark.parametrize(
    "args",
    [
        ["data.path=mine"],  # the synthetic default: the lab's reader
        ["data=folder", "model=attention"],  # a reader named
        ["data=folder", "init_from=outputs/run"],  # another run's reader, fine-tuned
        ["data=folder", *OWN_STRIPS, *BUDGET],  # all given
    ],
)
def test_what_the_command_names_is_left_as_it_is(args):
    assert with_recipe(args) == (args, None)


def test_only_the_keys_not_given_are_added_and_pretrained_takes_the_recipe():
    args, said = with_recipe(["data=folder", "optim.lr=0.01", "init_from=pretrained"])
    added = [r for r in [*OWN_STRIPS, *BUDGET] if not r.startswith("optim.lr=")]
    assert args == [*added, "data=folder", "optim.lr=0.01", "init_from=pretrained"]
    assert "optim.lr" not in said
    # a budget key given wins over the recipe's; a preset brings its own budget
    args, _ = with_recipe(["data=folder", "train.steps=50"])
    rest = [b for b in BUDGET if not b.startswith("train.steps=")]
    assert args == [*OWN_STRIPS, *rest, "data=folder", "train.steps=50"]
    args, _ = with_recipe(["data=folder", "preset=tiny"])
    assert args == [*OWN_STRIPS, "data=folder", "preset=tiny"]


def test_the_command_line_composes_the_recipe(attnlab_run, tmp_path):
    res = attnlab_run("train", "data=folder", f"data.path={tmp_path}", "--cfg", "job", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    reader = OWN_STRIPS[0].split("=", 1)[1]
    assert f"name: {reader}" in res.stdout and "own-strips recipe" in res.stdout


@pytest.mark.parametrize("scale, height", [(1.0, 32), (1.3, 32), (1.5, 64), (2.0, 64), (2.7, 64)])
def test_the_recipe_reads_strips_at_the_height_nearest_their_own(tmp_path, scale, height):
    folder = scaled_strips(tmp_path / "strips", scale)
    args, said = with_recipe(["data=folder", f"data.path={folder}"])
    mine = ["data=folder", f"data.path={folder}"]
    assert args == [*OWN_STRIPS, *BUDGET, f"data.height={height}", *mine]
    assert f"data.height={height} (the strips' own height: " in said
    # The command's own data.height wins, and the packaged reader keeps its height.
    mine = ["data=folder", f"data.path={folder}", "data.height=48"]
    assert with_recipe(mine)[0] == [*OWN_STRIPS, *BUDGET, *mine]
    tuned = ["data=folder", f"data.path={folder}", "init_from=pretrained"]
    args, said = with_recipe(tuned)
    assert args == [*OWN_STRIPS, *BUDGET, *tuned]
    hint = "init_from=pretrained reads at its own 32 px; the strips' own height"
    assert (hint in said) == (height != 32)


def test_the_recipes_height_reads_an_lmdb_and_the_nearest_height_on_a_log_scale(tmp_path):
    lmdb = scaled_strips(tmp_path / "lmdb", 1.0, lmdb=True)
    args, said = with_recipe(["data=folder", f"data.path={lmdb}"])
    assert "data.height=32" in args and "once cropped to their ink" in said
    assert HEIGHTS == (32, 64)
    assert [height_for(h) for h in (8, 32, 45, 46, 60, 85, 400)] == [32, 32, 32, 64, 64, 64, 64]


def test_the_command_line_trains_tall_strips_at_64(attnlab_run, tmp_path):
    folder = scaled_strips(tmp_path / "tall", 2.0)
    args = ["train", "data=folder", f"data.path={folder}", "--cfg", "job"]
    res = attnlab_run(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "height: 64" in res.stdout and "data.height=64 (the strips' own height" in res.stdout
