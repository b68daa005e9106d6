"""``attnlab cost``: what a reader costs by strip length (``cost.*``), beside a training
config (the reader's, or a run's own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnlab.config.experiment import MAX_EVAL_LENGTH, ExperimentConfig
from attnlab.config.rules import check_at_least, require

MAX_STRIPS = 1024  # cost.strips, each of cost.read_batches and cost.footprint_batch
MAX_REPEATS = 100


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
        most = MAX_EVAL_LENGTH
        lengths = list(c.lengths)
        ok = bool(lengths) and all(1 <= int(n) <= most for n in lengths)
        rule = f"must be one or more lengths from 1 to {most} digits (as eval.lengths)"
        require(ok, "cost.lengths", lengths, rule)
        fl = c.footprint_length
        ok = fl is None or 1 <= fl <= most
        require(ok, "cost.footprint_length", fl, f"must be null or 1 to {most} digits")
        require(c.strips <= MAX_STRIPS, "cost.strips", c.strips, f"must be at most {MAX_STRIPS}")
        rule = f"must be at most {MAX_REPEATS}"
        require(c.repeats <= MAX_REPEATS, "cost.repeats", c.repeats, rule)
        batches = list(c.read_batches)
        ok = bool(batches) and all(1 <= int(b) <= MAX_STRIPS for b in batches)
        rule = f"must be one or more batch sizes from 1 to {MAX_STRIPS}"
        require(ok, "cost.read_batches", batches, rule)
        fb = c.footprint_batch
        ok = fb == 0 or (4 <= fb <= MAX_STRIPS and fb % 4 == 0)
        rule = f"must be 0 (off) or a multiple of 4 up to {MAX_STRIPS}"
        require(ok, "cost.footprint_batch", fb, rule)
        key = str(c.match_key)
        rule = "must be a key of the reader's config (model.KEY), an integer width"
        require(key.startswith("model."), "cost.match_key", key, rule)

    @staticmethod
    def normalise(c: Any) -> list[str]:
        """Lengths and batch sizes sorted and each once, readers each once (in their
        order), in place; a line on each list that changed."""
        notes = []
        for key, keep in (("lengths", sorted), ("read_batches", sorted), ("readers", list)):
            given = None if c[key] is None else list(c[key])
            if given is None:
                continue
            once = keep(dict.fromkeys(given))
            if once != given:
                c[key] = once
                what = "sorted, each once" if keep is sorted else "each once"
                notes.append(f"cost.{key}={given} measured as {once} ({what})")
        return notes


@dataclass
class CostTaskConfig(ExperimentConfig):
    """The config of ``attnlab cost``: a training config (whose reader is measured), or a
    run's (``run``), plus the ``cost`` section."""

    run: str | None = None
    cost: CostConfig = field(default_factory=CostConfig)
