"""``pretrained``: the readers shipped with attnlab (``attnlab/weights/``), one per height
(``HEIGHTS``), named where a run or a checkpoint is asked for: ``init_from=pretrained``,
``attnlab read IMG --run pretrained``, ``attnlab.load("pretrained")``.

- ``pretrained-32``, ``pretrained-64``: the packaged reader of that height.
- ``pretrained`` alone: the packaged reader of the height the strips are read at when a
  command has one (``init_from=pretrained``: the one nearest, on a log scale, to the height
  the recipe reads the strips at, ``attnlab.tasks.recipe``), else the default
  (``DEFAULT``, the lab's height).

A word names a packaged reader only if no file or folder of that name lies in the current
folder (then it is refused as ambiguous: give that one's absolute path). Each reader's record
(``pretrained-H.json``) holds the command that trained it and what it reads on the fixed
synthetic strips; lock-pins.toml pins each file's digest under its name."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attnlab import weights
from attnlab.errors import UserError
from attnlab.runs.jsonfiles import RunFileError, load_json

NAME = "pretrained"
FOLDER = Path(weights.__file__).resolve().parent
HEIGHTS = (32, 64)  # the heights a reader is packaged at (one for each of the recipe's)
DEFAULT = 32  # the one ``pretrained`` names when nothing says a height


def name_of(height: int) -> str:
    """The word, and the files' stem, of the packaged reader at ``height``."""
    return f"{NAME}-{height}"


def checkpoint_of(height: int, folder: Path = FOLDER) -> Path:
    return folder / f"{name_of(height)}.pt"


def record_of(height: int, folder: Path = FOLDER) -> Path:
    return folder / f"{name_of(height)}.json"


def nearest(height: float, heights: Iterable[int] = HEIGHTS) -> int:
    """The one of ``heights`` nearest to ``height`` px on a log scale."""
    return min(heights, key=lambda h: abs(math.log(h / max(float(height), 1.0))))


def height_named(word: Path | str, height: float | None = None) -> int | None:
    """The height of the packaged reader ``word`` names (``pretrained`` chooses by
    ``height``, the height the strips are read at, when given), or None when ``word`` names
    none. Refused in one line when a file or folder of that name lies here too (which one
    was meant?)."""
    text = str(word)
    named = {NAME: None, **{name_of(h): h for h in HEIGHTS}}
    if text not in named:
        return None
    if Path(text).exists():
        raise UserError(
            f"{text} names a packaged reader, and ./{text} exists here too: give that "
            f"one's absolute path ({Path(text).resolve()}) or rename it"
        )
    fixed = named[text]
    if fixed is not None:
        return fixed
    return DEFAULT if height is None else nearest(height)


def checkpoint_path(height: int = DEFAULT) -> Path:
    """The packaged checkpoint of ``height``; one line when this install has none."""
    path = checkpoint_of(height)
    if not path.is_file():
        raise UserError(
            f"{name_of(height)}: this install has no packaged reader ({path}); "
            f"python scripts/pretrain.py --height {height} makes it"
        )
    return path


def is_packaged(path: Path) -> bool:
    """Whether ``path`` is one of the packaged checkpoints (its results go elsewhere)."""
    return Path(path).resolve() in {checkpoint_of(h) for h in HEIGHTS}


def record(height: int = DEFAULT) -> dict[str, Any]:
    """``pretrained-H.json``: how the packaged reader of ``height`` was trained and what it
    reads."""
    path = record_of(height)
    try:
        return load_json(path)
    except RunFileError as err:
        raise UserError(f"{path}: {err}") from err


def digest(path: Path) -> str:
    """The sha256 of a checkpoint file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
