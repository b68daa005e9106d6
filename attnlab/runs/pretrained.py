"""``pretrained``: the reader shipped with attnlab (``attnlab/weights/``), named where a run
or a checkpoint is asked for: ``init_from=pretrained``, ``attnlab read IMG --run
pretrained``, ``attnlab.load("pretrained")``. The word alone names it (a folder of that name
in the current folder is then refused as ambiguous: give its absolute path). Its record
(``pretrained.json``) holds the command that trained it and what it reads on the fixed
synthetic strips; lock-pins.toml pins its file digest."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from attnlab import weights
from attnlab.errors import UserError
from attnlab.runs.jsonfiles import RunFileError, load_json

NAME = "pretrained"
FOLDER = Path(weights.__file__).resolve().parent
CHECKPOINT = FOLDER / "pretrained.pt"
RECORD = FOLDER / "pretrained.json"


def names_it(run_or_ckpt: Path | str) -> bool:
    """Whether ``run_or_ckpt`` is the word that names the packaged reader; refused in one
    line when a file or folder of that name lies here too (which one was meant?)."""
    if str(run_or_ckpt) != NAME:
        return False
    if Path(NAME).exists():
        raise UserError(
            f"{NAME} names the packaged reader, and ./{NAME} exists here too: give that "
            f"one's absolute path ({Path(NAME).resolve()}) or rename it"
        )
    return True


def checkpoint_path() -> Path:
    """The packaged checkpoint; one line when this install has none."""
    if not CHECKPOINT.is_file():
        raise UserError(
            f"{NAME}: this install has no packaged reader ({CHECKPOINT}); "
            "python scripts/pretrain.py makes it"
        )
    return CHECKPOINT


def is_packaged(path: Path) -> bool:
    """Whether ``path`` is the packaged checkpoint (its results go elsewhere)."""
    return Path(path).resolve() == CHECKPOINT


def record() -> dict[str, Any]:
    """``pretrained.json``: how the packaged reader was trained and what it reads."""
    try:
        return load_json(RECORD)
    except RunFileError as err:
        raise UserError(f"{RECORD}: {err}") from err


def digest(path: Path = CHECKPOINT) -> str:
    """The sha256 of a checkpoint file's bytes (the packaged one by default)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
