"""The training loop: one reader, its optimiser and schedule, validation, checkpoints.

The ``Trainer`` owns the loop and its state (``TrainState``: what checkpoints hold and a
resume restores; nobody else sets the trainer's attributes); the run directory around it
(lock, status, ``.hydra/``, the thread count) is the session's (``attnlab.training.session``),
which checks the config once and hands the trainer what it needs when it builds it.
``Trainer`` writes nothing while it is built (an existing run's checkpoint is loaded first),
so a refused command leaves the run directory as it was. Its loop offers hooks to whoever
drives it (the benchmark): ``on_step`` after every step, the data stream as a parameter
(``stream=``); ``timer`` sums the seconds spent drawing batches and in the step itself.
A run ends at train.steps, train.minutes or train.patience (``attnlab.training.budget``).
What one optimiser step computes, and how it fails, is ``attnlab.training.step``'s; what a
run leaves when it ends (metrics.json), ``attnlab.training.run_end``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from omegaconf import DictConfig

from attnlab import runtime
from attnlab.config import lengths_label, seen_lengths
from attnlab.config.experiment import patience_measure
from attnlab.data.strips import StripSynth
from attnlab.data.training_data import training_data
from attnlab.io import remove_orphans
from attnlab.models import registry
from attnlab.models.base import count_parameters
from attnlab.models.host import compile_loss
from attnlab.progress import Progress, use_rich
from attnlab.runs import drawn
from attnlab.runs.checkpoint import Checkpoint
from attnlab.runs.rundir import RunDir, RunStatus
from attnlab.runtime import bf16_autocast, resolve_device
from attnlab.threads import FixedThreads, ThreadGovernor
from attnlab.training import state
from attnlab.training.average import WeightAverage
from attnlab.training.budget import Budget
from attnlab.training.freeze import check_freeze, freeze, warn_random, warn_unloaded
from attnlab.training.optim import Schedule, optimiser
from attnlab.training.prepare import check_training, training_threads
from attnlab.training.run_end import finish_run
from attnlab.training.selftrain import Rounds, next_round
from attnlab.training.state import Best, StepTimer, TrainState
from attnlab.training.step import optimiser_step
from attnlab.training.validation import (
    log_validation,
    validate,
    write_validation,
)

log = logging.getLogger("attnlab.train")


class Trainer:
    """One training run; ``run()`` returns the final metrics.

    Building it writes nothing: an existing run's checkpoint is loaded first (``resume``),
    so a refused command leaves the run directory as it was.
    """

    def __init__(
        self,
        cfg: DictConfig,
        run: RunDir,
        stream: Any = None,
        *,
        threads: ThreadGovernor | FixedThreads | None = None,
        checked: bool = False,
    ):
        """``stream``: the training batches (anything with ``next()``, ``state()`` and
        ``load_state()``); None = the one the config describes (synthetic or data.path).
        ``threads``: the run's thread policy, set by whoever owns the run directory (the
        session); None = set here from the config. ``checked``: the config has passed
        ``check_training`` already (the session checks it once per command)."""
        if not checked:
            check_training(cfg)
        self.cfg = cfg
        self.run_dir = run
        self.threads = training_threads(cfg.train) if threads is None else threads
        self.device = resolve_device(cfg.train.device)
        self.seen = seen_lengths(cfg.data)
        self.synth = StripSynth(cfg.data)
        opt, schedule = self._build_reader()
        data = training_data(cfg, self.model, self.seen, self.synth, stream)  # attnlab.data
        self.val_sets = data.val_sets
        self.split = data.split  # data=folder: what the run holds out; else None
        self.budget = Budget.of(cfg.train)  # train.steps, train.minutes
        self.timer = StepTimer()
        self.autocast = bf16_autocast(cfg.train.bf16, self.device)
        self.loss_fn = compile_loss(self.model.loss) if cfg.train.compile else self.model.loss
        self.writer = None
        ema = cfg.optim.ema  # the weights' average, read at validation (training.average)
        self.state = TrainState(
            opt,
            schedule,
            data.stream,
            average=WeightAverage(self.model, ema) if ema > 0 else None,
            best=Best(measure=patience_measure(cfg.train.objective)),  # what chooses best.pt
            drawn_by=drawn.drawn_by(self.synth),  # what draws it (a resume keeps the first)
            rounds=Rounds.of(cfg, data.unlabelled),  # data.unlabelled: self-training
        )
        self.resumed = self.resume()  # may refuse: another reader's or data's checkpoint
        self.budget.start(self.state)
        if cfg.get("init_from") and not self.resumed:  # fine-tuning (attnlab.training.finetune)
            from attnlab.training.finetune import init_from

            started_from = init_from(self.model, cfg, str(cfg.init_from), self.split)
            self.state.started_from = started_from
            warn_unloaded(self.frozen, started_from)
            if self.state.average is not None:  # the average starts at the loaded weights
                self.state.average.load(self.model.state_dict())

    def _build_reader(self) -> tuple[torch.optim.Optimizer, Schedule]:
        """The reader (seeded) and its frozen parts; its optimiser and learning-rate schedule
        (over ``train.steps``: a budget in minutes resizes it as the run goes)."""
        cfg, t = self.cfg, self.cfg.train
        torch.manual_seed(cfg.seed)
        self.model = registry.build(cfg.model, cfg.data.height, cfg.data.charset).to(self.device)
        self.params = count_parameters(self.model)
        # train.freeze: those parts get no gradient and no optimiser state (training.freeze)
        names = check_freeze(getattr(t, "freeze", None), self.model, self.model.name)
        self.frozen = freeze(self.model, names)
        warn_random(names, cfg.get("init_from"))
        return optimiser(self.model, cfg.optim, t.steps)

    # -- what others read (``self.state`` is what changes) ----------------------------------

    @property
    def step(self) -> int:
        return self.state.step

    @property
    def opt(self) -> torch.optim.Optimizer:
        return self.state.opt

    @property
    def stream(self) -> Any:
        return self.state.stream

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """All that resuming needs, as of now (``attnlab.training.state``)."""
        return self.state.checkpoint(self.model, self.cfg, self.params, self.split)

    def resume(self) -> bool:
        """Load last.pt when there is one; refuse a command that would compute another run."""
        last = self.run_dir.checkpoint("last")
        ckpt = state.resumable(last, self.cfg, self.split)
        if ckpt is None:
            return False
        self.state.restore(ckpt, self.model, last)
        log.info("resumed from %s at step %d", last, self.step)
        return True

    def save(self, name: str) -> None:
        self.checkpoint().save(self.run_dir.checkpoint(name))

    # -- steps ---------------------------------------------------------------------------------

    def train_step(self) -> float:
        """One optimiser step, not counted; its loss (``attnlab.training.step``)."""
        return optimiser_step(self)

    def advance(self) -> float:
        """One optimiser step, counted; its loss."""
        self.threads.tick()
        self.state.schedule.resize(self.budget.horizon(self.step))  # train.minutes: re-estimated
        started = time.perf_counter()
        loss = self.train_step()
        self.timer.step_s += time.perf_counter() - started
        self.timer.steps += 1
        self.state.step += 1
        self.state.trained_steps += 1
        self.budget.say_pace(self.step)  # once: what the rest of the budget would take
        if self.state.average is not None:
            self.state.average.update(self.model, self.step)
        return loss

    def reading(self) -> AbstractContextManager[None]:
        """The weights the run reads with inside the block: the average under optim.ema."""
        return (
            nullcontext() if self.state.average is None else self.state.average.applied(self.model)
        )

    def validate(self) -> dict[str, Any]:
        """Read every validation set (with the weights the run reads with); log, and write to
        TensorBoard, what it read."""
        with self.reading():
            val, shown = validate(
                self.model, self.val_sets, self.device, self.autocast, self.cfg.train.examples_shown
            )
            log_validation(self.step, val, shown)
            if self.writer is not None:  # and a few attention maps, when the reader has weights
                maps = self.cfg.train.maps_logged
                write_validation(
                    self.writer, self.step, val, self.model, self.val_sets, maps, self.autocast
                )
        return val

    def checkpoint_now(self) -> None:
        """last.pt, the history and the status (running), with the time and budget spent."""
        self.state.seconds = self.budget.spent()
        self.state.budget = self.budget.record(self.step, self.state.seconds, self.ended_by())
        self.save("last")
        self.run_dir.write_history(self.state.history)
        self.run_dir.write_status(
            RunStatus.running, self.step, budget=self.budget.status(self.state.budget)
        )

    def ended_by(self) -> str | None:
        """What ends the run as of now: steps, patience or minutes; None: it trains on."""
        return self.budget.ended_by(self.state, self.cfg.train)

    # -- the loop ------------------------------------------------------------------------------

    def run(self, on_step: Callable[[int, float], None] | None = None) -> dict[str, Any]:
        """Train until train.steps, train.minutes or train.patience ends the run (whichever
        comes first); ``on_step(step, loss)`` after each step."""
        self.budget.start(self.state)
        self.start()
        self.threads.tick()
        if self.step == 0:
            self.validate_and_record()
        progress = Progress(self.cfg.train.steps, self.step, use_rich(self.cfg.train.progress))
        try:
            with runtime.stop_between_steps() as stop:  # Ctrl-C, SIGTERM: after a whole step
                self.loop(progress, stop, on_step)
                while next_round(self):  # data.unlabelled: self-training's rounds
                    self.loop(progress, stop, on_step)
        finally:
            progress.close()
            self.writer.flush()
        return self.finish()

    def start(self) -> None:
        """The run's status (running), its split, its TensorBoard writer, and what it trains."""
        from torch.utils.tensorboard import SummaryWriter

        t = self.cfg.train
        remove_orphans(self.run_dir.checkpoints)
        self.run_dir.write_status(
            RunStatus.running, self.step, budget=self.budget.status(self.state.budget)
        )
        if self.split is not None:  # the held-out strips' ids, before any step trains
            self.run_dir.write_split(self.split)
        self.writer = SummaryWriter(str(self.run_dir.tb), purge_step=self.step or None)
        log.info(
            "%s reader: %d parameters; seen lengths %s; %s; %s of %d strips%s",
            self.model.name,
            self.params,
            lengths_label(self.seen),
            self.device,
            self.budget.label(),
            t.batch_size * t.accumulate,
            f" (resumed at step {self.step})" if self.resumed else "",
        )
        self.budget.say_if_spent(self.state, self.resumed)

    def loop(self, progress: Progress, stop: Any, on_step: Callable | None) -> None:
        """The steps, each with its logging, validation and checkpoint, until the run ends
        (``ended_by``); a stop asked for during one (``runtime.stop_between_steps``) saves
        last.pt once it is whole, then ends the run as the signal would."""
        t = self.cfg.train
        start_time, start_step = time.time(), self.step
        ends = self.ended_by() is not None  # resumed, it may have ended already
        while not ends:
            loss = self.advance()
            if on_step is not None:
                on_step(self.step, loss)
            end = self.state.round_start + t.steps  # train.steps counts a round's steps
            progress.update(self.step, loss, self.state.last_val.get("exact_acc"), end)
            ends = self.ended_by() is not None  # train.steps, or no time for another step
            if self.step % t.log_every == 0 or ends:
                self.log_step(loss, progress.rich, start_time, start_step)
            if self.step % t.val_every == 0 or ends:
                self.validate_and_record()
                if self.state.best.beaten_by(self.state.last_val):  # on train.objective's measure
                    self.state.best = self.state.best.after(self.step, self.state.last_val)
                    self.save("best")
                ends = self.ended_by() is not None  # train.patience may have run out
            if self.step % t.checkpoint_every == 0 or ends or stop.requested is not None:
                self.checkpoint_now()
            if stop.requested is not None:
                log.warning("stopped at step %d: last.pt saved", self.step)
                stop.deliver()

    def log_step(self, loss: float, rich: bool, start_time: float, start_step: int) -> None:
        """The step's loss and the learning rate it trained with: TensorBoard, the history,
        and (without the rich progress bar) a log line with the strips/s since this command
        started."""
        t, lr = self.cfg.train, self.state.schedule.used
        self.writer.add_scalar("train/loss", loss, self.step)
        self.writer.add_scalar("train/lr", lr, self.step)
        self.state.record(loss=loss, lr=lr)
        if not rich:
            done = (self.step - start_step) * t.batch_size * t.accumulate
            rate = done / max(1e-9, time.time() - start_time)
            log.info(
                "step %d/%d  loss %.4f  lr %.2e  %.0f strips/s",
                self.step,
                self.state.round_start + t.steps,  # data.unlabelled: the end of this round
                loss,
                lr,
                rate,
            )

    def validate_and_record(self) -> None:
        """Validate now; the result is ``last_val`` and goes into the history, with the training
        seconds spent so far (``train_seconds``: the report's curves against minutes)."""
        started = time.perf_counter()
        self.state.last_val = self.validate()
        self.budget.validated(time.perf_counter() - started)
        val, spent = self.state.last_val, round(self.budget.spent(), 3)
        self.state.record(val_exact_acc=val["exact_acc"], val_cer=val["cer"], train_seconds=spent)

    def finish(self) -> dict[str, Any]:
        """metrics.json and the history of a run trained to its end; its metrics
        (``attnlab.training.run_end``)."""
        return finish_run(self)
