"""Which checkpoint a RUN argument names (a run directory, a checkpoint file or a packaged
reader's word: ``pretrained``, ``pretrained-64``), that checkpoint held with its run locked
while it is used, and where results about it (eval, probe) go.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attnlab.errors import UserError
from attnlab.runs import pretrained
from attnlab.runs.rundir import RunDir


@contextmanager
def held(run_or_ckpt: Path | str, which: str, purpose: str) -> Iterator[Path]:
    """The checkpoint to work from (``resolve``), with its run directory locked meanwhile
    when it lies in one (a process reading a run must not see it change)."""
    path = resolve(run_or_ckpt, which)
    owner = RunDir(path.parent.parent)
    if path.parent != owner.checkpoints:
        yield path
        return
    with owner.lock(purpose):
        yield path


def output_root(ckpt_path: Path, kind: str) -> Path:
    """Where results of ``kind`` (eval, probe) about a checkpoint go: ``<run>/<kind>`` for a
    run's checkpoint; ``<stem>_<kind>`` beside a checkpoint outside a run directory."""
    if pretrained.is_packaged(ckpt_path):  # never inside the installed package
        return Path.cwd() / f"{ckpt_path.stem}_{kind}"
    run = RunDir(ckpt_path.parent.parent)
    if ckpt_path.parent == run.checkpoints:
        return run.path / kind
    return ckpt_path.parent / f"{ckpt_path.stem}_{kind}"


def resolve(run_or_ckpt: Path | str, which: str = "best", height: float | None = None) -> Path:
    """A run directory (-> checkpoints/<which>.pt), a checkpoint file, or a packaged reader's
    word (``attnlab.runs.pretrained``: ``pretrained`` chooses by ``height``, the height the
    strips are read at, when given)."""
    packaged = pretrained.height_named(run_or_ckpt, height)
    if packaged is not None:
        return pretrained.checkpoint_path(packaged)
    p = Path(run_or_ckpt)
    if p.is_dir():
        ckpt = RunDir(p).checkpoint(which)
        if not ckpt.is_file():
            raise UserError(f"{p}: no {ckpt.relative_to(p)} (is it a finished attnlab run?)")
        return ckpt
    if not p.exists():
        raise UserError(f"no such run directory or checkpoint: {p}")
    return p
