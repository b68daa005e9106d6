"""What a trainer keeps between steps and across restarts: the best validation so far, the
step timer, the checkpoint a trainer writes (``checkpoint_of``) and the last.pt a run
resumes from (``resume``; refused when resuming it would compute another run than the one
it holds)."""

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
from attnlab.data.source_train import split_changes
from attnlab.errors import UserError
from attnlab.runs import checkpoint, drawn
from attnlab.runs.checkpoint import Checkpoint
from attnlab.runs.resume import check_same_config

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


def checkpoint_of(t: Any) -> Checkpoint:
    """The state of ``t`` (a ``Trainer``) as of now: weights (with optim.ema, their average
    and the weights as trained), optimiser, schedule, step, both random streams, history,
    best, timing, split and lineage (so that a resume computes the same run)."""
    averaged = t.average is not None  # optim.ema: the average is what the run reads with
    return Checkpoint(
        reader=t.model.name,
        model=t.average.state if averaged else t.model.state_dict(),
        trained=t.model.state_dict() if averaged else None,
        optimizer=t.opt.state_dict(),
        scheduler=t.sched.state_dict(),
        step=t.step,
        rng={"torch": torch.get_rng_state(), "stream": t.stream.state()},
        config=plain_config(t.cfg),
        history=t.history,
        best=t.best.record(),
        best_metrics=t.best.metrics,
        val=t.last_val,
        params=t.params,
        timing={"train_seconds": t.train_seconds, "steps": t.trained_steps},
        data_split=t.split,
        init_from=t.started_from,
        drawn_by=t.drawn_by,
    )


def resume(t: Any) -> bool:
    """Load the run's last.pt into the trainer ``t`` when there is one (``resumable``);
    whether it did."""
    last = t.run_dir.checkpoint("last")
    ckpt = resumable(last, t.cfg, t.split)
    if ckpt is None:
        return False
    ckpt.load_into(t.model, last)
    if t.average is not None:  # optim.ema: the average, then the weights as trained
        if ckpt.trained is None:
            raise UserError(f"{last}: holds no weights as trained (optim.ema) to resume from")
        t.average.load(ckpt.model)
        t.model.load_state_dict(ckpt.trained)
    t.opt.load_state_dict(ckpt.optimizer)
    t.sched.load_state_dict(ckpt.scheduler)
    t.step = int(ckpt.step)
    torch.set_rng_state(ckpt.rng["torch"])
    t.stream.load_state(ckpt.rng["stream"])
    t.history = list(ckpt.history)
    t.best = Best.of(ckpt)
    t.last_val = ckpt.val
    t.started_from = ckpt.init_from
    if moved := drawn.changes(ckpt.drawn_by, t.drawn_by):
        log.warning("resumed with other packages than it started with: %s", "; ".join(moved))
    t.drawn_by = ckpt.drawn_by or t.drawn_by
    t.train_seconds = float(ckpt.timing.get("train_seconds", 0.0))
    t.trained_steps = int(ckpt.timing.get("steps", 0))
    log.info("resumed from %s at step %d", last, t.step)
    return True
