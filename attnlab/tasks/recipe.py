"""What ``attnlab train data=folder`` trains when the command names no reader: the recipe
for strips attnlab did not draw, chosen from measurements on images no reader here was
trained, validated or tuned on (docs/own-strips.md, "Which reader for my strips?").

The recipe's keys go before the command's own, so any of them given on the command line
wins; a command that names ``model=`` or fine-tunes another run (``init_from=RUN``: its own
reader) gets none of them, and neither does the lab's synthetic default (the attention
reader). ``init_from=pretrained`` is the recipe's reader trained on synthetic strips
(``attnlab.runs.pretrained``), so it takes the recipe too."""

from __future__ import annotations

from attnlab.runs.pretrained import NAME as PRETRAINED

# The recipe for own strips: the CTC reader on the column encoder, with data=folder's own
# augmentation and the default schedule. On captchas of the `captcha` package (2,500 steps
# of 64) it read as many seen strips as model=crnn (92.0% each, crnn at optim.lr=0.002
# without augmentation, its best of three settings) at a third of crnn's step time, and
# more than the attention reader beyond the seen lengths (82.0% against 31.0%).
OWN_STRIPS = ("model=ctc",)


def _key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _value(args: list[str], key: str) -> str | None:
    found = [a.split("=", 1)[1] for a in args if "=" in a and _key(a) == key]
    return found[-1] if found else None


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
    if not added:
        return args, None
    said = (
        f"attnlab train: data=folder without model=: the own-strips recipe {' '.join(added)} "
        "(docs/own-strips.md; model=attention trains the lab's reader)"
    )
    return [*added, *args], said
