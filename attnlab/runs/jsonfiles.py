"""Reading a run's JSON files leniently: a missing, unreadable or older file gives a
``RunFileError`` with one clear message, never a KeyError (shared by ``rundir``,
``evaldir`` and ``probedir``)."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any


class RunFileError(Exception):
    """A run-directory file that is missing, unreadable or of an unknown shape."""


def load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise RunFileError(f"no {path.name}") from err
    except (OSError, ValueError) as err:
        raise RunFileError(f"unreadable {path.name}: {err}") from err
    if not isinstance(data, dict):
        raise RunFileError(f"unreadable {path.name}: not a JSON object")
    return data


def from_dict(cls, data: dict[str, Any], what: str):
    """A dataclass from a JSON object: unknown keys ignored, missing required keys named."""
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as err:
        missing = sorted(
            f.name
            for f in fields(cls)
            if f.name not in data and f.default is MISSING and f.default_factory is MISSING
        )
        raise RunFileError(f"{what} lacks {', '.join(missing) or 'fields'} ({err})") from err
