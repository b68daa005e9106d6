"""``attnlab report``: tables, plots and an HTML page from the runs and sweeps on disk."""

from __future__ import annotations

from pathlib import Path

import typer

from attnlab.cli.common import fail
from attnlab.errors import UserError

commands = typer.Typer()  # gathered into the app by attnlab.cli


@commands.command()
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
