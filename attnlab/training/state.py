"""What a trainer keeps between steps and across restarts: the best validation so far, the
step timer, and the last.pt a run resumes from (refused when resuming it would compute
another run than the one it holds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnlab.config import plain_config
from attnlab.errors import UserError
from attnlab.runs import checkpoint
from attnlab.runs.checkpoint import Checkpoint
from attnlab.runs.resume import check_same_config


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
    """The validation with the best exact accuracy so far (best.pt), and its step."""

    step: int = -1
    exact_acc: float = -1.0
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, ckpt: Checkpoint) -> Best:
        b = ckpt.best
        return cls(int(b.get("step", -1)), float(b.get("exact_acc", -1.0)), ckpt.best_metrics)


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
        from attnlab.data.source_train import split_changes

        changed = split_changes(ckpt.data_split, split)
        if changed:
            raise UserError(f"{last}: not resumed, {changed}; use a new run directory")
    if ckpt.optimizer is None or ckpt.scheduler is None or ckpt.rng is None:
        raise UserError(f"{last}: holds no optimiser, schedule or RNG state to resume from")
    return ckpt
