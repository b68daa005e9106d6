"""The directories a Hydra command creates for itself (``outputs/<date>/<time>/``, a sweep's
``multirun/<date>/<time>/``), so that a refused command leaves none of them behind.

Every task config registers ``CreatedDirs`` as a Hydra callback. Hydra calls it before it
creates the run (or sweep) directory, so it records the topmost folder of that path that does
not exist yet; ``remove_created`` (called by ``attnlab.tasks.run`` when a command fails) removes
what was recorded, and only as far as it holds no file: a directory that existed before the
command, or that holds anything, is never removed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

_created: list[Path] = []  # the topmost new folder of each directory Hydra is about to make


def first_missing(path: Path) -> Path | None:
    """The topmost folder of ``path`` that does not exist (None: it exists)."""
    path = path.absolute()
    if path.exists():
        return None
    while not path.parent.exists():
        path = path.parent
    return path


def record(path: Any) -> None:
    if path is None:
        return
    top = first_missing(Path(str(path)))
    if top is not None and top not in _created:
        _created.append(top)


def forget() -> None:
    """Start a command with nothing recorded."""
    _created.clear()


def remove_created() -> list[Path]:
    """Remove the recorded folders that hold no file (empty folders inside them included),
    deepest first; a folder holding anything stays, with its parents. Returns what went."""
    removed: list[Path] = []
    for top in reversed(_created):
        if not top.is_dir() or top.is_symlink():
            continue
        for root, _, _ in os.walk(top, topdown=False):
            try:
                os.rmdir(root)  # only ever an empty folder
            except OSError:
                continue
            removed.append(Path(root))
    _created.clear()
    return removed


class CreatedDirs(Callback):
    """Records the run directory (a single run) or the sweep directory (a multirun) before
    Hydra creates it."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        record(OmegaConf.select(config, "hydra.run.dir"))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        record(OmegaConf.select(config, "hydra.sweep.dir"))
