"""What a trainer keeps between steps and across restarts, in one object it owns
(``TrainState``: step, optimiser, schedule, weight average, best validation and patience's
history, random states, time spent), which its checkpoint holds and a resume restores; the
best validation so far (``Best``), the step timer, and the last.pt a run resumes from
(``resumable``: refused when resuming it would compute another run than the one it holds).
Nothing outside the trainer sets the trainer's attributes (tests/test_layout.py)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from attnlab.config import plain_config
from attnlab.config.experiment import patience_measure
from attnlab.data.split_record import split_changes
from attnlab.errors import UserError
from attnlab.runs import checkpoint, drawn
from attnlab.runs.checkpoint import Checkpoint
from attnlab.runs.resume import check_same_config
from attnlab.training.average import WeightAverage
from attnlab.training.optim import Schedule

log = logging.getLogger("attnlab.train")


@dataclass
class StepTimer:
    """Seconds spent drawing batches (``data_s``) and in whole steps (``step_s``, data
    included) over ``steps`` steps: where a step's time goes, without patching the loop."""

    data_s: float = 0.0
    step_s: float = 0.0
    steps: int = 0

    def reset(self) -> None:
        self.data_s = self.step_s = 0.0
        self.steps = 0


@dataclass
class Best:
    """The best validation so far (best.pt), and its step, on the ``measure`` that
    ``train.objective`` names (``patience_measure``: val_cer for a CER objective, val_exact
    otherwise): one measure chooses best.pt, counts train.patience and gives a sweeper its
    value. Only a strictly better validation replaces it (the first of equal ones stays)."""

    step: int = -1
    exact_acc: float = -1.0
    metrics: dict[str, Any] = field(default_factory=dict)
    measure: str = "val_exact"

    @classmethod
    def of(cls, ckpt: Checkpoint) -> Best:
        b = ckpt.best
        return cls(
            int(b.get("step", -1)),
            float(b.get("exact_acc", -1.0)),
            ckpt.best_metrics,
            str(b.get("measure", "val_exact")),  # older checkpoints chose by exact accuracy
        )

    def beaten_by(self, val: dict[str, Any]) -> bool:
        """Whether the validation ``val`` is strictly better than this one."""
        if self.step < 0:
            return True
        if self.measure == "val_cer":
            return float(val["cer"]) < float(self.metrics.get("cer", math.inf))
        return float(val["exact_acc"]) > self.exact_acc

    def after(self, step: int, val: dict[str, Any]) -> Best:
        """The best once the validation ``val`` at ``step`` is read."""
        return (
            Best(step, float(val["exact_acc"]), val, self.measure) if self.beaten_by(val) else self
        )

    def record(self) -> dict[str, Any]:
        """The checkpoint's ``best``: its step, exact accuracy and CER, and the measure."""
        cer = self.metrics.get("cer")
        return {"step": self.step, "exact_acc": self.exact_acc, "cer": cer, "measure": self.measure}

    @property
    def value(self) -> float | None:
        """The best validation's value on its measure."""
        got = self.metrics.get("cer") if self.measure == "val_cer" else self.exact_acc
        return None if got is None or self.step < 0 else float(got)


def resumable(last: Path, cfg: DictConfig, split: dict[str, Any] | None) -> Checkpoint | None:
    """``last`` (a run's last.pt) loaded, when there is one; refused when this command would
    compute another run (``check_same_config``; data=folder: other strips or another split)
    or when it holds nothing to resume from."""
    if not last.exists():
        return None
    ckpt = checkpoint.load(last)
    # every key that changes what the run computes, as the checkpoint was trained with
    check_same_config(plain_config(ckpt.run_config()), plain_config(cfg), last)
    if split is not None:  # data=folder: the very strips and split it trained on
        changed = split_changes(ckpt.data_split, split)
        if changed:
            raise UserError(f"{last}: not resumed, {changed}; use a new run directory")
    chose, measure = ckpt.best.get("measure", "val_exact"), patience_measure(cfg.train.objective)
    if ckpt.best.get("step", -1) >= 0 and chose != measure:  # best.pt is another measure's
        raise UserError(
            f"{last}: not resumed, its best.pt was chosen by {chose} and train.objective="
            f"{cfg.train.objective} chooses by {measure}; use a new run directory or the "
            "run's own train.objective"
        )
    if ckpt.optimizer is None or ckpt.scheduler is None or ckpt.rng is None:
        raise UserError(f"{last}: holds no optimiser, schedule or RNG state to resume from")
    return ckpt


@dataclass
class TrainState:
    """All that a trainer changes as it trains, and all that a resume restores: the steps
    taken, the optimiser and its schedule, the weights' average (optim.ema), the best
    validation (best.pt) and the history that ``train.patience`` counts, the random states
    (torch's global generator and the training stream's), the seconds spent over every
    command, the run's lineage (the checkpoint it started from, what drew it), and with
    data.unlabelled self-training's rounds (the strips taken: ``training.selftrain``)."""

    opt: torch.optim.Optimizer
    schedule: Schedule
    stream: Any  # the training batches: their random state is the run's
    average: WeightAverage | None = None
    best: Best = field(default_factory=Best)
    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    last_val: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0  # training time (steps, validations, saves), over every restart
    trained_steps: int = 0  # steps whose time ``seconds`` counts
    started_from: dict[str, Any] | None = None  # init_from: the source checkpoint
    drawn_by: dict[str, Any] | None = None  # what draws the strips (a resume keeps the first)
    budget: dict[str, Any] | None = None  # the budget as last recorded (training.budget)
    rounds: Any = None  # data.unlabelled: self-training's rounds (training.selftrain.Rounds)

    @property
    def round_start(self) -> int:
        """The step the current round started at (0: a run without data.unlabelled)."""
        return 0 if self.rounds is None else self.rounds.start

    @property
    def round_history(self) -> list[dict[str, Any]]:
        """The history that ``train.patience`` counts: the current round's rows."""
        return self.history if self.rounds is None else self.rounds.history(self.history)

    def begin_round(self, opt: torch.optim.Optimizer, schedule: Schedule, stream: Any) -> None:
        """data.unlabelled: the next round's optimiser, schedule and training stream."""
        self.opt, self.schedule, self.stream = opt, schedule, stream

    def record(self, **values: float) -> None:
        """Add values to the history row of the current step."""
        if not self.history or self.history[-1]["step"] != self.step:
            self.history.append({"step": self.step})
        self.history[-1].update(values)

    def random_states(self) -> dict[str, Any]:
        return {"torch": torch.get_rng_state(), "stream": self.stream.state()}

    def checkpoint(
        self, model: Any, cfg: DictConfig, params: int | None, split: dict[str, Any] | None
    ) -> Checkpoint:
        """The state as of now, with ``model``'s weights (with optim.ema, their average and
        the weights as trained), the run's config, size and split: what a resume needs to
        compute the same run."""
        averaged = self.average is not None  # optim.ema: the average is what the run reads with
        return Checkpoint(
            reader=model.name,
            model=self.average.state if averaged else model.state_dict(),
            trained=model.state_dict() if averaged else None,
            optimizer=self.opt.state_dict(),
            scheduler=self.schedule.state_dict(),
            step=self.step,
            rng=self.random_states(),
            config=plain_config(cfg),
            history=self.history,
            best=self.best.record(),
            best_metrics=self.best.metrics,
            val=self.last_val,
            params=params,
            timing={
                "train_seconds": self.seconds,
                "steps": self.trained_steps,
                "budget": self.budget,
            },
            data_split=split,
            init_from=self.started_from,
            drawn_by=self.drawn_by,
            self_training=None if self.rounds is None else self.rounds.record(),
        )

    def restore(self, ckpt: Checkpoint, model: Any, last: Path) -> None:
        """``ckpt`` (``last``, checked by ``resumable``) into this state and ``model``."""
        ckpt.load_into(model, last)
        if self.average is not None:  # optim.ema: the average, then the weights as trained
            if ckpt.trained is None:
                raise UserError(f"{last}: holds no weights as trained (optim.ema) to resume from")
            self.average.load(ckpt.model)
            model.load_state_dict(ckpt.trained)
        self.opt.load_state_dict(ckpt.optimizer)
        self.schedule.load_state_dict(ckpt.scheduler, last)
        self.step = int(ckpt.step)
        torch.set_rng_state(ckpt.rng["torch"])
        if self.rounds is not None:  # data.unlabelled: the round's stream, its strips taken
            self.stream = self.rounds.restore(ckpt.self_training, last)
        self.stream.load_state(ckpt.rng["stream"])
        self.history = list(ckpt.history)
        self.best = Best.of(ckpt)
        self.last_val = ckpt.val
        self.started_from = ckpt.init_from
        if moved := drawn.changes(ckpt.drawn_by, self.drawn_by):
            log.warning("resumed with other packages than it started with: %s", "; ".join(moved))
        self.drawn_by = ckpt.drawn_by or self.drawn_by
        self.seconds = float(ckpt.timing.get("train_seconds", 0.0))
        self.trained_steps = int(ckpt.timing.get("steps", 0))
        self.budget = ckpt.timing.get("budget")
