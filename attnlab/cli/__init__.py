"""The ``attnlab`` command line: thin Typer commands over Hydra tasks.

Every command that takes config forwards everything after it to a module-level
``@hydra.main`` task, so every Hydra flag works unchanged (``key=value`` overrides,
``-m``/``--multirun``, ``--cfg job``, ``hydra/launcher=...``). Mistakes a user can fix end
with one line on stderr and exit status 2.

This module is the app (its help, ``--version``, the reader plugins checked before any
command) and the ``attnlab`` script around it (``run``); the commands live beside it, by what
they work on: ``train`` (train, sweep), ``reader`` (eval, export, probe, cost, read,
readers), ``report`` and ``data``, with what they share in ``common``.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

import typer

import attnlab.shadowing  # noqa: F401  (first: one line when a folder named attnlab hides us)
from attnlab import __version__
from attnlab.cli import data, reader, report, train
from attnlab.cli.common import fail
from attnlab.errors import UserError

app = typer.Typer(
    name="attnlab",
    help="The Lab 8 digit-reader comparison: fixed-context vs attention readers.",
    epilog="First steps: 'attnlab data preview' (a PNG of the strips), 'attnlab train "
    "preset=tiny' (a run in seconds), 'attnlab sweep lengths seed=0' then 'attnlab report' "
    "(the lab's comparison; open report/index.html). COMMAND --help says more.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
# The commands in the order the help lists them: train, eval ... readers, report, data, sweep.
app.add_typer(train.commands)
app.add_typer(reader.commands)
app.add_typer(report.commands)
app.add_typer(data.data_app, name="data")
app.add_typer(train.sweep_app, name="sweep")


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
