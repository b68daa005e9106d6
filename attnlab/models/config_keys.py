"""A reader's config keys as a user types them (``model.pos``), read from its config dataclass:
each key's default, the values its type allows (an Enum's or a Literal's members, true|false,
a number) and the comment that documents it in the source. ``attnlab readers`` prints them.

Nothing here is a second list: the allowed values are the type's, which Hydra enforces when it
composes the config (``model.pos=foo`` is refused naming the same values), and the notes are
the dataclass's own comments.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

NOTE_CHARS = 90  # a note longer than this is cut at its first clause, then shortened


@dataclass(frozen=True)
class Key:
    name: str  # as typed on the command line: model.<field>
    default: str  # as YAML writes it (null, true, [64])
    allowed: str  # the type's values: a|b|c for an Enum, int, float, list[int], ...
    note: str  # the field's comment in its dataclass ("" when it has none)


def keys_of(config: type, section: str = "model", below: type | None = None) -> list[Key]:
    """The keys of dataclass ``config`` in field order, leaving out those ``below`` (a base
    class) declares and ``name``."""
    hints = typing.get_type_hints(config)
    skip = {f.name for f in dataclasses.fields(below)} if below is not None else set()
    notes = _notes(config)
    out = []
    for f in dataclasses.fields(config):
        if f.name in skip or f.name == "name":
            continue
        out.append(
            Key(f"{section}.{f.name}", _default(f), allowed(hints[f.name]), notes.get(f.name, ""))
        )
    return out


def allowed(kind: Any) -> str:
    """The values a field's type allows, as a user writes them."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        real = [a for a in args if a is not type(None)]
        text = "|".join(allowed(a) for a in real)
        return f"{text}|null" if len(real) < len(args) else text
    if typing.get_origin(kind) is typing.Literal:
        return "|".join(_text(a) for a in args)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "|".join(str(m.value) for m in kind)
    if kind is bool:
        return "true|false"
    if typing.get_origin(kind) is list:
        return f"list[{allowed(args[0])}]" if args else "list"
    return getattr(kind, "__name__", str(kind))


def _default(f: dataclasses.Field) -> str:
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        value = f.default
    if value is MISSING or value is dataclasses.MISSING:
        return "???"
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return str(value)


_FIELD = re.compile(r"^    (\w+)\s*:")


def _notes(config: type) -> dict[str, str]:
    """Each field's comment, from the source of every dataclass that declares one: the comment
    on its line, else the comment lines right above it."""
    notes: dict[str, str] = {}
    for cls in reversed(config.__mro__):
        if not dataclasses.is_dataclass(cls):
            continue
        try:
            lines = inspect.getsource(cls).splitlines()
        except (OSError, TypeError):  # no source (a frozen install): keys without notes
            continue
        above: list[str] = []
        for line in lines[1:]:
            text = line.strip()
            if text.startswith("#"):
                above.append(text.lstrip("#").strip())
                continue
            match = _FIELD.match(line)
            if match:
                own = line.split("  # ", 1)[1].strip() if "  # " in line else ""
                notes[match.group(1)] = short(own or " ".join(above))
            above = []
    return notes


def short(note: str) -> str:
    """A note for one line: whole when short, else its first sentence, without parentheses,
    then what comes before its first colon, then cut at NOTE_CHARS."""
    for cut in (_sentence, _unbracketed, _before_colon):
        if len(note) <= NOTE_CHARS:
            return note
        note = cut(note)
    return note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 3].rstrip() + "..."


def _sentence(note: str) -> str:
    return re.split(r"(?<=[.;])\s", note, maxsplit=1)[0].rstrip(".;")


def _unbracketed(note: str) -> str:
    return re.sub(r"\s*\([^()]*\)", "", note)


def _before_colon(note: str) -> str:
    return note.split(": ", 1)[0]


def table(keys: list[Key], indent: str = "  ") -> list[str]:
    """Aligned lines: key=default, allowed values, note."""
    if not keys:
        return [f"{indent}(no keys of its own)"]
    left = [f"{k.name}={k.default}" for k in keys]
    w1 = max(map(len, left))
    w2 = max(len(k.allowed) for k in keys)
    return [
        f"{indent}{a:<{w1}}  {k.allowed:<{w2}}  {k.note}".rstrip()
        for a, k in zip(left, keys, strict=True)
    ]
