"""Docs the code checks: every sentence of README.md and docs/own-strips.md that states what
the own-strips recipe chooses (the reader per height, its settings, its budget, what
``init_from`` keeps) is rendered from ``attnlab.tasks.recipe`` or checked against it here,
so a change to the recipe that leaves a sentence behind fails."""

from __future__ import annotations

import re
from pathlib import Path

from attnlab.tasks import recipe, recipe_words

ROOT = Path(__file__).resolve().parents[1]
RULES = re.compile(r"<!-- recipe:rules[^>]*-->\n(?P<text>.*?)\n<!-- /recipe -->", re.S)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_docs_rules_are_the_recipes_own():
    """docs/own-strips.md's ``recipe:rules`` block is ``recipe_words.describe()`` to the letter."""
    text = (ROOT / "docs" / "own-strips.md").read_text()
    blocks = RULES.findall(text)
    assert len(blocks) == 1, "one recipe:rules block in docs/own-strips.md"
    assert blocks[0] == recipe_words.describe(), (
        "docs/own-strips.md's recipe:rules block differs from the recipe; paste "
        "attnlab.tasks.recipe_words.describe() between its markers"
    )


def test_the_readme_says_what_the_recipe_trains():
    assert flat(recipe_words.summary()) in flat((ROOT / "README.md").read_text())


def test_the_packaged_readers_are_described_as_they_were_made():
    """What the docs say each packaged reader is (reader and height) is its record's."""
    from attnlab.runs import pretrained

    text = flat((ROOT / "docs" / "own-strips.md").read_text())
    for height in pretrained.HEIGHTS:
        made = pretrained.record(height)
        said = f"`{made['name']}`, the {made['height']}-px `model={made['reader']}`"
        assert said in text, said
        assert recipe.PACKAGED[height][0] == f"model={made['reader']}"


def test_what_the_rules_state_follows_the_definitions():
    """The rendered text itself names each height's reader, setting and the budget (a
    describe() that stopped reading the definitions would fail here)."""
    text = flat(recipe_words.describe())
    for height, tiers in recipe.TIERS.items():
        part = text.split(f"at {height} px ", 1)[1].split(";", 1)[0]
        for i, (start, reader) in enumerate(tiers):
            assert f"`{' '.join(recipe.reader_keys(reader))}`" in part, (height, reader)
            if len(tiers) > 1:
                edge = f"below {tiers[i + 1][0]:g}" if i + 1 < len(tiers) else f"from {start:g}"
                assert edge in part, (height, reader, part)
    assert " ".join(recipe.BUDGET) in text and f"{recipe.MINUTES:g} minutes" in text
    assert all(f"`{k}`" in text for k in recipe.KEPT)


def test_the_budget_paragraph_states_the_recipes_tiers_and_default():
    """docs/own-strips.md's prose on the budget curves names each tier change and the
    default budget as the recipe defines them (a new tier or default fails here)."""
    text = flat((ROOT / "docs" / "own-strips.md").read_text())
    for height, tiers in recipe.TIERS.items():
        for (_, below), (start, reader) in zip(tiers, tiers[1:], strict=False):
            said = (
                f"`model={below}` at {height} px for budgets under {start:g} minutes and "
                f"`model={reader}` from {start:g} minutes on"
            )
            assert said in text, said
    assert f"The default budget is {recipe.MINUTES:g} minutes" in text
