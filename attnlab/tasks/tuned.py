"""``attnlab sweep tuned``: the same tuning budget for every reader, then its winner re-run.

One command, three stages, each a real Hydra multirun of an existing task:

1. per reader, an Optuna study (``attnlab train -m hydra/sweeper=optuna``): the same number
   of trials (``tune.trials``), the same search space (the command's sweep overrides, minus
   the keys a reader lacks, said once), the same budget per trial (``tune.steps`` or
   ``train.steps``; with ``tune.minutes``, also that many minutes of wall time, whichever
   ends first), the same seeded sampler (``tune.sampler``: random search by default);
   the objective is ``train.objective`` (default ``val_exact``). Every trial is an ordinary
   run, recorded in the study's ``trials.csv`` (``attnlab.tasks.trials``);
2. per reader, its best trial's values trained again with ``tune.seeds`` new seeds and
   evaluated on the shared test strips (``attnlab sweep lengths``' task); with
   ``tune.minutes`` each re-run trains to the same minutes, one at a time (the trials' own
   launcher, ``hydra/launcher=basic``, unless the command names one): jobs side by side
   would share the CPU, and their minutes would hold fewer steps than the trials' did;
3. ``tuned.json`` at the study's root names what was run, where, and each reader's best
   trial; ``attnlab report ROOT`` reads it (``attnlab.report.tuned``).

Layout: ``ROOT/study/<reader>/<trial>/``, ``ROOT/winners/<reader>/<job>/``, ``ROOT/tuned.json``
(ROOT: ``hydra.sweep.dir``, default ``multirun/tuned/<date>/<time>``). A stage whose files
are complete is not run again, so the same command resumes a stopped study (Ctrl-C prints
it): the sampler is seeded, so the trials draw the same values, and each trial resumes from
its ``last.pt``. ``tuned.json`` is written before the first trial: a folder holding another
study's settings, or something else, is refused (``attnlab.tasks.tuned_record``). The
command line is taken apart, and what cannot be studied fairly refused, by
``attnlab.tasks.tuned_plan``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnlab.config.overrides import override_key
from attnlab.errors import UserError
from attnlab.runs.studydir import MANIFEST, STUDY, TRIALS_CSV, WINNERS
from attnlab.tasks import tuned_record
from attnlab.tasks.tuned_plan import Plan, plan
from attnlab.tasks.tuned_record import PROG


def study_args(p: Plan, reader: str) -> list[str]:
    """``attnlab train -m`` arguments of one reader's study."""
    steps = [] if p.tune.steps is None else [f"train.steps={p.tune.steps}"]
    plain = [a for a in p.plain if not (steps and override_key(a) == "train.steps")]
    return [
        "-m",
        f"model={reader}",
        *plain,
        *steps,
        *_minutes_args(p),
        *p.axes_of[reader],
        f"train.objective={p.objective}",
        "hydra/sweeper=optuna",
        f"hydra/sweeper/sampler={p.tune.sampler}",
        f"hydra.sweeper.sampler.seed={p.tune.sampler_seed}",
        f"hydra.sweeper.n_trials={p.tune.trials}",
        f"hydra.sweeper.study_name=tuned_{reader}",
        f"hydra.sweep.dir={_hydra_path(p.root / STUDY / reader)}",
    ]


def rerun_args(p: Plan, reader: str, best: dict[str, Any]) -> list[str]:
    """``attnlab sweep lengths`` arguments re-running a reader's best trial with new seeds."""
    mine = {override_key(a) for a in p.axes_of[reader]} - {"seed"}
    values = [o for o in best["overrides"] if override_key(o) in mine]
    plain = [a for a in p.plain if override_key(a) != "seed"]  # the re-runs' own seeds instead
    return [
        f"model={reader}",
        *plain,
        *_minutes_args(p),
        *_one_at_a_time(p),
        *values,
        f"seed={','.join(map(str, p.rerun_seeds))}",
        f"hydra.sweep.dir={_hydra_path(p.root / WINNERS / reader)}",
    ]


def _minutes_args(p: Plan) -> list[str]:
    """``train.minutes`` of tune.minutes (a plain ``train.minutes`` travels in ``p.plain``)."""
    return [] if p.tune.minutes is None else [f"train.minutes={p.tune.minutes:g}"]


def _one_at_a_time(p: Plan) -> list[str]:
    """The re-runs of a budget in minutes run one at a time, as the trials do (``attnlab
    sweep lengths`` would run them side by side, sharing the CPU), unless the command names
    a launcher."""
    named = any(override_key(a) == "hydra/launcher" for a in p.plain)
    return [] if p.minutes is None or named else ["hydra/launcher=basic"]


def minutes_text(p: Plan) -> str:
    """The budget of each trial in words: "30 steps", "2 minutes or 100000 steps"."""
    if p.minutes is None:
        return f"{p.trial_steps} steps"
    return f"{p.minutes:g} minutes or {p.trial_steps} steps, whichever ends first"


def _hydra_path(path: Path) -> str:
    from attnlab.runs.resume import hydra_value

    return hydra_value(path)


def _study_done(study: Path, trials: int) -> bool:
    table = study / TRIALS_CSV
    if not table.is_file():
        return False
    import pandas as pd

    return len(pd.read_csv(table)) >= trials


def _winners_done(folder: Path, seeds: int) -> bool:
    from attnlab.tasks.sweep import summarize

    if not folder.is_dir():
        return False
    done, failed = summarize(folder)
    return len(done) >= seeds and not failed


def run(args: list[str], echo: Callable[[str], Any] = print) -> Path:
    """The whole command; returns the study's root (holding ``tuned.json``)."""
    p = plan(args)
    tuned_record.check_root(p)
    echo(
        f"{PROG}: {len(p.readers)} readers x {p.tune.trials} trials of "
        f"{minutes_text(p)}, sampler {p.tune.sampler} (Optuna, seed {p.tune.sampler_seed}), "
        f"objective {p.objective}; each best trial re-run with seeds {p.rerun_seeds}"
        + ("" if p.minutes is None else f" to {p.minutes:g} minutes")
        + f"; into {p.root}"
    )
    for reader in p.readers:
        if p.dropped[reader]:
            echo(
                f"model={reader} has no {', '.join(p.dropped[reader])}: its study leaves "
                "that axis out"
            )
    if not (p.root / MANIFEST).is_file():
        tuned_record.write_manifest(p, {})  # the settings, before the first trial
    try:
        _stages(p, echo)
    except KeyboardInterrupt:
        echo(f"{PROG}: stopped (Ctrl-C); resume with: {tuned_record.resume_command(args, p.root)}")
        raise
    echo(f"next: attnlab report {p.root}")
    return p.root


def _stages(p: Plan, echo: Callable[[str], Any]) -> None:
    """The studies, tuned.json with their best trials, then the best trials' re-runs."""
    from attnlab.tasks.run import run_task
    from attnlab.tasks.sweep import main as sweep_task
    from attnlab.tasks.sweep import summarize
    from attnlab.tasks.train import main as train_task
    from attnlab.tasks.trials import best_of, gather

    best: dict[str, dict[str, Any]] = {}
    for reader in p.readers:
        study = p.root / STUDY / reader
        if _study_done(study, p.tune.trials):
            echo(f"model={reader}: study complete in {study}, not run again")
        else:
            run_task(train_task, study_args(p, reader), PROG, multirun=True)
        found = best_of(gather(study))
        if found is None:
            raise UserError(f"model={reader}: no trial of {study} finished; see its {TRIALS_CSV}")
        best[reader] = found
    tuned_record.write_manifest(p, best)
    for reader in p.readers:
        winners = p.root / WINNERS / reader
        if _winners_done(winners, p.tune.seeds):
            echo(f"model={reader}: best trial's re-runs complete in {winners}, not run again")
            continue
        run_task(sweep_task, rerun_args(p, reader, best[reader]), PROG, multirun=True)
        _, failed = summarize(winners)
        if failed:
            job, reason = failed[0]
            raise UserError(f"model={reader}: re-run {job} failed: {reason}")
