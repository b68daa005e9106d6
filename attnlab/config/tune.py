"""The config of ``attnlab sweep tuned``: the ``tune`` section (``conf/tune.yaml``).

Every other key on that command line is a training override or a search axis that goes to
the studies and the re-runs (``attnlab.tasks.tuned``); only ``tune.*`` is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnlab.config.experiment import MAX_MINUTES
from attnlab.config.rules import check_seed, finite, require

SAMPLERS = ("random", "tpe")  # Optuna's samplers, as the Optuna sweeper's config group names them


@dataclass
class TuneConfig:
    trials: int = 12  # trials per reader, each an ordinary run; the same number for every reader
    seeds: int = 3  # seeds each reader's best trial is trained again with, then evaluated
    # The re-runs' seeds: first_seed .. first_seed + seeds - 1 (never a trial's seed)
    first_seed: int = 1
    sampler: str = "random"  # random (random search) | tpe (Optuna's TPE); the same for each
    sampler_seed: int = 0  # the sampler's seed, the same for every reader's study
    steps: int | None = None  # train.steps of each trial; null = the re-runs' budget
    # train.minutes of each trial and of each re-run (wall time, validations included; with
    # train.steps the ceiling): readers compared at equal time. null: steps only
    minutes: float | None = None

    @classmethod
    def check(cls, t: Any, prefix: str = "tune") -> None:
        require(
            t.trials >= 2,
            f"{prefix}.trials",
            t.trials,
            "must be >= 2 (an expected best against trials needs two)",
        )
        require(t.seeds >= 1, f"{prefix}.seeds", t.seeds, "must be >= 1")
        check_seed(t.first_seed, f"{prefix}.first_seed")
        check_seed(t.sampler_seed, f"{prefix}.sampler_seed")
        require(
            t.sampler in SAMPLERS,
            f"{prefix}.sampler",
            t.sampler,
            f"must be one of {', '.join(SAMPLERS)}",
        )
        if t.steps is not None:
            require(t.steps >= 1, f"{prefix}.steps", t.steps, "must be >= 1")
        minutes = getattr(t, "minutes", None)
        ok = minutes is None or (finite(minutes) and 0 < minutes <= MAX_MINUTES)
        rule = f"must be a number of minutes > 0 and <= {MAX_MINUTES} (a year), or null (off)"
        require(ok, f"{prefix}.minutes", minutes, rule)


@dataclass
class TuneTaskConfig:
    tune: TuneConfig = field(default_factory=TuneConfig)
