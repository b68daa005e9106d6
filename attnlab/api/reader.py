"""``attnlab.load``: a trained run as a reader object for notebooks and scripts.

It restores the checkpoint as ``attnlab read`` does (attnlab.runs.restore) and reads
through the same loader (attnlab.data.arrays.image_strip) and the same reading step
(attnlab.tasks.read.read_loaded), so a file gives the same text here as on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.config import RunTaskConfig, check_beam
from attnlab.config.rules import require
from attnlab.data.arrays import image_strip
from attnlab.data.notes import Tally
from attnlab.data.pixels import warn_stderr
from attnlab.errors import UserError


@dataclass
class Reading:
    """One image's reading. ``step_confidences``: the probability of each read character,
    then of the end (len(text) + 1 values), where the reader can say; ``attention``: its
    (steps, columns) attention rows, where the reader has them."""

    source: str  # the path, or "<image i>" for an in-memory image
    text: str
    confidence: float
    step_confidences: np.ndarray | None = field(default=None, repr=False)
    attention: np.ndarray | None = field(default=None, repr=False)


def _is_image(obj: Any) -> bool:
    """One image rather than a list of them (an array is always one image)."""
    from PIL import Image

    return isinstance(obj, (str, Path, np.ndarray, Image.Image))


class TrainedReader:
    """A run's trained reader: ``.read(images, beam=1)``, ``.charset``, ``.config``, ``.run``."""

    def __init__(self, run: Path, checkpoint: Path, restored: Any) -> None:
        self.run = run  # the run directory (or the checkpoint file given)
        self.checkpoint = checkpoint
        self.config = restored.config  # the run's ExperimentConfig
        self.model = restored.reader
        self.device = restored.device

    @property
    def charset(self) -> str:
        return str(self.config.data.charset)

    def __repr__(self) -> str:
        return f"TrainedReader({self.model.name!r}, run={str(self.run)!r})"

    def _load(self, image: Any, i: int, crop: bool, warn: Any):
        """One image -> (height, W) tensor, prepared as a file is (attnlab.data.arrays); and
        its name."""
        import torch

        strip, name = image_strip(image, i, self.config.data.height, crop, warn)
        return torch.from_numpy(strip), name

    def read(self, images: Any, beam: int = 1, crop: bool = True) -> list[Reading]:
        """Read one image or a list of them; one Reading per image, in order. ``crop`` as
        ``attnlab read``'s: the ink is placed as the generator places it."""
        from attnlab.evaluation.explore import step_confidences
        from attnlab.tasks.read import read_loaded

        check_beam(beam, "beam")
        if not isinstance(crop, bool):
            raise UserError(f"crop={crop!r}: must be True or False")
        if not _is_image(images) and not isinstance(images, (list, tuple)):
            raise UserError(
                f"images={_short(images)}: give a path, a PIL image, a NumPy array or a list "
                "of them"
            )
        items = [images] if _is_image(images) else list(images)
        if not items:
            return []
        tally = Tally(warn_stderr)  # light ink on dark paper: said once, with a count
        loaded, names = zip(
            *(self._load(im, i, crop, tally) for i, im in enumerate(items)), strict=True
        )
        tally.close(len(items))
        strips, out = read_loaded(self.model, self.device, list(loaded), beam)
        steps = step_confidences(self.model, self.device, strips, out.texts)  # (N, Lmax + 1)
        return [
            Reading(
                name,
                out.texts[i],
                float(out.confidence[i]),
                None if steps is None else steps[i, : len(out.texts[i]) + 1],
                None if out.weights is None else out.weights[i],
            )
            for i, name in enumerate(names)
        ]


def load(run_or_checkpoint: Path | str, which: str = "best", device: str = "auto"):
    """A run directory (its checkpoints/<which>.pt) or a checkpoint file -> TrainedReader.
    Errors are ``attnlab.UserError`` with the line ``attnlab read`` prints."""
    from attnlab.runs import locate
    from attnlab.runs.restore import restore
    from attnlab.tasks.read import say_if_training

    if not isinstance(run_or_checkpoint, (str, Path)) or not str(run_or_checkpoint):
        raise UserError(
            f"run_or_checkpoint={_short(run_or_checkpoint)}: give a run directory or a "
            "checkpoint file (a str or a Path)"
        )
    require(which in ("best", "last"), "which", which, "must be 'best' or 'last'")
    require(isinstance(device, str), "device", device, "must be a str (auto, cpu, cuda:N)")
    RunTaskConfig.check_run(which, device)
    path = locate.resolve(run_or_checkpoint, which)
    say_if_training(run_or_checkpoint, path)
    return TrainedReader(Path(run_or_checkpoint), path, restore(path, device))


def _short(value: Any) -> str:
    """A value as an argument's error names it: its repr, cut to one short line."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else f"{text[:57]}..."
