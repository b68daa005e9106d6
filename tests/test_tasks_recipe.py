"""``attnlab train data=folder`` without a reader trains the own-strips recipe
(attnlab.tasks.recipe); anything the command names wins, and the lab's default is left."""

from __future__ import annotations

import pytest

from attnlab.tasks.recipe import OWN_STRIPS, with_recipe


def test_a_folder_without_a_reader_gets_the_recipe_first_and_a_line():
    args, said = with_recipe(["data=folder", "data.path=mine"])
    assert args == [*OWN_STRIPS, "data=folder", "data.path=mine"]
    assert said.startswith("attnlab train: data=folder without model=: the own-strips recipe")


@pytest.mark.parametrize(
    "args",
    [
        ["data.path=mine"],  # the synthetic default: the lab's reader
        ["data=folder", "model=attention"],  # a reader named
        ["data=folder", "init_from=outputs/run"],  # another run's reader, fine-tuned
        ["data=folder", *OWN_STRIPS],  # all given
    ],
)
def test_what_the_command_names_is_left_as_it_is(args):
    assert with_recipe(args) == (args, None)


def test_only_the_keys_not_given_are_added_and_pretrained_takes_the_recipe():
    args, said = with_recipe(["data=folder", "optim.lr=0.01", "init_from=pretrained"])
    added = [r for r in OWN_STRIPS if not r.startswith("optim.lr=")]
    assert args == [*added, "data=folder", "optim.lr=0.01", "init_from=pretrained"]
    assert "optim.lr" not in said


def test_the_command_line_composes_the_recipe(attnlab_run, tmp_path):
    res = attnlab_run("train", "data=folder", f"data.path={tmp_path}", "--cfg", "job",
                      cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    reader = OWN_STRIPS[0].split("=", 1)[1]
    assert f"name: {reader}" in res.stdout and "own-strips recipe" in res.stdout
