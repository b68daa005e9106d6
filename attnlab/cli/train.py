"""The commands that train: ``attnlab train`` (one run) and ``attnlab sweep`` (``lengths``:
readers x seeds x training-length ranges; ``tuned``: an equal tuning budget per reader), each
forwarding its words to a Hydra task.
"""

from __future__ import annotations

import sys
import time

import typer

from attnlab.cli.common import FORWARD, OVERRIDES, fail
from attnlab.errors import UserError
from attnlab.tasks.run import run_task


def _choices(group: str) -> str:
    """A config group's choices as the packaged configs name them (``conf/<group>/*.yaml``),
    read from the package so that the help text cannot drift from them."""
    from importlib.resources import files

    names = sorted(
        p.name[:-5]
        for p in files("attnlab.conf").joinpath(group).iterdir()
        if p.name.endswith(".yaml")
    )
    return f"{group}={'|'.join(names)}"


GROUPS = f"{_choices('model')}, {_choices('data')}, {_choices('preset')}"

commands = typer.Typer()  # train, a command of the app itself (attnlab.cli gathers it)
sweep_app = typer.Typer(help="Sweeps over readers, seeds and lengths.", no_args_is_help=True)


@commands.command(
    context_settings=FORWARD,
    options_metavar=OVERRIDES,
    help=f"""Train one reader
into outputs/<date>/<time>/ (hydra.run.dir=DIR: into DIR).

KEY=VALUE overrides and Hydra's flags go to Hydra (-m: a multirun; --cfg job: print the
config and stop). Config groups: {GROUPS}. 'attnlab readers' lists each reader's own
model.KEY keys, with their defaults and allowed values.

Examples: attnlab train model=fixed 'data.train_lengths=[1,8]'; attnlab train preset=gpu;
attnlab train model=transformer model.pos=rotary; attnlab train -m hydra/sweeper=optuna
train.objective=val_exact 'optim.lr=interval(1e-4,1e-2)' (an Optuna study: trials.csv in
the sweep folder names each trial's directory).""",
)
def train(ctx: typer.Context) -> None:
    from attnlab.tasks.recipe import command_with
    from attnlab.tasks.train import main as task

    args, said = command_with(list(ctx.args))  # data=folder without a reader, init_from
    if said:
        typer.echo(said)
    run_task(task, args, "attnlab train")


@sweep_app.command("lengths", context_settings=FORWARD, options_metavar=OVERRIDES)
def sweep_lengths(ctx: typer.Context) -> None:
    """Readers x seeds x training-length ranges; each job trains then evaluates.

    readers=all sweeps every registered reader (readers=a,b: those), instead of the lab's
    default fixed,attention.

    Examples: attnlab sweep lengths seed=0; attnlab sweep lengths hydra/launcher=local;
    attnlab sweep lengths hydra/launcher=slurm preset=gpu hydra.launcher.partition=gpu.
    """
    from attnlab.tasks.sweep import main as task

    started = time.time()
    args = [_readers_axis(a) if a.startswith("readers=") else a for a in ctx.args]
    refused = False  # every job refused before the first started: nothing to summarise
    try:
        run_task(task, args, "attnlab sweep lengths", multirun=True)
    except SystemExit as err:
        from attnlab.tasks.jobcheck import JobsRefused

        refused = isinstance(err.__cause__, JobsRefused)
        raise
    finally:
        if not refused:
            _report_sweeps(ctx.args, started)


@sweep_app.command("tuned", context_settings=FORWARD, options_metavar=OVERRIDES)
def sweep_tuned(ctx: typer.Context) -> None:
    """An equal tuning budget per reader: one seeded Optuna study each, then its best trial
    re-run with new seeds on the shared test strips (then: attnlab report ROOT).

    tune.trials=N (per reader), tune.seeds=K (re-runs), tune.sampler=random|tpe, tune.steps
    (a trial's train.steps); the search space as sweep overrides, e.g. attnlab sweep tuned
    'model=fixed,attention' tune.trials=12 'optim.lr=interval(0.0005,0.01)'
    'model.dec_hidden=choice(64,128,256)'. README, 'Equal tuning budgets'.
    """
    from attnlab.tasks.tuned import run

    try:
        run(ctx.args, typer.echo)
    except UserError as err:
        fail(str(err))


def _readers_axis(arg: str) -> str:
    """``readers=all`` -> ``model=<every registered reader>``; ``readers=a,b`` -> ``model=a,b``."""
    from attnlab.models import registry

    wanted = arg.split("=", 1)[1]
    try:
        names = registry.names() if wanted == "all" else [n for n in wanted.split(",") if n]
        registry.check_names(names)
    except UserError as err:
        fail(f"readers: {err}")
    return "model=" + ",".join(names)


def _report_sweeps(args: list[str], started: float) -> None:
    """After a sweep: which jobs failed and where their logs are (exit 1; Ctrl-C: 130)."""
    from attnlab.tasks.sweep import report_sweeps

    stopped = isinstance(sys.exc_info()[1], KeyboardInterrupt)
    if report_sweeps(args, started, typer.echo, stopped=stopped) and not stopped:
        raise typer.Exit(1)
