"""What ``attnlab train data=folder`` trains when the command names no reader: the recipe
for strips attnlab did not draw, chosen from measurements on images no reader here was
trained, validated or tuned on (docs/own-strips.md, "Which reader for my strips?").

The recipe reads the strips at the one of ``HEIGHTS`` nearest (on a log scale) to their own
height once cropped to their ink, as training places them
(``attnlab.data.sources.median_own_height``), and trains the reader ``READERS`` names for
that height until it stops improving (``BUDGET``). Its keys go before the command's own, so
any of them given on the command line wins (a ``data.height`` given picks the reader of the
height nearest it); a command that names ``model=`` or fine-tunes another run
(``init_from=RUN``: its own reader) gets none of them, and neither does the lab's synthetic
default (the attention reader). ``init_from=pretrained`` takes the packaged reader's own
reader and height (the encoder's shape is the source's) and the budget.
"""

from __future__ import annotations

import math
from pathlib import Path

from attnlab.errors import UserError
from attnlab.runs.pretrained import NAME as PRETRAINED

HEIGHTS = (32, 64)  # data.height the recipe reads strips at (the lab's, and twice it)
# The reader at each height, chosen on validation captchas of the third-party `captcha`
# package (2,500 steps of 64): strips downscaled to 32 px read alike with model=ctc and
# model=crnn (93.8% / 91.5% validation; 92.0% test each) at a third of crnn's step time;
# at 64 px the CRNN's VGG encoder reads what the column encoder cannot (99.25% against
# 97.75% validation; 98.8% against 97.2% test, 100% against 94% on lengths 9-10). The CRNN
# trains with the settings that read most of three at 32 px (validation 87.5% at optim.lr
# 6e-3, 89.0% at 2e-3, 91.5% at 2e-3 without data=folder's augmentation).
READERS = {32: "ctc", 64: "crnn"}
SETTINGS = {"crnn": ("optim.lr=0.002", "data.augmented=0", "data.elastic=0")}
# Its budget: train until 4 validations bring nothing better, at most 10,000 steps of 64
# (the ctc reader at 64 px: 97.2% -> 98.2% of the seen test captchas, 94% -> 100% of
# lengths 9-10, best at step 8,500). A command that names a preset (its own budget) gets
# none of it.
BUDGET = ("train.batch_size=64", "train.steps=10000", "train.patience=4")


def reader_keys(reader: str) -> list[str]:
    """``model=reader`` and the settings the recipe trains it with."""
    return [f"model={reader}", *SETTINGS.get(reader, ())]


# What scripts/pretrain.py trains on synthetic strips (32 px): the packaged reader.
PACKAGED = tuple(reader_keys(READERS[HEIGHTS[0]]))


def recipe_keys(height: int) -> list[str]:
    """The recipe's reader, its settings and the height for strips read at ``height`` (one
    of HEIGHTS), as a benchmark runs it."""
    return [*reader_keys(READERS[height]), f"data.height={height}"]


def height_for(own: float) -> int:
    """The one of ``HEIGHTS`` nearest to ``own`` px on a log scale."""
    return min(HEIGHTS, key=lambda h: abs(math.log(h / max(own, 1.0))))


def _key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _value(args: list[str], key: str) -> str | None:
    found = [a.split("=", 1)[1] for a in args if "=" in a and _key(a) == key]
    return found[-1] if found else None


def _own_height(args: list[str]) -> tuple[int, str] | None:
    """The strips' own height at ``data.path`` and how it was measured; None when the
    command names no strips this can read (training then says what is wrong)."""
    path = _value(args, "data.path")
    if path is None:
        return None
    from attnlab.data.sources import median_own_height, open_source

    crop = (_value(args, "data.crop") or "true").lower() not in ("false", "0", "no", "off")
    try:
        own = median_own_height(open_source(Path(path), warn=lambda m: None), crop)
    except (UserError, OSError):
        return None
    return own, f"{own} px once cropped to their ink" if crop else f"{own} px"


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None  # not a number: the config's own check names it


def _from_scratch(args: list[str]) -> tuple[list[str], list[str]]:
    """The reader and height keys for strips trained from scratch, and why."""
    asked = _int(_value(args, "data.height"))
    if asked is not None:  # the command's height: the reader of the height nearest it
        return reader_keys(READERS[height_for(asked)]), [f"data.height={asked} as given"]
    own = _own_height(args)
    if own is None:
        height = HEIGHTS[0]
        return reader_keys(READERS[height]), [f"data.height={height}, the default"]
    height = height_for(own[0])
    return recipe_keys(height), [f"the strips' own height: {own[1]}"]


def _from_packaged(args: list[str]) -> tuple[list[str], list[str]]:
    """init_from=pretrained: the packaged reader's reader (and its height), and why."""
    from attnlab.runs.pretrained import record

    said = record()
    reader, packaged = str(said["reader"]), int(said.get("height", HEIGHTS[0]))
    why = [f"init_from=pretrained: the packaged {reader} reader at its own {packaged} px"]
    own = _own_height(args) if _value(args, "data.height") is None else None
    if own is not None and height_for(own[0]) != packaged:
        nearer = height_for(own[0])
        why.append(
            f"the strips' own height ({own[1]}) is nearer {nearer}, at which the recipe "
            f"trains model={READERS[nearer]} without init_from=pretrained"
        )
    return reader_keys(reader), why


def with_recipe(args: list[str]) -> tuple[list[str], str | None]:
    """``attnlab train``'s ``args`` with the recipe's keys they do not set put first, and a
    line saying which were added (None: the command is left as it is)."""
    source = _value(args, "init_from")
    if _value(args, "data") != "folder" or _value(args, "model") is not None:
        return args, None
    if source not in (None, "null", PRETRAINED):
        return args, None
    keys, why = _from_packaged(args) if source == PRETRAINED else _from_scratch(args)
    given = {_key(a) for a in args}
    added = [k for k in keys if _key(k) not in given]
    if "preset" not in given:  # a preset sets its own budget
        added += [b for b in BUDGET if _key(b) not in given]
    why += ["docs/own-strips.md", "model=attention trains the lab's reader"]
    said = (
        f"attnlab train: data=folder without model=: the own-strips recipe {' '.join(added)} "
        f"({'; '.join(why)})"
    )
    return [*added, *args], said
