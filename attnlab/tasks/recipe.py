"""What ``attnlab train data=folder`` trains when the command names no reader: the recipe
for strips attnlab did not draw, chosen from measurements on images no reader here was
trained, validated or tuned on (docs/own-strips.md, "Which reader for my strips?").

The recipe's keys (its reader, the strips' height and its budget) go before the command's
own, so any of them given on the command line wins; a command that names ``model=`` or
fine-tunes another run (``init_from=RUN``: its own reader) gets none of them, and neither
does the lab's synthetic default (the attention reader). ``init_from=pretrained`` is the
recipe's reader trained on synthetic strips (``attnlab.runs.pretrained``), so it takes the
recipe's reader, at the packaged reader's own height (the encoder's shape is the source's).

The height the strips are read at (``data.height``) follows the strips: the one of
``HEIGHTS`` nearest (on a log scale) to their own height once cropped to their ink, as
training places it (``attnlab.data.sources.median_own_height``). Downscaling a strip throws
away what its reader could read: captchas of the ``captcha`` package (85 px once cropped)
read 97.2% at 64 px against 92.0% at 32; composed handwriting (40 px) read 92.8% at 32 px
against 89.0% at 64, where upscaling adds nothing to learn from.
"""

from __future__ import annotations

import math
from pathlib import Path

from attnlab.errors import UserError
from attnlab.runs.pretrained import NAME as PRETRAINED

# The recipe for own strips: the CTC reader on the column encoder, with data=folder's own
# augmentation and the default schedule. On captchas of the `captcha` package (2,500 steps
# of 64) it read as many seen strips as model=crnn (92.0% each, crnn at optim.lr=0.002
# without augmentation, its best of three settings) at a third of crnn's step time, and
# more than the attention reader beyond the seen lengths (82.0% against 31.0%).
OWN_STRIPS = ("model=ctc",)
HEIGHTS = (32, 64)  # data.height the recipe chooses from (the lab's, and twice it)
# Its budget: train until 4 validations bring nothing better, at most 10,000 steps of 64.
# On those captchas, at 64 px: 98.2% of the seen lengths and 100% of 9-10 (best at step
# 8,500), against 97.2% and 94.0% after 2,500 steps. A command that names a preset (its own
# budget) gets none of them.
BUDGET = ("train.batch_size=64", "train.steps=10000", "train.patience=4")


def recipe_reader() -> tuple[str, list[str]]:
    """The recipe's reader (its ``model=``) and its other keys at its tallest height, as a
    benchmark runs it."""
    model = _value(list(OWN_STRIPS), "model")
    assert model is not None, "the recipe names its reader"
    keys = [r for r in OWN_STRIPS if _key(r) != "model"]
    return model, [*keys, f"data.height={max(HEIGHTS)}"]


def height_for(own: float) -> int:
    """The one of ``HEIGHTS`` nearest to ``own`` px on a log scale."""
    return min(HEIGHTS, key=lambda h: abs(math.log(h / max(own, 1.0))))


def _key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _value(args: list[str], key: str) -> str | None:
    found = [a.split("=", 1)[1] for a in args if "=" in a and _key(a) == key]
    return found[-1] if found else None


def _height(args: list[str]) -> tuple[str | None, str] | None:
    """``data.height=H`` for the strips at ``data.path``, and why; None when the command
    sets it or names no strips this can read (training then says what is wrong, in its own
    words). Fine-tuning the packaged reader keeps its height (no key), said when the
    strips' own height is nearer another."""
    path = _value(args, "data.path")
    if path is None or _value(args, "data.height") is not None:
        return None
    from attnlab.data.sources import median_own_height, open_source

    crop = (_value(args, "data.crop") or "true").lower() not in ("false", "0", "no", "off")
    try:
        own = median_own_height(open_source(Path(path), warn=lambda m: None), crop)
    except (UserError, OSError):
        return None
    cropped = " once cropped to their ink" if crop else ""
    if _value(args, "init_from") == PRETRAINED:
        from attnlab.runs.pretrained import record

        packaged = int(record().get("height", 32))
        if height_for(own) == packaged:
            return None
        return None, (
            f"init_from=pretrained reads at its own {packaged} px; the strips' own height "
            f"({own} px{cropped}) is nearer {height_for(own)}, which the recipe reads them "
            "at without init_from=pretrained"
        )
    return f"data.height={height_for(own)}", f"the strips' own height: {own} px{cropped}"


def with_recipe(args: list[str]) -> tuple[list[str], str | None]:
    """``attnlab train``'s ``args`` with the recipe's keys they do not set put first, and a
    line saying which were added (None: the command is left as it is)."""
    source = _value(args, "init_from")
    if _value(args, "data") != "folder" or _value(args, "model") is not None:
        return args, None
    if source not in (None, "null", PRETRAINED):
        return args, None
    given = {_key(a) for a in args}
    added = [r for r in OWN_STRIPS if _key(r) not in given]
    if "preset" not in given:  # a preset sets its own budget
        added += [b for b in BUDGET if _key(b) not in given]
    height = _height(args)
    why = []
    if height is not None:
        added += [height[0]] if height[0] else []
        why.append(height[1])
    if not added:
        return args, None
    why += ["docs/own-strips.md", "model=attention trains the lab's reader"]
    said = (
        f"attnlab train: data=folder without model=: the own-strips recipe {' '.join(added)} "
        f"({'; '.join(why)})"
    )
    return [*added, *args], said
