"""Self-training on strips nobody labelled (``data.unlabelled=DIR``, with ``data=folder``):
the reader trained on the labelled strips reads the unlabelled ones, and the readings it is
sure of join training as labels, round after round while validation improves.

- Round 0 trains the run's budget (``train.steps``, or fewer where ``train.patience`` ends
  it) on the labelled strips, as a run without ``data.unlabelled`` does.
- Between rounds the run's best weights (best.pt, the weights it reads with) read the
  validation strips and the unlabelled ones, greedy, each with the reader's confidence (the
  probability of its reading, ``evaluation.inference.read_strips``). The threshold is the
  lowest confidence at which the validation readings at or above it are right at least
  ``PRECISION`` (99%) of the time (``threshold``): chosen on validation, never on the strips
  it labels, and by precision because a wrong pseudo-label teaches a wrong reading, while
  one left out costs only a strip; a grid of thresholds judged by validation after a round
  each would cost a round a candidate. The unlabelled readings at or above it, of a seen
  length, are taken (by the strips' content keys) and join the labelled training strips.
- Round r > 0 starts from best.pt's weights with a fresh optimiser and schedule and trains
  ``train.steps`` more steps (``train.patience`` counts the round's own validations) on
  the labelled strips and the strips taken, drawn as labelled strips are (``Pool.stream``,
  seeded by the run's seed and the round). Its result is kept when it reads a better
  validation than the best before it (best.pt moves; the measure ``train.objective``
  chooses by); the rounds stop at the first round that does not, when no confidence reaches
  the precision, when none of the unlabelled readings reaches the threshold, or after
  ``train.rounds`` rounds (3 unless given). best.pt is always the best validation's weights,
  whichever round. A run its cap stopped, asked again into its directory with a larger
  ``train.rounds``, trains on from its last round (``Rounds.restore``), as the rounds of one
  run with that cap would.
- The record (the checkpoint's ``self_training``, metrics.json's ``self_training``): per
  round its first step, threshold, the validation precision at it, how many strips were
  taken, the best validation before and after it and whether it improved; why the rounds
  stopped. The checkpoint also holds the strips taken (key, reading), so a resume, in the
  middle of a round or between two, trains exactly what an uninterrupted run trains: the
  between-round step is computed again from best.pt when a run was stopped before it.
- Pseudo-labels never enter a validation or test set: the held-out strips are read for the
  threshold only, and every unlabelled strip counts as trained on in the run's record
  (``attnlab.data.unlabelled``), so the leak checks refuse any of them in a test set.
- A budget in ``train.minutes`` is refused with ``data.unlabelled``: a round is sized in
  steps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab.config import seen_lengths
from attnlab.errors import UserError
from attnlab.evaluation.inference import read_strips
from attnlab.runs import checkpoint
from attnlab.training.optim import optimiser

log = logging.getLogger("attnlab.train")

PRECISION = 0.99  # of the validation readings at or above the threshold


def threshold(confidence: list[float], right: list[bool], precision: float) -> float | None:
    """The lowest confidence t at which the readings of confidence >= t (ties included) are
    right at least ``precision`` of the time; None when no t is."""
    order = sorted(range(len(confidence)), key=lambda i: -confidence[i])
    found, correct = None, 0
    for k, i in enumerate(order, start=1):
        correct += bool(right[i])
        tied = k < len(order) and confidence[order[k]] == confidence[i]
        if not tied and correct >= precision * k:
            found = float(confidence[i])
    return found


def precision_at(confidence: list[float], right: list[bool], t: float) -> float:
    above = [r for c, r in zip(confidence, right, strict=True) if c >= t]
    return sum(above) / len(above)


@dataclass
class Rounds:
    """Self-training's state, part of the trainer's ``TrainState``: the round, its first
    step, the strips taken (content key, reading), the per-round record and why it stopped
    (None: it goes on). ``pool``: the unlabelled strips (``data.unlabelled.Pool``);
    ``cap``: ``train.rounds``, the rounds after round 0 at most."""

    pool: Any
    cap: int = 3
    round: int = 0
    start: int = 0
    taken: list[tuple[str, str]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    stopped: str | None = None

    @classmethod
    def of(cls, cfg: Any, pool: Any) -> Rounds | None:
        """The rounds of a run with ``data.unlabelled`` (``pool``); None without it."""
        if pool is None:
            return None
        if cfg.train.get("minutes") is not None:
            raise UserError(
                f"train.minutes={cfg.train.minutes}: data.unlabelled trains in rounds of "
                f"train.steps steps; give train.steps (and train.patience) instead"
            )
        entry = {"round": 0, "start_step": 0, "threshold": None, "taken": 0}
        cap = int(cfg.train.get("rounds", 3))
        return cls(pool, cap=cap, log=[{**entry, "val_before": None}])

    def record(self, taken: bool = True) -> dict[str, Any]:
        """The checkpoint's record (with the strips taken) or metrics.json's (without)."""
        out = {
            "round": self.round,
            "start_step": self.start,
            "rounds": [dict(r) for r in self.log],
            "stopped": self.stopped,
            "precision": PRECISION,
            "max_rounds": self.cap,
            "unlabelled": len(self.pool),
        }
        return {**out, "taken": [list(t) for t in self.taken]} if taken else out

    def restore(self, saved: dict[str, Any] | None, last: Path) -> Any:
        """The record of a checkpoint (``last``) into this state; the stream of its round."""
        if not saved:
            raise UserError(f"{last}: holds no self-training record (data.unlabelled) to resume")
        self.round, self.start = int(saved["round"]), int(saved["start_step"])
        self.taken = [(str(k), str(label)) for k, label in saved["taken"]]
        self.log = [dict(r) for r in saved["rounds"]]
        self.stopped = saved.get("stopped")
        r = self.round
        if capped(saved) and r < self.cap:  # a larger train.rounds: trains on
            log.info("self-training: train.rounds=%d trains on after round %d", self.cap, r)
            self.stopped = None
        return self.pool.stream(self.taken, self.round)

    def close(self, best: Any) -> None:
        """The round that ended: the best validation after it, and whether it improved."""
        entry = self.log[-1]
        improved = best.step > self.start if self.round else best.step >= 0
        entry.update(val_after=best.value, best_step=best.step, improved=improved)
        if self.round > 0 and not entry["improved"]:
            self.stopped = f"round {self.round} read no better validation than the best before it"
        elif self.round >= self.cap:
            self.stopped = f"{self.cap} rounds after round 0, the cap (train.rounds={self.cap})"

    def history(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows of a history that ``train.patience`` counts in this round."""
        return rows if self.round == 0 else [r for r in rows if int(r["step"]) > self.start]


def capped(saved: dict[str, Any]) -> bool:
    """Whether the rounds of a checkpoint's record (``Rounds.record``) stopped at their cap:
    its last round improved validation and no other rule ended them."""
    last = saved["rounds"][-1]
    cap = int(saved.get("max_rounds", 3))
    ended = saved.get("stopped") is not None
    return ended and last.get("improved") is True and int(saved["round"]) >= cap


def pseudo_labels(trainer: Any) -> tuple[float | None, float | None, list[tuple[str, str]]]:
    """Threshold, its validation precision, and the unlabelled strips taken (key, reading),
    read with the weights the trainer's model holds now."""
    model, device, bf16 = trainer.model, trainer.device, trainer.autocast
    confidence: list[float] = []
    right: list[bool] = []
    for strips in trainer.val_sets.values():
        r = read_strips(model, strips, device, 512, keep_weights=False, bf16=bf16)
        confidence += [float(c) for c in r.confidence]
        right += [t == label for t, label in zip(r.texts, strips.labels, strict=True)]
    t = threshold(confidence, right, PRECISION)
    if t is None:
        return None, None, []
    pool = trainer.state.rounds.pool
    r = read_strips(model, pool.strips(), device, 512, keep_weights=False, bf16=bf16)
    seen = set(seen_lengths(trainer.cfg.data))
    taken = [
        (key, text)
        for key, text, c in zip(pool.keys, r.texts, r.confidence, strict=True)
        if float(c) >= t and len(text) in seen
    ]
    return t, precision_at(confidence, right, t), taken


def next_round(trainer: Any) -> bool:
    """After a round: record it; when it improved validation (round 0 always counts), read
    the unlabelled strips with best.pt's weights, take the readings above the threshold and
    start the next round from those weights (the trainer's state: a fresh optimiser and
    schedule, the stream with the strips taken), saving last.pt. False: the rounds end."""
    state = trainer.state
    rounds: Rounds | None = state.rounds
    if rounds is None or rounds.stopped is not None:
        return False
    rounds.close(state.best)
    best = checkpoint.load(trainer.run_dir.checkpoint("best")) if rounds.stopped is None else None
    if best is not None:
        trainer.model.load_state_dict(best.model)  # the weights the run reads with
        t, precision, taken = pseudo_labels(trainer)
        entry = {"round": rounds.round + 1, "start_step": state.step, "threshold": t}
        entry.update(precision=precision, taken=len(taken), val_before=state.best.value)
        rounds.log.append(entry)
        if not taken:
            rounds.stopped = (
                f"no confidence at which validation readings are {PRECISION:.0%} right"
                if t is None
                else f"no unlabelled reading at or above the threshold {t:.4f}"
            )
    if rounds.stopped is not None:
        log.info("self-training: %s; best.pt is step %d's", rounds.stopped, state.best.step)
        trainer.checkpoint_now()
        return False
    if state.average is not None:  # optim.ema: the average, then the weights as trained
        state.average.load(best.model)
        trainer.model.load_state_dict(best.trained)
    opt, schedule = optimiser(trainer.model, trainer.cfg.optim, trainer.cfg.train.steps)
    rounds.round, rounds.start, rounds.taken = rounds.round + 1, state.step, taken
    state.begin_round(opt, schedule, rounds.pool.stream(taken, rounds.round))
    log.info(
        "self-training round %d from step %d: %d of %d unlabelled strips taken (confidence >= "
        "%.4f, %.1f%% right on validation)",
        rounds.round,
        state.step,
        len(taken),
        len(rounds.pool),
        t,
        100 * precision,
    )
    trainer.checkpoint_now()
    return True
