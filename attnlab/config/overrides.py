"""Hydra's override words as attnlab reads them, in one place: the key an override names
(``+key=v``, ``++key=v`` and ``~key`` name ``key``), the value the last one gives, and a
value written back as an override. Anything more (sweeps, functions) is Hydra's own
grammar: these only read what a command says, never what a sweep expands to."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# A value Hydra reads back as the same string without quotes (no spaces, no grammar).
_PLAIN = re.compile(r"[A-Za-z_./][\w./-]*")


def override_key(arg: str) -> str:
    """The key ``arg`` names: ``+a.b=1``, ``++a.b=1``, ``~a.b`` and ``a.b=1`` all name
    ``a.b``; a config group (``model=ctc``) names the group."""
    return arg.split("=", 1)[0].lstrip("+~").strip()


def is_override(arg: str) -> bool:
    """Whether a command-line word is an override (not a flag or a flag's value)."""
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def given_keys(args: Iterable[str]) -> set[str]:
    """Every key the overrides among ``args`` name."""
    return {override_key(a) for a in args if is_override(a)}


def override_value(args: Iterable[str], key: str) -> str | None:
    """The value the last override of ``key`` gives, as written (quotes kept), or None."""
    found = [a.split("=", 1)[1] for a in args if "=" in a and override_key(a) == key]
    return found[-1] if found else None


def unquoted(text: str | None) -> str | None:
    """An override's value without the quotes a shell-safe command may put around it."""
    if text is not None and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def as_override(key: str, value: Any) -> str:
    """``key=value`` as Hydra parses it back to ``value`` (None, bools, numbers, strings,
    lists of them)."""
    return f"{key}={_written(value)}"


def _written(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return "[" + ",".join(_written(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in ("null", "true", "false"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
