"""What a trainer trains and validates on, chosen from the config here so that the trainer
never names a data source (as lightning-hydra-template hands its trainer a datamodule):
``data=folder`` reads the user's strips (``attnlab.data.source_train``), anything else draws
synthetic strips. The reader comes in because which labels it can be trained on depends on
its columns (``Reader.too_long``)."""

from __future__ import annotations

from typing import Any

from attnlab.data.source_train import TrainingData, folder_data
from attnlab.data.strips import StripSynth, TrainStream, fixed_set, set_seed

__all__ = ["TrainingData", "training_data"]


def training_data(
    cfg: Any, reader: Any, seen: list[int], synth: StripSynth, stream: Any = None
) -> TrainingData:
    """The training stream and the validation sets of the seen lengths ``seen``; a given
    ``stream`` (anything with ``next()``, ``state()`` and ``load_state()``) replaces the
    config's. Builds nothing on disk; a bad folder is one UserError (``folder_data``)."""
    seed = set_seed(cfg.seed, "train", 0)
    if cfg.data.source == "folder":
        got = folder_data(cfg, reader, seen, seed, synth)
        return TrainingData(
            got.stream if stream is None else stream, got.val_sets, got.split, got.unlabelled
        )
    val_sets = {n: fixed_set(synth, "val", n, cfg.data.val_per_length) for n in seen}
    if stream is None:
        by_length = cfg.data.batch_by_length
        stream = TrainStream(synth, seen, cfg.train.batch_size, seed, by_length=by_length)
    return TrainingData(stream, val_sets, None)
