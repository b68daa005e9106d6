"""``attnlab cost``: what a reader costs by strip length (``cost.*``), beside a training
config (the reader's, or a run's own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnlab.config.experiment import ExperimentConfig
from attnlab.config.rules import check_at_least, require


@dataclass
class CostConfig:
    lengths: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])  # digits a strip
    # Readers measured, each with the rest of the command's overrides; null = model= alone.
    readers: list[str] | None = None
    strips: int = 4  # strips counted at each length (FLOPs per strip: their mean)
    read_batches: list[int] = field(default_factory=lambda: [1, 64])  # greedy reading, timed
    repeats: int = 3  # each time is the best of this many (after one warm-up)
    train: bool = True  # time and peak memory of one training step (train.batch_size strips)
    # One batch of this many strips against 4 accumulated micro-batches and against bf16
    # (footprint.csv), at footprint_length digits (null: the longest seen); 0 = not measured.
    footprint_batch: int = 128
    footprint_length: int | None = None
    out: str | None = None  # null: RUN/cost with a run, else ./cost
    # The parameter-matched control: the value of match_key that brings each measured reader
    # to the parameter count of reader `match` (same overrides), printed and in cost.md.
    match: str | None = None
    match_key: str = "model.dec_hidden"

    @classmethod
    def check(cls, c: Any) -> None:
        check_at_least(c, "cost", ("strips", "repeats"))
        lengths = list(c.lengths)
        ok = bool(lengths) and all(int(n) >= 1 for n in lengths)
        require(ok, "cost.lengths", lengths, "must be one or more lengths >= 1")
        batches = list(c.read_batches)
        require(all(int(b) >= 1 for b in batches), "cost.read_batches", batches, "must be >= 1")
        fb = c.footprint_batch
        ok = fb == 0 or (fb >= 4 and fb % 4 == 0)
        require(ok, "cost.footprint_batch", fb, "must be 0 (off) or a multiple of 4")
        fl = c.footprint_length
        require(fl is None or fl >= 1, "cost.footprint_length", fl, "must be null or >= 1")


@dataclass
class CostTaskConfig(ExperimentConfig):
    """The config of ``attnlab cost``: a training config (whose reader is measured), or a
    run's (``run``), plus the ``cost`` section."""

    run: str | None = None
    cost: CostConfig = field(default_factory=CostConfig)
