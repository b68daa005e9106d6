"""A checkpoint restored as a working reader: loaded (``attnlab.runs.checkpoint``), refused
when it lies in a run directory that is not its run's, rebuilt in eval mode and put on the
device; what ``attnlab read``, ``eval``, ``probe`` and ``export`` and ``attnlab.load`` work from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf

from attnlab.config import ExperimentConfig
from attnlab.errors import UserError, with_article
from attnlab.models.base import Reader
from attnlab.runs.checkpoint import Checkpoint, load
from attnlab.runs.rundir import RunDir
from attnlab.runtime import resolve_device


@dataclass
class Restored:
    """A checkpoint read back: the file's contents, its reader (eval mode, on the device) and
    the run's config."""

    ckpt: Checkpoint
    reader: Reader
    config: ExperimentConfig
    device: torch.device


def restore(path: Path, device: str = "auto") -> Restored:
    """Load ``path`` and rebuild its reader on ``device`` (auto: CUDA when present).

    A checkpoint inside a run directory must be that run's: its reader, model and data
    config those of the run's ``.hydra/config.yaml`` (a copied-in best.pt of another reader
    would otherwise be evaluated and counted as this run's)."""
    ckpt = load(path)
    check_belongs_to_run(ckpt, Path(path))
    reader, cfg = ckpt.rebuild(path)
    dev = resolve_device(device)
    return Restored(ckpt, reader.to(dev), cfg, dev)


def check_belongs_to_run(ckpt: Checkpoint, path: Path) -> None:
    """Refuse a checkpoint in ``<run>/checkpoints/`` whose reader or config is not the run's.
    Keys one side lacks (a config written by an older attnlab) are not compared."""
    run = RunDir(path.parent.parent)
    if path.parent != run.checkpoints or not run.is_run():
        return
    try:
        config = OmegaConf.to_container(OmegaConf.load(run.config), resolve=True)
    except Exception as err:
        raise UserError(f"{run.config}: unreadable run config ({type(err).__name__})") from err
    saved = ckpt.config
    if not isinstance(config, dict) or not isinstance(saved, dict):
        raise UserError(f"{path}: checkpoint or run config is not a config mapping")
    theirs = str((config.get("model") or {}).get("name"))
    for kind in (ckpt.reader, (saved.get("model") or {}).get("name")):
        if kind is not None and str(kind) != theirs:
            raise UserError(
                f"{path}: checkpoint holds {with_article(str(kind))} reader but its run "
                f"{run.path} is {with_article(theirs)} run: refused (a checkpoint copied from "
                "another run?)"
            )
    for section in ("model", "data"):
        mine, run_side = saved.get(section) or {}, config.get(section) or {}
        if not isinstance(mine, dict) or not isinstance(run_side, dict):
            raise UserError(f"{path}: checkpoint config section {section} is not a mapping")
        differ = sorted(k for k in mine.keys() & run_side.keys() if mine[k] != run_side[k])
        if differ:
            raise UserError(
                f"{path}: checkpoint was trained with {section}.{differ[0]}={mine[differ[0]]!r} "
                f"but its run {run.path} has {run_side[differ[0]]!r}: refused"
            )
