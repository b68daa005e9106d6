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
study's settings, or something else, is refused (``attnlab.tasks.tuned_record``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from attnlab.config.overrides import override_key
from attnlab.config.tune import TuneConfig
from attnlab.errors import UserError, one_line
from attnlab.runs.studydir import MANIFEST, STUDY, TRIALS_CSV, WINNERS
from attnlab.tasks import tuned_record
from attnlab.tasks.tuned_record import PROG

DEFAULT_OBJECTIVE = "val_exact"
_ABSENT = object()


@dataclass
class Plan:
    """The command line taken apart: what each stage is given."""

    readers: list[str]
    tune: Any  # the checked ``tune`` section
    root: Path
    objective: str
    axes: list[str]  # the search space as typed ('optim.lr=interval(0.0005,0.01)')
    plain: list[str]  # every other override: both the trials and the re-runs get them
    axes_of: dict[str, list[str]] = field(default_factory=dict)  # reader -> its axes
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reader -> keys it lacks
    trial_seeds: list[int] = field(default_factory=list)
    trial_steps: int = 0  # train.steps of each trial (tune.steps, else the config's)
    minutes: float | None = None  # train.minutes of each trial and re-run (tune.minutes)

    @property
    def rerun_seeds(self) -> list[int]:
        return list(range(self.tune.first_seed, self.tune.first_seed + self.tune.seeds))


def _parse(arg: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(arg)
    except Exception as err:  # Hydra's own message, in one line
        raise UserError(f"{arg}: {str(err).splitlines()[0]}") from err


def _compose(overrides: list[str], config_name: str = "train", hydra: bool = False) -> Any:
    """``tasks.compose``, a config error as one UserError line (what and where)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from attnlab.tasks.compose import compose

    try:
        return compose(overrides, config_name, hydra)
    except (HydraException, OmegaConfBaseException) as err:
        cause = err.__cause__ or err
        raise UserError(
            f"config: {one_line(err)}: {one_line(cause)}"
            if cause is not err
            else f"config: {one_line(err)}"
        ) from err


def plan(args: list[str]) -> Plan:
    """Read the command line; refuse in one line what cannot be studied fairly."""
    args = [a for a in args if a not in ("-m", "--multirun")]  # every stage is a multirun
    tune_args = [a for a in args if override_key(a).startswith("tune.")]
    rest = [a for a in args if a not in tune_args]
    for a in rest:
        if override_key(a) in ("hydra/sweeper", "hydra/sweeper/sampler") or override_key(
            a
        ).startswith("hydra.sweeper."):
            raise UserError(f"{a}: {PROG} sets the sweeper itself (tune.sampler, tune.trials)")
    tune = _compose(tune_args, config_name="tune").tune
    TuneConfig.check(tune)
    _check_minutes(tune, rest)
    model = next((a for a in rest if override_key(a) == "model"), None)
    root_arg = next((a for a in rest if override_key(a) == "hydra.sweep.dir"), None)
    objective = next((a for a in rest if override_key(a) == "train.objective"), None)
    named = {model, root_arg, objective}
    axes = [a for a in rest if a not in named and _parse(a).is_sweep_override()]
    plain = [a for a in rest if a not in named and a not in axes]
    readers = _readers(model)
    root = Path(str(_parse(root_arg).value())) if root_arg else _default_root()
    chosen = str(_parse(objective).value()) if objective else DEFAULT_OBJECTIVE
    p = Plan(readers, tune, root, chosen, axes, plain)
    _fit_axes(p)
    _check_seeds(p)
    return p


def _check_minutes(tune: Any, rest: list[str]) -> None:
    """``tune.minutes`` is the budget of every trial and every re-run: a ``train.minutes``
    beside it would say another; and a budget in minutes is one number, not an axis."""
    named = next((a for a in rest if override_key(a) == "train.minutes"), None)
    if named is None:
        return
    if _parse(named).is_sweep_override():
        raise UserError(
            f"{named}: a budget in minutes is the same for every trial (tune.minutes=M), "
            "not a search axis"
        )
    if tune.minutes is not None:
        raise UserError(
            f"tune.minutes={tune.minutes:g} and {named}: tune.minutes is the budget of every "
            "trial and re-run; give one of them"
        )


def _readers(model: str | None) -> list[str]:
    """The readers to study: ``model=a,b`` or, without it, ``attnlab sweep lengths``' own."""
    from attnlab.models import registry

    if model is None:
        value = _compose([], config_name="sweep", hydra=True).hydra.sweeper.params.model
        names = [n.strip() for n in str(value).split(",")]
    else:
        o = _parse(model)
        names = [str(v) for v in o.sweep_iterator()] if o.is_sweep_override() else [o.value()]
    registry.check_names(names)  # an unknown reader: its one line
    if len(set(names)) < 2:
        raise UserError(f"model={','.join(names)}: {PROG} compares readers; name two or more")
    return list(dict.fromkeys(names))


def _default_root() -> Path:
    now = datetime.now()
    return Path("multirun") / "tuned" / now.strftime("%Y-%m-%d") / now.strftime("%H-%M-%S")


def _fit_axes(p: Plan) -> None:
    """Each reader's axes: those whose key its composed config has. A key one reader lacks is
    dropped for it (said by ``run``); a key no reader has is refused."""
    if not p.axes:
        raise UserError(f"{PROG}: no search axis (e.g. 'optim.lr=interval(0.0005,0.01)')")
    for reader in p.readers:
        cfg = _compose(
            [f"model={reader}", *(a for a in p.plain if not override_key(a).startswith("hydra"))]
        )
        keys = [override_key(a) for a in p.axes]
        has = [OmegaConf.select(cfg, k, default=_ABSENT) is not _ABSENT for k in keys]
        p.axes_of[reader] = [a for a, ok in zip(p.axes, has, strict=True) if ok]
        p.dropped[reader] = [k for k, ok in zip(keys, has, strict=True) if not ok]
        if not p.trial_seeds:
            p.trial_seeds = [int(cfg.seed)]
            p.trial_steps = int(p.tune.steps or cfg.train.steps)
            own = OmegaConf.select(cfg, "train.minutes", default=None)  # a plain train.minutes
            p.minutes = p.tune.minutes if p.tune.minutes is not None else own
    for axis in p.axes:
        if all(override_key(axis) in p.dropped[r] for r in p.readers):
            raise UserError(
                f"{axis}: no reader here has {override_key(axis)} ({', '.join(p.readers)}); "
                "attnlab readers lists each reader's keys"
            )
    for reader in p.readers:
        if not p.axes_of[reader]:
            raise UserError(
                f"model={reader} has none of the search axes ({', '.join(p.dropped[reader])}): "
                f"its {p.tune.trials} trials would be one configuration repeated, not an equal "
                "budget; add an axis it has (e.g. 'optim.lr=interval(0.0005,0.01)')"
            )


def _check_seeds(p: Plan) -> None:
    """The trials' seeds (``seed``, or the values of a ``seed`` axis) and the re-runs' must
    differ: a re-run with its trial's seed is that trial again, not a new measurement."""
    seed_axis = next((a for a in p.axes if override_key(a) == "seed"), None)
    if seed_axis is not None:
        o = _parse(seed_axis)
        try:
            p.trial_seeds = sorted({int(v) for v in o.sweep_iterator()})
        except Exception as err:
            raise UserError(f"{seed_axis}: search seeds with choice() or range()") from err
    clash = sorted(set(p.trial_seeds) & set(p.rerun_seeds))
    if clash:
        raise UserError(
            f"tune.first_seed={p.tune.first_seed} tune.seeds={p.tune.seeds}: the re-runs' seeds "
            f"{p.rerun_seeds} include the trials' seed(s) {clash}; choose a tune.first_seed "
            f"above {max(p.trial_seeds)}"
        )


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
