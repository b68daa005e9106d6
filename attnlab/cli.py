"""The ``attnlab`` command line: thin Typer commands over Hydra tasks.

Every command that takes config forwards everything after it to a module-level
``@hydra.main`` task, so every Hydra flag works unchanged (``key=value`` overrides,
``-m``/``--multirun``, ``--cfg job``, ``hydra/launcher=...``). Mistakes a user can fix end
with one line on stderr and exit status 2.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from pathlib import Path
from typing import NoReturn

import typer

import attnlab.shadowing  # noqa: F401  (first: one line when a folder named attnlab hides us)
from attnlab import __version__
from attnlab.errors import UserError, exit_with
from attnlab.runs.resume import hydra_value
from attnlab.tasks.run import run_task

FORWARD = {"allow_extra_args": True, "ignore_unknown_options": True}
OVERRIDES = "[OPTIONS] [KEY=VALUE]..."  # the usage line of a command that forwards to Hydra
RUN_HELP = "A run directory, a checkpoint file or pretrained (the packaged reader)."


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

app = typer.Typer(
    name="attnlab",
    help="The Lab 8 digit-reader comparison: fixed-context vs attention readers.",
    epilog="First steps: 'attnlab data preview' (a PNG of the strips), 'attnlab train "
    "preset=tiny' (a run in seconds), 'attnlab sweep lengths seed=0' then 'attnlab report' "
    "(the lab's comparison; open report/index.html). COMMAND --help says more.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
data_app = typer.Typer(help="Synthetic digit strips: preview and export.", no_args_is_help=True)
sweep_app = typer.Typer(help="Sweeps over readers, seeds and lengths.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(sweep_app, name="sweep")


def fail(message: str) -> NoReturn:
    exit_with(UserError(message))


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"attnlab {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """The Lab 8 digit-reader comparison: fixed-context vs attention readers."""
    # registry.PLUGINS_ENV, spelt here so that commands without readers import no torch
    if os.environ.get("ATTNLAB_READERS"):  # a broken plugin: one line, before any command
        from attnlab.models import registry

        try:
            registry.discover()
        except UserError as err:
            fail(str(err))


@app.command(
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


@app.command("eval", context_settings=FORWARD, options_metavar=OVERRIDES)
def eval_(
    ctx: typer.Context,
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    folder: Path = typer.Option(None, help="Evaluate on user strips (images + labels.csv)."),
    beam: int = typer.Option(None, help="Beam width (default 1: greedy)."),
    n: int = typer.Option(None, help="Strips per length (synthetic sets)."),
    onnx: Path = typer.Option(None, "--onnx", help="Read through this run's ONNX export."),
) -> None:
    """Per-length accuracy and CER (seen vs unseen) and attention maps of a trained run.

    Written to RUN/eval/<name>/; for pretrained (no run directory), to
    pretrained_eval/<name>/ in the current folder.

    Extra key=value overrides go to the eval config, e.g. 'eval.lengths=[1,20]' eval.maps_k=5
    checkpoint=last.
    """
    from attnlab.tasks.evaluate import main as task

    extra = [f"run={hydra_value(run)}"]
    if folder is not None:
        extra.append(f"eval.folder={hydra_value(folder)}")
    if beam is not None:
        extra.append(f"eval.beam={beam}")
    if n is not None:
        extra.append(f"eval.n={n}")
    if onnx is not None:
        extra.append(f"onnx={hydra_value(onnx)}")
    run_task(task, [*extra, *ctx.args], "attnlab eval")


@app.command("export")
def export(
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    out: Path = typer.Argument(..., metavar="OUT", help="The folder to write the export into."),
    fmt: str = typer.Option("onnx", "--format", help="onnx (the only format)."),
    which: str = typer.Option("best", "--which", help="best or last, when RUN is a directory."),
    atol: float = typer.Option(1e-4, "--atol", help="Largest logit difference the check allows."),
) -> None:
    """The reader as ONNX graphs plus a JSON sidecar, written only if torch and the NumPy
    reference loop read the same fixed strips alike (figures: OUT/parity.json)."""
    from attnlab.export.exporter import export_run

    try:
        export_run(run, out, fmt, which, atol, typer.echo)
    except UserError as err:
        fail(str(err))


@app.command(context_settings=FORWARD, options_metavar=OVERRIDES)
def probe(
    ctx: typer.Context,
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
) -> None:
    """Does the attended glyph cause the reading? Occlusion, glyph swap and saliency probes.

    Writes CSV tables and figures under RUN/probe/<name>/. Extra key=value overrides go to
    the probe config, e.g. probe.n=30 'probe.lengths=[4,12]'.
    """
    from attnlab.tasks.probe import main as task

    run_task(task, [f"run={hydra_value(run)}", *ctx.args], "attnlab probe")


@app.command(context_settings=FORWARD, options_metavar=OVERRIDES)
def cost(ctx: typer.Context) -> None:
    """What a reader costs by strip length: parameters, FLOPs, time and memory.

    attnlab cost [RUN] [KEY=VALUE]...: a run's reader (RUN) or the reader of model=NAME
    (cost.readers=[a,b]: several); 'cost.lengths=[1,2,4,8,16,32]'. Writes cost.csv, growth.csv,
    footprint.csv, cost.md and plots into cost/ (RUN/cost/; cost.out=DIR).
    """
    from attnlab.tasks.cost import main as task

    args = list(ctx.args)
    if args and "=" not in args[0] and not args[0].startswith("-"):
        args[0] = f"run={hydra_value(args[0])}"
    run_task(task, args, "attnlab cost")


@app.command()
def read(
    images: list[Path] = typer.Argument(
        ..., metavar="IMAGE", help="Strip images (dark ink on light paper)."
    ),
    run: str = typer.Option(
        None, "--run", help="A run directory, a checkpoint file or pretrained."
    ),
    onnx: Path = typer.Option(None, "--onnx", help="An export (attnlab export) instead of --run."),
    attention: Path = typer.Option(None, "--attention", help="Write attention maps here."),
    beam: int = typer.Option(1, help="Beam width (1 = greedy)."),
    checkpoint: str = typer.Option("best", help="best or last, when --run is a directory."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    crop: bool = typer.Option(
        True, help="Place each image's ink as the generator does (margins, height) first."
    ),
) -> None:
    """Read strip images with a trained reader (or an export): file, reading, confidence."""
    from attnlab.tasks.read import read_files

    try:
        bad = read_files(images, run, attention, beam, checkpoint, device, typer.echo, crop, onnx)
    except UserError as err:
        fail(str(err))
    if bad:
        raise typer.Exit(2)


@app.command()
def readers(
    name: str = typer.Argument(
        None, metavar="NAME", help="One reader: its keys only (default: every reader)."
    ),
) -> None:
    """The registered readers (model=NAME): a line on each, then its own config keys
    (model.KEY=default, allowed values, what it does), then the keys every reader shares."""
    from attnlab.tasks.readers import list_readers

    try:
        list_readers(name, typer.echo)
    except UserError as err:
        fail(str(err))


@app.command()
def report(
    paths: list[Path] = typer.Argument(
        None, metavar="PATHS", help="Runs or sweep folders (default: outputs/ and multirun/)."
    ),
    out: Path = typer.Option(Path("report"), "--out", help="Where to write the report."),
    compare: tuple[str, str] | None = typer.Option(
        None,
        "--compare",
        help="Compare two variants A B, each named as the report or the sweep prints it, "
        "or by a short form naming one variant (a reader, key=value, or both, e.g. "
        "model.hidden=64): paired differences A - B. Default: every reader against the "
        "baseline, and the variants of one reader with each other.",
    ),
) -> None:
    """Tables, plots and an HTML page from runs on disk."""
    from attnlab.report import ReportError, build_report

    if not paths:
        paths = [p for p in (Path("outputs"), Path("multirun")) if p.exists()]
        if not paths:
            fail("no outputs/ or multirun/ here; name the run or sweep folders to report on")
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: exists and is not a folder")
    try:
        chosen = None if not compare or None in compare else (compare[0], compare[1])
        warn = lambda line: typer.echo(f"attnlab: warning: {line}", err=True)  # noqa: E731
        index = build_report(list(paths), out, chosen, warn, say=typer.echo)
    except (ReportError, UserError) as err:
        fail(str(err))
    typer.echo(f"report written: {index}")


@data_app.command("preview", context_settings=FORWARD, options_metavar=OVERRIDES)
def data_preview(ctx: typer.Context) -> None:
    """A PNG grid of sample strips with their labels (preview.out=PATH, preview.n=N).

    Takes the overrides of attnlab train (preset=tiny, data=clean, 'data.train_lengths=[1,4]'):
    the strips shown are those that training would draw.
    """
    from attnlab.tasks.strips import preview as task

    run_task(task, ctx.args, "attnlab data preview")


@data_app.command("export", context_settings=FORWARD, options_metavar=OVERRIDES)
def data_export(
    ctx: typer.Context,
    out: Path = typer.Argument(
        ..., metavar="OUT", help="Folder to write PNG strips and labels.csv into."
    ),
    n: int = typer.Option(100, "--n", help="Number of strips."),
    lengths: str = typer.Option("1-8", "--lengths", help="Length range LOW-HIGH, e.g. 3-6."),
    seed: int = typer.Option(0, "--seed", help="Seed of the strips."),
    fmt: str = typer.Option("folder", "--format", help="folder (PNGs + labels.csv) or lmdb."),
    force: bool = typer.Option(False, "--force", help="Replace files of an earlier export."),
) -> None:
    """Write synthetic strips as PNG files plus labels.csv (filename,label), or an LMDB.

    Takes the overrides of attnlab train too (data=clean, preset=tiny, data.* keys).
    """
    from attnlab.tasks.strips import export as task

    lo, sep, hi = lengths.partition("-")
    if not (lo.strip().isdigit() and (not sep or hi.strip().isdigit())):
        fail(f"--lengths: expected LOW-HIGH such as 3-6, got {lengths!r}")
    pair = f"[{lo},{hi if sep else lo}]"
    overrides = [
        f"export.out={hydra_value(out)}",
        f"export.n={n}",
        f"export.lengths={pair}",
        f"export.seed={seed}",
        f"export.format={hydra_value(fmt)}",
        *(["export.force=true"] if force else []),
    ]
    run_task(task, [*overrides, *ctx.args], "attnlab data export")


def run() -> None:
    """The ``attnlab`` script: the app, then a quick exit: a local sweep's idle workers ended,
    what is left frozen (``gc.freeze``) so that the exit skips its last collections over
    torch's objects (~1 s a command: scripts/README.md, "Other measured figures"). Exit
    handlers still run; every file a command writes is closed before it returns."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started by `&`: Ctrl-C stops it too
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app()
    finally:
        launcher = sys.modules.get("hydra_plugins.attnlab_parallel.launcher")
        if launcher is not None:
            launcher.end_idle_workers()
        gc.freeze()


if __name__ == "__main__":
    run()
