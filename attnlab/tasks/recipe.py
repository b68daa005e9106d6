"""What ``attnlab train`` adds to a command before its config is composed: the own-strips
recipe for ``data=folder`` without a reader, and, for ``init_from=RUN``, RUN's own reader.

``resolve(overrides)`` is the one place this is decided, and every way a config is composed
asks it: the CLI before Hydra sees a command (``attnlab train``, ``--cfg job``), every job of
a multirun as its first step (``attnlab.tasks.train``: each job measures its own
``data.path``), and ``attnlab.tasks.compose.compose`` (the benchmark, tests, scripts, the
API). The keys it gives go after the command's own and are only those the command does not
set, so any key the user gives wins.

- ``init_from=RUN`` (a run, a checkpoint, or ``pretrained``: the packaged reader of the
  height nearest the strips', their own or ``data.height`` given) keeps RUN's reader, its
  encoder and reader keys, its height and its charset. A key the user
  gives that cannot fit RUN's weights is refused when the weights are loaded
  (``attnlab.training.finetune``), in one line naming the key.
- ``data=folder`` without ``model=``: the reader of the one of ``HEIGHTS`` nearest (on a log
  scale) to the strips' own height once cropped to their ink, as training places them
  (``attnlab.data.strip_cache.median_own_height``: the strips it measures are the ones training
  then reads, decoded once), with the settings it trains best with (``SETTINGS``); a
  ``data.height`` given picks the reader of the height nearest it. With ``init_from``, RUN's
  reader instead. Either way, unless a preset sets its own, the budget ``BUDGET``.
- Anything else (the lab's synthetic default, a reader named) is left as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab.config.overrides import (
    as_override,
    given_keys,
    is_override,
    override_key,
    override_value,
    unquoted,
)
from attnlab.errors import UserError

HEIGHTS = (32, 64)  # data.height the recipe reads strips at (the lab's, and twice it)
# The reader at each height by budget: (from this many minutes on, the reader), the last tier
# a budget reaches. Chosen on 400 validation captchas of the third-party `captcha` package
# (85 px once cropped: read at 64 px) after budgets of 5 and 15 minutes of one thread, each
# sized in steps at the reader's measured pace (scripts/bench.py --only curves;
# docs/own-strips.md, "Which reader for my strips?"); the test captchas were read once per
# run, never chosen on. At 64 px the column encoder's cheap steps read more in 5 minutes
# (ctc 95.2% against crnn 94.5%), the VGG encoder's more in 15 (98.2% against 96.7%): the
# tier changes between the two, at 10 minutes. At 32 px (captchas read at half their
# height: strips of their own height near 32 px were not measured) ctc read more in 5
# minutes (94.8% against the plain CRNN's 89.8%) and 4 strips of 400 fewer in 15 (95.0%
# against 96.0%): within the noise, so ctc stays the 32-px reader at every budget.
TIERS: dict[int, tuple[tuple[float, str], ...]] = {
    32: ((0.0, "ctc"),),
    64: ((0.0, "ctc"), (10.0, "crnn")),
}


@dataclass(frozen=True)
class Setting:
    """Keys the recipe trains a reader with, and the keys a user names that stand for the
    same choice: naming any of those leaves the whole setting out (the user's choice wins,
    never half of the recipe's beside it)."""

    keys: tuple[str, ...]
    stands_for: tuple[str, ...]
    why: str


# The CRNN trains with the settings that read most of three at 32 px (validation 87.5% at
# optim.lr 6e-3, 89.0% at 2e-3, 91.5% at 2e-3 without data=folder's augmentation), and with
# conv stages narrower than crnn's own [16,32,64,96,128] (278,187 parameters against 624,507):
# at 64 px they step 1.76x as fast on one thread and read as much within 15, 30 and 60
# minutes' steps (docs/own-strips.md, "A smaller encoder"). Naming an encoder leaves them out:
# its stages are the encoder's own.
AUGMENTATION = ("data.augment", "data.augmented", "data.elastic", "data.slant", "data.jpeg")
NARROW_STAGES = "model.conv_channels=[16,24,32,48,64]"
SETTINGS = {
    "crnn": (
        Setting(("optim.lr=0.002",), ("optim.lr",), "its learning rate"),
        Setting(("data.augmented=0", "data.elastic=0"), AUGMENTATION, "no augmentation"),
        Setting(
            (NARROW_STAGES,),
            ("model.conv_channels", "encoder", "model.backbone"),
            "narrower conv stages: a faster step",
        ),
    )
}
# Its budget: minutes of training on this machine (validations included; reading the strips
# before it is not counted), the schedule sized to them and decaying linearly to zero at their
# end (Li, Yumer & Ramanan, ICLR 2020), no patience (a schedule that has not annealed stops
# early on a plateau: docs/own-strips.md). A train.steps named is the budget instead; a
# command that names a preset (its own budget) gets none of it.
MINUTES = 15.0
CEILING = 1_000_000  # train.steps under a budget in minutes: the minutes end the run
BUDGET = (
    "train.batch_size=64",
    f"train.minutes={MINUTES:g}",
    f"train.steps={CEILING}",
    "optim.schedule=linear",
)
# With data.unlabelled (self-training: its rounds are sized in steps, and a budget in
# minutes is refused there): train until 4 validations bring nothing better, at most
# 10,000 steps of 64 a round.
ROUNDS_BUDGET = ("train.batch_size=64", "train.steps=10000", "train.patience=4")
# What init_from keeps of RUN's config besides its reader's own keys (model.*).
KEPT = ("data.height", "data.charset")
MEASURED = 200  # strips (evenly spaced) whose median own height is the strips' height


@dataclass(frozen=True)
class Resolved:
    """The keys added to a command (after its own), and the one line that says why."""

    keys: list[str]
    line: str


def reader_keys(reader: str, given: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """``model=reader`` and the settings the recipe trains it with, less any setting whose
    choice the user made (``given``: the keys the command names)."""
    keys = [f"model={reader}"]
    for setting in SETTINGS.get(reader, ()):
        if not given & set(setting.stands_for):
            keys += setting.keys
    return keys


def reader_at(height: int, minutes: float) -> str:
    """The reader ``TIERS`` gives strips read at ``height`` for a budget of ``minutes``."""
    return [reader for start, reader in TIERS[height] if minutes >= start][-1]


READERS = {h: reader_at(h, MINUTES) for h in HEIGHTS}  # at the default budget


def budget_keys(args: list[str], given: set[str] | frozenset[str]) -> list[str]:
    """``BUDGET`` (``ROUNDS_BUDGET`` for self-training) less what the command chose: a key
    it names wins, and a ``train.steps`` it names is its budget (no minutes beside it)."""
    if _self_training(args):
        return [b for b in ROUNDS_BUDGET if override_key(b) not in given]
    dropped = set(given) | ({"train.minutes"} if "train.steps" in given else set())
    if "train.minutes" in given and minutes_named(args) is None:  # off: the steps are the budget
        dropped.add("train.steps")
    return [b for b in BUDGET if override_key(b) not in dropped]


def minutes_named(args: list[str]) -> float | None:
    """The command's ``train.minutes``, the one reading of it: None when it turns a budget in
    minutes off (null, 0) or is not named; ``MINUTES`` for a value that is not a positive
    number (the config's own check names it in one line)."""
    text = str(unquoted(override_value(args, "train.minutes"))).strip().lower()
    if text in ("null", "none", "~", ""):
        return None
    try:
        minutes = float(text)
    except ValueError:
        return MINUTES
    if minutes == 0:
        return None
    return minutes if math.isfinite(minutes) and minutes > 0 else MINUTES


def _self_training(args: list[str]) -> bool:
    return unquoted(override_value(args, "data.unlabelled")) not in (None, "null", "")


def budget_of(args: list[str]) -> float:
    """The minutes the reader is chosen for: the command's ``train.minutes``, or ``MINUTES``
    (a command that names only ``train.steps`` or a preset gets the default budget's
    reader)."""
    return minutes_named(args) or MINUTES


# What scripts/pretrain.py trains on synthetic strips at each height, the packaged readers
# (attnlab.runs.pretrained): the reader and height keys. The recipe's reader of the shortest
# budgets there (TIERS' first tier): its cheap steps let a pretraining see the most strips
# and a fine-tune of a few minutes take the most steps. At 64 px that is ctc, not the crnn
# the recipe trains from scratch in 15 minutes. Fine-tuned on 1,000 captchas for 5 minutes'
# steps, pretrained-64 read 91.9% of held-out captchas, pretrained-32 81.2%
# (docs/own-strips.md).
PACKAGED = {h: (*reader_keys(reader_at(h, 0.0)), f"data.height={h}") for h in HEIGHTS}


def recipe_keys(height: int) -> list[str]:
    """The recipe's reader, its settings and the height for strips read at ``height`` (one
    of HEIGHTS), as a benchmark runs it."""
    return [*reader_keys(READERS[height]), f"data.height={height}"]


def height_for(own: float) -> int:
    """The one of ``HEIGHTS`` nearest to ``own`` px on a log scale."""
    from attnlab.runs.pretrained import nearest

    return nearest(own, HEIGHTS)


def resolve(overrides: list[str] | tuple[str, ...]) -> Resolved | None:
    """What ``attnlab train OVERRIDES`` adds before composing (module docstring); None when
    it adds nothing."""
    args = list(overrides)
    given = given_keys(args)
    source = unquoted(override_value(args, "init_from"))
    folder = unquoted(override_value(args, "data")) == "folder"
    from_source = source not in (None, "null")
    if from_source:
        keys, why = _from_source(args, given, str(source), folder)
        what = f"init_from={source}"
    elif folder and "model" not in given:
        keys, why = _from_scratch(args, given)
        what = "data=folder without model=: the own-strips recipe"
    else:
        return None
    if folder and "model" not in given and "preset" not in given:  # a preset: its own budget
        keys += budget_keys(args, given)
        why.append(_budget_words(args, given))
        why.append("docs/own-strips.md")
    keys = [k for k in keys if override_key(k) not in given]
    if not keys:
        return None
    # A run's or packaged reader's model.* keys are counted (there are many, all its own);
    # the recipe's own (its chosen stages) are shown, as every choice it makes is.
    own_keys = [k for k in keys if k.startswith("model.")] if from_source else []
    shown = " ".join(k for k in keys if k not in own_keys)
    if own_keys:
        shown += f" and its {len(own_keys)} model.* key(s)"
    return Resolved(keys, f"attnlab train: {what}: {shown} ({'; '.join(why)})")


def command_with(args: list[str]) -> tuple[list[str], str | None]:
    """``attnlab train``'s command words with what ``resolve`` adds placed right after the
    command's last override (never split from them by a flag such as ``--cfg job``), and
    the line that says so; a multirun's words are left: each of its jobs adds its own
    (``attnlab.tasks.train.as_composed``)."""
    if "-m" in args or "--multirun" in args:
        return args, None
    resolved = resolve([a for a in args if is_override(a)])
    if resolved is None:
        return args, None
    last = max(i for i, a in enumerate(args) if is_override(a))
    return [*args[: last + 1], *resolved.keys, *args[last + 1 :]], resolved.line


def _own_height(args: list[str]) -> tuple[int, str] | None:
    """The strips' own height at ``data.path`` and how it was measured; None when the
    command names no strips this can read (training then says what is wrong)."""
    path = unquoted(override_value(args, "data.path"))
    if path is None or "," in path:  # a sweep's list: each job measures its own
        return None
    from attnlab.data.sources import open_source
    from attnlab.data.strip_cache import median_own_height

    crop = _flag(override_value(args, "data.crop"), default=True)
    try:
        own = median_own_height(open_source(Path(path), warn=lambda m: None), crop, MEASURED)
    except (UserError, OSError):
        return None
    return own, f"{own} px once cropped to their ink" if crop else f"{own} px"


def _flag(text: str | None, default: bool) -> bool:
    if text is None:
        return default
    return str(unquoted(text)).lower() not in ("false", "0", "no", "off")


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(str(unquoted(text)))
    except ValueError:
        return None  # not a number: the config's own check names it


def _from_scratch(args: list[str], given: set[str]) -> tuple[list[str], list[str]]:
    """The reader and height keys for strips trained from scratch, and why."""
    minutes = budget_of(args)
    read_at = _read_at(args, folder=True)  # the command's height, or the strips' own
    if read_at is None:  # nothing measured: the config's default height
        height = HEIGHTS[0]
        why = [f"data.height={height}, the default", _reader_words(height, minutes, given)]
        return reader_keys(reader_at(height, minutes), given), why
    height = height_for(read_at[0])  # the reader of the height nearest it
    keys = [*reader_keys(reader_at(height, minutes), given), f"data.height={height}"]
    return keys, [read_at[1], _reader_words(height, minutes, given)]


def _reader_words(height: int, minutes: float, given: set[str]) -> str:
    """Why the reader: it reads the most at ``height`` within the budget's minutes."""
    tier = [start for start, _ in TIERS[height] if minutes >= start][-1]
    reader = reader_at(height, minutes)
    if len(TIERS[height]) == 1:
        return f"model={reader} reads the most at {height} px within every budget measured"
    if "train.steps" in given and "train.minutes" not in given:
        return f"model={reader}, the reader of the default budget ({minutes:g} minutes)"
    return f"model={reader} reads the most at {height} px within {minutes:g} minutes" + (
        f" (from {tier:g} minutes on)" if tier else ""
    )


def _budget_words(args: list[str], given: set[str]) -> str:
    """What the budget is, in words: how long training will take on this machine."""
    if _self_training(args):
        return "data.unlabelled: rounds sized in steps, " + " ".join(budget_keys(args, given))
    if "train.minutes" in given and minutes_named(args) is None:
        return f"train.minutes={override_value(args, 'train.minutes')} as given: train.steps"
    if "train.steps" in given and "train.minutes" not in given:
        return f"the budget: train.steps={override_value(args, 'train.steps')} as given"
    minutes = budget_of(args)
    said = "as given" if "train.minutes" in given else "the default budget"
    return (
        f"train.minutes={minutes:g} ({said}): training ends within {minutes:g} minutes on this "
        "machine, validations included, its schedule sized to them"
    )


def source_config(source: str, height: float | None = None) -> Any:
    """RUN's composed config (``init_from=RUN``), from its checkpoint (``pretrained``: the
    packaged reader nearest ``height``); one line when RUN cannot be read (the same line
    training would give)."""
    from attnlab.runs import checkpoint, locate

    return checkpoint.load(locate.resolve(source, "best", height)).run_config()


def _read_at(args: list[str], folder: bool) -> tuple[float, str] | None:
    """The height the command's strips are read at before a reader is chosen: its
    ``data.height``, or its folder's strips' own height; None when neither says."""
    asked = _int(override_value(args, "data.height"))
    if asked is not None:
        return asked, f"data.height={asked} as given"
    own = _own_height(args) if folder else None
    return None if own is None else (own[0], f"the strips' own height: {own[1]}")


def _from_source(
    args: list[str], given: set[str], source: str, folder: bool
) -> tuple[list[str], list[str]]:
    """init_from=RUN: RUN's reader with its own keys, its height and charset, and why.
    ``pretrained``: the packaged reader of the height nearest the strips' (``_read_at``)."""
    from attnlab.runs import pretrained

    read_at = _read_at(args, folder) if source == pretrained.NAME else None
    try:
        before = source_config(source, None if read_at is None else read_at[0])
    except UserError:
        return [], []  # training names what is wrong with RUN, in its own words
    reader = str(before.model.name)
    keys = [f"model={reader}"]
    named = unquoted(override_value(args, "model"))
    if named in (None, reader):  # another reader named: training refuses it, naming it
        keys += _reader_keys_of(before.model, given)
    keys += [as_override(k, _select(before, k)) for k in KEPT]
    height = int(before.data.height)
    backbone = before.model.get("backbone")
    why = [f"its {reader} reader{f' ({backbone} encoder)' if backbone else ''} at {height} px"]
    if source == pretrained.NAME:  # which packaged reader, and why that one
        why[0] = f"{pretrained.name_of(height)}, " + why[0]
        why.append(
            f"the packaged reader nearest {read_at[1]}"
            if read_at is not None
            else f"the default: no height given or measured ({pretrained.DEFAULT} px)"
        )
        return keys, why
    own = _own_height(args) if folder and "data.height" not in given else None
    if own is not None and height_for(own[0]) != height:
        nearer = height_for(own[0])
        why.append(
            f"the strips' own height ({own[1]}) is nearer {nearer}, at which the recipe "
            f"trains model={READERS[nearer]} without init_from"
        )
    return keys, why


def _reader_keys_of(model: Any, given: set[str]) -> list[str]:
    """RUN's ``model.*`` keys as overrides: those its reader and its encoder read (a key
    only other encoders read is left at its default; ``encoder=`` given: the backbone is
    the user's)."""
    from attnlab.config.model import backbone_of, readers_of

    backbone = backbone_of(model)
    out = []
    for key in model:
        readers = readers_of(key)
        if key == "name" or (readers and backbone not in readers):
            continue
        if key == "backbone" and "encoder" in given:
            continue
        out.append(as_override(f"model.{key}", _select(model, key)))
    return out


def _select(cfg: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
