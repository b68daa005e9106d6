"""The own-strips recipe in words (``attnlab.tasks.recipe``'s definitions rendered): the
rules block of docs/own-strips.md (``describe``) and the README's one sentence
(``summary``), so that no sentence about the recipe can drift from the code
(tests/test_docs_recipe.py compares them to the letter)."""

from __future__ import annotations

import textwrap

from attnlab.runs import pretrained
from attnlab.tasks.recipe import (
    BUDGET,
    HEIGHTS,
    KEPT,
    MEASURED,
    MINUTES,
    PACKAGED,
    READERS,
    ROUNDS_BUDGET,
    SETTINGS,
    TIERS,
    reader_keys,
)


def _by_budget(height: int) -> str:
    """The readers of one height by budget, in the docs' words."""
    tiers = TIERS[height]
    words = []
    for i, (start, reader) in enumerate(tiers):
        keys = f"`{' '.join(reader_keys(reader))}`"
        if len(tiers) == 1:
            words.append(keys)
        elif i + 1 < len(tiers):
            words.append(f"{keys} below {tiers[i + 1][0]:g} minutes")
        else:
            words.append(f"{keys} from {start:g} minutes on")
    return f"at {height} px " + ", ".join(words)


def summary() -> str:
    """The recipe in the README's one sentence (its ``recipe:summary`` span, tested)."""
    readers = " or ".join(f"`model={READERS[h]}` at {h} px" for h in HEIGHTS)
    return (
        f"{readers}, whichever height is nearer the strips' own, for {MINUTES:g} minutes "
        "(`train.minutes`)"
    )


def describe() -> str:
    """The recipe's rules in the words of docs/own-strips.md (its ``recipe:rules`` block is
    this text, tested): rendered from the definitions above, so the docs cannot drift."""
    kept = ", ".join(f"`{k}`" for k in KEPT)
    lines = [
        f"- the height the strips are read at: `data.height` = "
        f"{' or '.join(map(str, HEIGHTS))}, whichever is nearer (on a log scale) to the "
        f"strips' own height once cropped to their ink, the median of up to {MEASURED} of "
        "them (a `data.height` you give picks the reader of the height nearest it);",
        "- the reader for that height and the budget, with the settings it trains with: "
        f"{'; '.join(_by_budget(h) for h in HEIGHTS)};",
        *(
            f"- `{reader}`'s setting `{' '.join(s.keys)}` ({s.why}) is left out when you "
            f"name any of `{' '.join(s.stands_for)}`: your choice applies whole;"
            for reader in dict.fromkeys(r for h in HEIGHTS for _, r in TIERS[h])
            for s in SETTINGS.get(reader, ())
        ),
        f"- the budget: `{' '.join(BUDGET)}`: {MINUTES:g} minutes of training on the machine "
        "it runs on (validations included), the learning rate decaying to zero at their end; "
        "a `train.minutes=M` you give sizes it to M minutes and picks the reader for M, a "
        "`train.steps` you give (without `train.minutes`) is the budget instead; with "
        "`data.unlabelled` (self-training, its rounds sized in steps) it is "
        f"`{' '.join(ROUNDS_BUDGET)}`; a `preset=` brings its own;",
        f"- `init_from=RUN` keeps RUN's reader, its `model.*` keys (encoder "
        f"included) and {kept}; a key you give that cannot fit RUN's weights is refused in "
        "one line;",
        f"- `init_from=pretrained` is RUN = the packaged reader of the height nearest the "
        "strips' (their own, or the `data.height` you give; "
        f"{pretrained.DEFAULT} px when neither is known): "
        + "; ".join(
            f"`{pretrained.name_of(h)}`: `{' '.join(PACKAGED[h])}`" for h in pretrained.HEIGHTS
        )
        + " (`--run pretrained-H` names one anywhere a run is asked for).",
    ]
    return "\n".join(textwrap.fill(line, 92, subsequent_indent="  ") for line in lines)
