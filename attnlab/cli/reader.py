"""The commands on a trained reader (a run, a checkpoint or pretrained): ``eval``,
``probe`` and ``cost`` (Hydra tasks), ``export`` (ONNX), ``read`` (strip images), and
``readers`` (what each registered reader is and the keys it takes).
"""

from __future__ import annotations

from pathlib import Path

import typer

from attnlab.cli.common import FORWARD, OVERRIDES, fail
from attnlab.errors import UserError
from attnlab.runs.resume import hydra_value
from attnlab.tasks.run import run_task

RUN_HELP = (
    "A run directory, a checkpoint file or a packaged reader: pretrained-32, pretrained-64 "
    "(pretrained: pretrained-32)."
)

commands = typer.Typer()  # gathered into the app by attnlab.cli


@commands.command("eval", context_settings=FORWARD, options_metavar=OVERRIDES)
def eval_(
    ctx: typer.Context,
    run: str = typer.Argument(..., metavar="RUN", help=RUN_HELP),
    folder: Path = typer.Option(None, help="Evaluate on user strips (images + labels.csv)."),
    beam: int = typer.Option(None, help="Beam width (default 1: greedy)."),
    n: int = typer.Option(None, help="Strips per length (synthetic sets)."),
    onnx: Path = typer.Option(None, "--onnx", help="Read through this run's ONNX export."),
) -> None:
    """Per-length accuracy and CER (seen vs unseen) and attention maps of a trained run.

    Written to RUN/eval/<name>/; for a packaged reader (no run directory), to
    pretrained-H_eval/<name>/ in the current folder (pretrained alone: pretrained-32).

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


@commands.command("export")
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


@commands.command(context_settings=FORWARD, options_metavar=OVERRIDES)
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


@commands.command(context_settings=FORWARD, options_metavar=OVERRIDES)
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


@commands.command()
def read(
    images: list[Path] = typer.Argument(
        ..., metavar="IMAGE", help="Strip images (dark ink on light paper)."
    ),
    run: str = typer.Option(None, "--run", help=RUN_HELP),
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


@commands.command()
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
