"""One training session in a run directory: the config checked once, the lock,
``status.json`` whatever happens, torch's threads, ``.hydra/`` written once the command is
accepted, and the objective a sweeper is returned. The loop is the ``Trainer``'s; what it
needs from the session is passed when it is built."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnlab.config import OBJECTIVES
from attnlab.errors import UserError, one_line
from attnlab.io import remove_orphans, write_text
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.resume import continue_command, resume_command
from attnlab.runs.rundir import RunDir, RunStatus
from attnlab.runtime import Interrupted, sigterm_as_interrupt
from attnlab.training.prepare import check_training, training_threads
from attnlab.training.selftrain import capped
from attnlab.training.trainer import Trainer
from attnlab.training.validation import patience_spent, standing

log = logging.getLogger("attnlab.train")


def validation_objective(name: str, metrics: dict[str, Any]) -> float:
    """val_exact / val_cer of the best checkpoint (the one evaluations read)."""
    return float(metrics["best"]["exact_acc" if name == "val_exact" else "cer"])


def record_objective(run_dir: Path, name: str, value: float) -> float:
    """Write objective.json into the run, so the value a sweeper got can be checked."""
    RunDir(run_dir).write_objective(name, value, OBJECTIVES[name][0])
    log.info("objective %s = %.6f (%s)", name, value, OBJECTIVES[name][0])
    return value


def train(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Train in ``run_dir`` (resuming from its last.pt if there is one); status.json says how
    it went, whatever happens. The run directory is locked while this runs; a command that
    is refused (bad config, another reader's checkpoint, a locked directory) changes nothing
    in it: its ``.hydra/`` is written here, once the command is accepted (Hydra's own
    writing is off: ``hydra.output_subdir: null`` in conf/train.yaml), and a bad value is
    refused before the lock, the status or anything else is written."""
    run = RunDir(run_dir)
    try:
        check_training(cfg)  # value checks first: a refusal here writes nothing
    except Exception as err:
        fresh = not run.status_file.exists()
        if _is_multirun() or not fresh:  # a fresh single run: the CLI says why, on stderr
            log.error("refused: %s", one_line(err))
        if _is_multirun() and fresh:  # the sweep summary lists it
            write_hydra_files(run, cfg)
            _record(run, RunStatus.failed, 0, f"{type(err).__name__}: {one_line(err)}")
        raise
    lock = run.lock("train")
    was_there = _sizes([lock.path, *_job_logs(run)])
    with lock:
        fresh = not run.status_file.exists()
        try:  # refusals happen here, before anything is written
            trainer = Trainer(cfg, run, threads=training_threads(cfg.train), checked=True)
        except BaseException as err:
            if fresh and not _is_multirun():  # the CLI says why on stderr; no trace here
                _leave_as_it_was(run, lock.path, was_there)
                raise
            if fresh:  # a sweep job that never started: the sweep summary lists it
                write_hydra_files(run, cfg)
            _refused_or_stopped(run, err, fresh)
            raise
        if _is_finished(run, trainer):  # asked again: the run stays exactly as it was
            log.warning(
                "nothing to train: %s %s; it is left as it was (%s trains on)",
                run.path,
                *_why_finished(trainer),
            )
            _leave_as_it_was(run, lock.path, was_there)
            remove_orphans(run.checkpoints)  # a killed writer's leftovers are not the record
            return run.read_metrics().__dict__
        if cfg.train.threads <= 0:  # recorded as the number this job ran with
            cfg.train.threads = torch.get_num_threads()
        write_hydra_files(run, cfg)  # accepted: this command's config is the run's
        with sigterm_as_interrupt():
            try:
                metrics = trainer.run()
            except BaseException as err:
                # Ctrl-C, SIGTERM, or submitit ending the process to requeue it (SystemExit)
                if isinstance(err, (KeyboardInterrupt, SystemExit)):
                    state, reason = RunStatus.interrupted, f"interrupted ({_what_ended(err)})"
                else:
                    state, reason = RunStatus.failed, f"{type(err).__name__}: {err}"
                hint = _how_to_resume(run) if state is RunStatus.interrupted else ""
                log.error("%s at step %d: %s%s", state.value, trainer.step, reason, hint)
                _record(run, state, trainer.step, reason)
                raise
        run.write_status(
            RunStatus.complete, metrics["step"], budget=trainer.budget.status(metrics["budget"])
        )
        _say_if_still_improving(run, trainer)
    return metrics


def _why_finished(trainer: Trainer) -> tuple[str, str]:
    """Why a complete run asked again has nothing to train, and what would train it on."""
    t, spent = trainer.cfg.train, patience_spent(trainer.state.history, trainer.cfg.train)
    rounds = trainer.state.rounds
    if rounds is not None and capped(rounds.record(taken=False)):
        said = f"ended its self-training at step {trainer.step}: {rounds.stopped}"
        return said, "a larger train.rounds"
    if trainer.ended_by() == "minutes":
        used = (trainer.state.budget or {}).get("minutes_spent", t.minutes)
        return (
            f"spent its budget at step {trainer.step}: {used:g} of train.minutes={t.minutes:g}",
            "a larger train.minutes",
        )
    if spent is not None and trainer.step < t.steps:
        return (
            f"stopped early at step {trainer.step}: {spent.since_best} validations without a "
            f"better {spent.name} (train.patience={t.patience})",
            "a larger train.patience, or train.patience=null,",
        )
    return f"is complete at step {trainer.step} (train.steps={t.steps})", "a larger train.steps"


def _say_if_still_improving(run: RunDir, trainer: Trainer) -> None:
    """One line when the run's best validation is its last one: more steps may read better
    (and the command that trains it on, from its last.pt)."""
    t = trainer.cfg.train
    now = standing(trainer.state.history, t.objective, untrained=True)
    if now.validations < 2 or now.since_best > 0:
        return
    rounds = trainer.state.rounds
    if rounds is not None:  # self-training: more rounds at its cap; train.steps is a round's
        again = capped(rounds.record(taken=False))
        more = f"train.rounds={max(1, 2 * rounds.cap)}" if again else f"train.steps={2 * t.steps}"
    elif trainer.ended_by() == "minutes":  # a budget in minutes: twice the minutes
        more = f"train.minutes={2 * t.minutes:g}"
    else:
        more = f"train.steps={2 * trainer.step}"
    command = continue_command(run.path, more)
    log.warning(
        "still improving: the best validation (%s %.4f) is the last one, at step %d; it may "
        "read better trained on: %s",
        now.name,
        now.best,
        now.last_step,
        command or f"{more} into the same run directory",
    )


def _refused_or_stopped(run: RunDir, err: BaseException, fresh: bool) -> None:
    """A job that ended before its first step: refused (failed), or stopped by Ctrl-C,
    SIGTERM or a requeue while it was being set up (interrupted: running it again starts
    it). Only a fresh run gets a status; a run that was there keeps its own."""
    stopped = isinstance(err, (KeyboardInterrupt, SystemExit))
    reason = f"interrupted ({_what_ended(err)})" if stopped else one_line(err)
    log.error("%s: %s", "stopped before its first step" if stopped else "refused", reason)
    if fresh:
        state = RunStatus.interrupted if stopped else RunStatus.failed
        _record(run, state, 0, reason if stopped else f"{type(err).__name__}: {reason}")


def _what_ended(err: BaseException) -> str:
    """What stopped a run, in the status reason: "Ctrl-C", "SIGTERM" or "SystemExit"."""
    if isinstance(err, Interrupted):  # SIGTERM (runtime.sigterm_as_interrupt)
        return _sweep_stop_cause() or "SIGTERM"
    return "Ctrl-C" if isinstance(err, KeyboardInterrupt) else type(err).__name__


def _sweep_stop_cause() -> str | None:
    """In a local sweep's job (hydra/launcher=parallel), what stopped the sweep, as its main
    process recorded it: a Ctrl-C reaches the job as SIGTERM from that process
    (hydra_plugins.attnlab_parallel.launcher); None elsewhere."""
    marker = os.environ.get("ATTNLAB_SWEEP_STOP")
    try:
        cause = Path(marker).read_text().strip() if marker else ""
    except OSError:
        return None
    return cause if cause in ("Ctrl-C", "SIGTERM") else None


def _job_logs(run: RunDir) -> list[Path]:
    """The files of the logging handlers that write into the run (Hydra's job log)."""
    names = [getattr(h, "baseFilename", None) for h in logging.getLogger().handlers]
    return [Path(n) for n in names if n and Path(n).parent == run.path.resolve()]


def _how_to_resume(run: RunDir) -> str:
    """What the interrupt message adds: the command that resumes the run from last.pt."""
    if not run.checkpoint("last").is_file():
        return "; no checkpoint yet: training it again starts from step 0"
    command = resume_command(run.path)
    return f"; resume with: {command}" if command else "; resumable from last.pt"


def _sizes(paths: list[Path]) -> dict[Path, int]:
    """The files among ``paths`` that exist, with their sizes (``_leave_as_it_was``)."""
    return {p: p.stat().st_size for p in paths if p.exists()}


def _is_finished(run: RunDir, trainer: Trainer) -> bool:
    """A complete run asked again for no more steps, minutes or patience than it has spent."""
    if not trainer.resumed or trainer.ended_by() is None:  # steps, minutes or patience left
        return False
    if getattr(trainer.state.rounds, "stopped", "") is None:  # self-training: rounds left
        return False
    try:
        return run.read_status().state is RunStatus.complete and run.metrics_file.is_file()
    except RunFileError:
        return False


def _leave_as_it_was(run: RunDir, lock_file: Path, was_there: dict[Path, int]) -> None:
    """A command that changes nothing in the run (refused in a fresh run, not a sweep job; or
    a finished run asked again): remove the lock file and the job logs it made, and cut the
    job logs that were there back to their size. Hydra's file handler is lazy
    (conf/hydra/job_logging/delayed.yaml: the log exists only once something is logged, e.g.
    a warning about an image) and appends, so the files are left as they were."""
    for handler in logging.getLogger().handlers:
        name = getattr(handler, "baseFilename", None)
        path = Path(name) if name else None
        if path is None or path not in set(_job_logs(run)) or not path.exists():
            continue
        if path in was_there:
            handler.flush()
            os.truncate(path, was_there[path])
        else:
            handler.close()
            path.unlink()
    if lock_file not in was_there:
        lock_file.unlink(missing_ok=True)  # still held: a racing command takes a new one


def _is_multirun() -> bool:
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def write_hydra_files(run: RunDir, cfg: DictConfig) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, as Hydra writes them
    (unresolved), each whole or not at all; only the config outside a Hydra app."""
    write_text(run.config, OmegaConf.to_yaml(cfg))
    if HydraConfig.initialized():
        hydra_cfg = HydraConfig.instance().cfg  # {"hydra": ...}
        write_text(run.config.parent / "hydra.yaml", OmegaConf.to_yaml(hydra_cfg))
        write_text(run.overrides, OmegaConf.to_yaml(hydra_cfg.hydra.overrides.task))


def _record(run: RunDir, state: RunStatus, step: int, reason: str) -> None:
    """Write the final status if the disk lets us; the error being raised says the rest."""
    try:
        run.write_status(state, step, reason)
    except UserError as err:
        log.error("could not record the status: %s", err)
