"""``attnlab data``: synthetic digit strips previewed (a PNG grid) and exported (PNG files
plus labels.csv, or an LMDB), drawn as ``attnlab train``'s overrides would draw them.
"""

from __future__ import annotations

from pathlib import Path

import typer

from attnlab.cli.common import FORWARD, OVERRIDES, fail
from attnlab.runs.resume import hydra_value
from attnlab.tasks.run import run_task

data_app = typer.Typer(help="Synthetic digit strips: preview and export.", no_args_is_help=True)


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
