"""Docs the code checks: every sentence of README.md and docs/own-strips.md that states what
the own-strips recipe chooses (the reader per height, its settings, its budget, what
``init_from`` keeps) is rendered from ``attnlab.tasks.recipe`` or checked against it here,
so a change to the recipe that leaves a sentence behind fails."""

from __future__ import annotations

import re
from pathlib import Path

from attnlab.tasks import recipe

ROOT = Path(__file__).resolve().parents[1]
RULES = re.compile(r"<!-- recipe:rules[^>]*-->\n(?P<text>.*?)\n<!-- /recipe -->", re.S)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_docs_rules_are_the_recipes_own():
    """docs/own-strips.md's ``recipe:rules`` block is ``recipe.describe()`` to the letter."""
    text = (ROOT / "docs" / "own-strips.md").read_text()
    blocks = RULES.findall(text)
    assert len(blocks) == 1, "one recipe:rules block in docs/own-strips.md"
    assert blocks[0] == recipe.describe(), (
        "docs/own-strips.md's recipe:rules block differs from the recipe; paste "
        "attnlab.tasks.recipe.describe() between its markers"
    )


def test_the_readme_says_what_the_recipe_trains():
    assert flat(recipe.summary()) in flat((ROOT / "README.md").read_text())


def test_the_packaged_reader_is_described_as_it_was_made():
    """What the docs say the packaged reader is (reader and height) is its record's."""
    from attnlab.runs.pretrained import record

    made = record()
    said = f"the {made['height']}-px recipe (`model={made['reader']}`)"
    assert said in flat((ROOT / "docs" / "own-strips.md").read_text())
    assert recipe.PACKAGED[0] == f"model={made['reader']}"


def test_what_the_rules_state_follows_the_definitions():
    """The rendered text itself names each height's reader, setting and the budget (a
    describe() that stopped reading the definitions would fail here)."""
    text = flat(recipe.describe())
    for height, reader in recipe.READERS.items():
        assert f"at {height} px `{' '.join(recipe.reader_keys(reader))}`" in text
    assert " ".join(recipe.BUDGET) in text
    assert all(f"`{k}`" in text for k in recipe.KEPT)
