"""The ``attnlab`` command line: thin Typer commands over Hydra tasks.

Every command that takes config forwards everything after it to a module-level
``@hydra.main`` task, so every Hydra flag works unchanged (``key=value`` overrides,
``-m``/``--multirun``, ``--cfg job``, ``hydra/launcher=...``). Mistakes a user can fix end
with one line on stderr and exit status 2.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import typer

from attnlab import __version__
from attnlab.errors import UserError, one_line
from attnlab.runs.resume import hydra_value

FORWARD = {"allow_extra_args": True, "ignore_unknown_options": True}

app = typer.Typer(
    name="attnlab",
    help="The Lab 8 digit-reader comparison: fixed-context vs attention readers.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
data_app = typer.Typer(help="Synthetic digit strips: preview and export.", no_args_is_help=True)
sweep_app = typer.Typer(help="Sweeps over readers, seeds and lengths.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(sweep_app, name="sweep")


def fail(message: str) -> None:
    typer.echo(f"attnlab: error: {message}", err=True)
    raise typer.Exit(2)


def _one_line(err: BaseException) -> str:
    """Hydra and OmegaConf errors as one line: each message of the chain of causes, then the
    key it concerns (``errors.one_line``), each said once."""
    parts = [one_line(err)]
    seen = {parts[0].split(" (key: ")[0]}
    cause = err.__cause__ or err.__context__
    while cause is not None:
        text = str(cause).strip()
        if text and "$VALUE" not in text:  # OmegaConf's unfilled message template
            line = one_line(cause)
            if line.split(" (key: ")[0] not in seen:
                parts.append(line)
                seen.add(line.split(" (key: ")[0])
        cause = cause.__cause__
    return ": ".join(parts)


class _Once(logging.Filter):
    """Let the first record holding ``text`` through, drop the later ones."""

    def __init__(self, text: str):
        super().__init__()
        self.text, self.seen = text, False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.text not in record.getMessage():
            return True
        shown, self.seen = not self.seen, True
        return shown


def _say_once(logger: logging.Logger, text: str) -> None:
    """Without SLURM accounting, submitit warns at every poll; once says it."""
    if not any(isinstance(f, _Once) and f.text == text for f in logger.filters):
        logger.addFilter(_Once(text))


def _choice_of(args: list[str], group: str = "hydra/launcher") -> str | None:
    for a in args:
        if a.startswith(f"{group}="):
            return a.split("=", 1)[1]
    return None


def run_task(
    task: Callable[[], object], args: list[str], prog: str, multirun: bool = False
) -> None:
    """Run a Hydra task with ``args`` as its command line; user errors become exit 2."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    launcher = _choice_of(args)
    wants_multirun = multirun or "-m" in args or "--multirun" in args
    if launcher not in (None, "basic") and not wants_multirun:
        fail(
            f"hydra/launcher={launcher} only applies to multiruns: add -m (or use "
            f"'attnlab sweep lengths')"
        )
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises; this function reports
    _say_once(logging.getLogger("submitit"), "Bypassing sacct error")
    saved, saved_err = sys.argv, sys.stderr
    sys.argv = [prog, *args]  # a sweep's config sets hydra.mode=MULTIRUN itself
    if not wants_multirun and not prog.startswith("attnlab sweep"):
        sys.stderr = _WithoutHydraJobLine(saved_err)  # the line below says what failed
    logging.captureWarnings(True)  # library warnings go to the task's log, not stderr
    try:
        task()
    except UserError as err:
        fail(str(err))
    except (HydraException, OmegaConfBaseException) as err:
        fail(f"config: {_one_line(err)}")
    except Exception as err:
        from attnlab.tasks.sweepers import raised_in_sweeper

        if raised_in_sweeper(err):  # a study that ended without a result
            fail(
                f"hydra/sweeper={_choice_of(args, 'hydra/sweeper')} stopped the study: "
                f"{_one_line(err)} (the 'Failed experiment' lines above say which trials "
                "failed, and why)"
            )
        if not isinstance(err, ValueError):
            raise
        if _raised_in_attnlab(err):  # a value no check caught: still one line, with where
            if os.environ.get("ATTNLAB_DEBUG"):
                raise
            fail(f"{_one_line(err)} ({_where(err)}; ATTNLAB_DEBUG=1 shows the traceback)")
        # Hydra rejects some overrides with a bare ValueError that does not name them.
        fail(f"config: {_one_line(err)} (overrides: {' '.join(args)})")
    finally:
        sys.argv, sys.stderr = saved, saved_err
        logging.captureWarnings(False)


class _WithoutHydraJobLine:
    """stderr without Hydra's "Error executing job with overrides: [...]" line, which it
    writes before re-raising a task's error; ``run_task`` then says what failed in one."""

    PREFIX = "Error executing job with overrides:"

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return len(text) if text.startswith(self.PREFIX) else self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _where(err: BaseException) -> str:
    """The innermost attnlab frame of a traceback, as ``module.py:line``."""
    import traceback

    here = Path(__file__).parent
    frames = [f for f in traceback.extract_tb(err.__traceback__) if _inside(f.filename, here)]
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "attnlab"


def _inside(filename: str, here: Path) -> bool:
    return Path(filename).is_relative_to(here) and Path(filename).name != "cli.py"


def _raised_in_attnlab(err: BaseException) -> bool:
    """Whether an exception comes from inside a task (a bug) rather than from composition."""
    import traceback

    here = Path(__file__).parent
    return any(_inside(frame.filename, here) for frame in traceback.extract_tb(err.__traceback__))


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


@app.command(context_settings=FORWARD)
def train(ctx: typer.Context) -> None:
    """Train one reader: attnlab train [model=READER] [key=value ...] [-m].

    READER is any registered reader (attnlab readers lists them). Examples:
    attnlab train model=fixed 'data.train_lengths=[1,8]'; attnlab train preset=gpu;
    attnlab train --cfg job (print the config).
    """
    from attnlab.tasks.train import main as task

    run_task(task, ctx.args, "attnlab train")


@sweep_app.command("lengths", context_settings=FORWARD)
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
    try:
        run_task(task, args, "attnlab sweep lengths", multirun=True)
    finally:
        _report_sweeps(ctx.args, started)


def _readers_axis(arg: str) -> str:
    """``readers=all`` -> ``model=<every registered reader>``; ``readers=a,b`` -> ``model=a,b``."""
    from attnlab.models import registry

    wanted = arg.split("=", 1)[1]
    try:
        names = registry.names() if wanted == "all" else [n for n in wanted.split(",") if n]
        for name in names:
            registry.get(name)
    except UserError as err:
        fail(f"readers: {err}")
    return "model=" + ",".join(names)


def _report_sweeps(args: list[str], started: float) -> None:
    """After a sweep: which jobs failed and where their logs are (exit 1 if any)."""
    from attnlab.tasks.sweep import report_sweeps

    if report_sweeps(args, started, typer.echo):
        raise typer.Exit(1)


@app.command("eval", context_settings=FORWARD)
def eval_(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="A run directory or a checkpoint file."),
    folder: Path = typer.Option(None, help="Evaluate on user strips (images + labels.csv)."),
    beam: int = typer.Option(None, help="Beam width (default 1: greedy)."),
    n: int = typer.Option(None, help="Strips per length (synthetic sets)."),
    onnx: Path = typer.Option(None, "--onnx", help="Read through this run's ONNX export."),
) -> None:
    """Per-length accuracy and CER (seen vs unseen) and attention maps of a trained run.

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
    run: str = typer.Argument(..., help="A run directory or a checkpoint file."),
    out: Path = typer.Argument(..., help="The folder to write the export into."),
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


@app.command(context_settings=FORWARD)
def probe(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="A run directory or a checkpoint file."),
) -> None:
    """Does the attended glyph cause the reading? Occlusion, glyph swap and saliency probes.

    Writes CSV tables and figures under RUN/probe/<name>/. Extra key=value overrides go to
    the probe config, e.g. probe.n=30 'probe.lengths=[4,12]'.
    """
    from attnlab.tasks.probe import main as task

    run_task(task, [f"run={hydra_value(run)}", *ctx.args], "attnlab probe")


@app.command()
def read(
    images: list[Path] = typer.Argument(..., help="Strip images (dark ink on light paper)."),
    run: str = typer.Option(None, "--run", help="A run directory or a checkpoint file."),
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
def readers() -> None:
    """The registered readers (model=NAME), with a line on each."""
    from attnlab.models import registry

    try:
        names = registry.names()
    except UserError as err:
        fail(str(err))
    width = max(len(n) for n in names)
    for name in names:
        typer.echo(f"{name:<{width}}  {registry.get(name).description}")


@app.command()
def report(
    paths: list[Path] = typer.Argument(
        None, help="Runs or sweep folders (default: outputs/ and multirun/)."
    ),
    out: Path = typer.Option(Path("report"), "--out", help="Where to write the report."),
    compare: tuple[str, str] | None = typer.Option(
        None,
        "--compare",
        help="Compare two variants A B (labels as in summary.md, or a reader with one "
        "variant): paired differences A - B. Default: every reader against the baseline.",
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
        index = build_report(list(paths), out, chosen, warn)
    except (ReportError, UserError) as err:
        fail(str(err))
    typer.echo(f"report written: {index}")


@data_app.command("preview", context_settings=FORWARD)
def data_preview(ctx: typer.Context) -> None:
    """A PNG grid of sample strips with their labels (preview.out=PATH, preview.n=N)."""
    from attnlab.tasks.strips import preview as task

    run_task(task, ctx.args, "attnlab data preview")


@data_app.command("export", context_settings=FORWARD)
def data_export(
    ctx: typer.Context,
    out: Path = typer.Argument(..., help="Folder to write PNG strips and labels.csv into."),
    n: int = typer.Option(100, "--n", help="Number of strips."),
    lengths: str = typer.Option("1-8", "--lengths", help="Length range LOW-HIGH, e.g. 3-6."),
    seed: int = typer.Option(0, "--seed", help="Seed of the strips."),
    fmt: str = typer.Option("folder", "--format", help="folder (PNGs + labels.csv) or lmdb."),
    force: bool = typer.Option(False, "--force", help="Replace files of an earlier export."),
) -> None:
    """Write synthetic strips as PNG files plus labels.csv (filename,label), or an LMDB."""
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


if __name__ == "__main__":
    app()
