"""Training progress on a terminal: a rich progress bar, or nothing (plain log lines then)."""

from __future__ import annotations

import sys

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode


def in_multirun() -> bool:
    try:
        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:  # not under Hydra
        return False


def use_rich(mode: str) -> bool:
    if mode == "plain":
        return False
    if mode == "rich":
        return True
    return sys.stdout.isatty() and not in_multirun()


class Progress:
    """A rich progress bar on a terminal; nothing (plain log lines instead) elsewhere."""

    def __init__(self, total: int, done: int, rich: bool):
        self.rich = rich
        if not rich:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("val exact {task.fields[acc]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self.task = self.bar.add_task("train", total=total, completed=done, loss="-", acc="-")
        self.bar.start()

    def update(self, step: int, loss: float, acc: float | None, total: int | None = None) -> None:
        """The bar at ``step`` (of ``total`` where it moved: a self-training round's end)."""
        if self.rich:
            shown = "-" if acc is None else f"{100 * acc:.1f}%"
            more = {} if total is None else {"total": total}
            self.bar.update(self.task, completed=step, loss=f"{loss:.4f}", acc=shown, **more)

    def close(self) -> None:
        if self.rich:
            self.bar.stop()
