"""The one atomic writer: every file attnlab writes is written whole or not at all.

A file is written to a temporary name in its own folder, flushed to disk, given the mode
the process umask gives an ordinary new file (0644 under the usual 022; ``mkstemp`` alone
would leave 0600, unreadable to colleagues on a shared cluster), then renamed into place.
Text, JSON, CSV, PNG and checkpoints all go through ``atomic_write``.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnlab.errors import UserError

TMP_SUFFIX = ".tmp"
# A folder being written: .<name>.partial beside its final name, renamed when complete.
PARTIAL = ".partial"


class WriteError(UserError):
    """A file that cannot be written (a full disk, no permission, a folder in the way)."""


def file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path | str, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)``, then move the result onto ``path`` in one rename.

    An OS error (full disk, no permission, a folder where the file should go) becomes one
    ``WriteError`` line naming the path; the file that was there before is left untouched.
    """
    path = Path(path)
    if path.is_dir():
        raise WriteError(f"cannot write {path}: it is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    except OSError as err:
        raise WriteError(f"cannot write {path}: {os_reason(err, path)}") from err
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:  # the bytes are on disk before the name points at them
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise WriteError(f"cannot write {path}: {os_reason(err, path)}") from err
    except RuntimeError as err:  # torch.save reports a failed write as a RuntimeError
        tmp.unlink(missing_ok=True)
        if not any(k in str(err).lower() for k in ("writ", "inline_container", "unexpected pos")):
            raise
        raise WriteError(f"cannot write {path}: {str(err).splitlines()[0]}") from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# Errors that say the disk (or this process's share of it) is full, in words.
FULL = {
    errno.ENOSPC: "no space left",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for this process's file-size limit (ulimit -f)",
}


def os_reason(err: OSError, path: Path) -> str:
    """An OS error in words; a full disk names the disk (its mount point) and what is free."""
    if err.errno not in FULL:
        return err.strerror or str(err)
    disk = next(p for p in [path.absolute(), *path.absolute().parents] if os.path.ismount(p))
    return f"{FULL[err.errno]} on the disk at {disk} ({free_space(disk)} free)"


def free_space(folder: Path) -> str:
    """The free space of the disk holding ``folder``, in words ("512 bytes", "3.4 MB")."""
    import shutil

    size = float(shutil.disk_usage(folder).free)
    units = ["bytes", "KB", "MB", "GB", "TB"]
    while size >= 1024 and len(units) > 1:
        size /= 1024
        units.pop(0)
    return f"{size:.0f} bytes" if units[0] == "bytes" else f"{size:.1f} {units[0]}"


def write_bytes(path: Path | str, data: bytes) -> Path:
    return atomic_write(path, lambda p: p.write_bytes(data))


def write_text(path: Path | str, text: str) -> Path:
    return atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def csv_text(frame: Any) -> str:
    """A DataFrame as CSV with every text value quoted (numbers and booleans bare), so that a
    reader that honours quotes keeps "0026" as text; attnlab's own readers also read text
    columns with ``dtype=str`` (pandas infers types through quotes). Booleans are quoted
    too: a quote-honouring reader would take a bare ``False`` for a number."""
    flags = {c: frame[c].map(str) for c in frame.columns if frame[c].dtype == bool}
    return frame.assign(**flags).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def csv_rows(header: list[str], rows: list[list[str]]) -> str:
    """A CSV of text rows (labels.csv), quoted only where a value needs it: an exchange
    format that other tools, and a shell's ``tr ',' '\\t'``, read as plain ``name,label``
    lines; labels stay text for attnlab's own reader (the csv module)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def write_json(path: Path | str, data: Any) -> Path:
    return write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_figure(path: Path | str, fig: Any, dpi: int = 100, **savefig: Any) -> Path:
    """A matplotlib ``Figure`` (object API, no pyplot) as a PNG file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    return atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=dpi, **savefig))


def remove_orphans(folder: Path | str) -> list[Path]:
    """Delete temporary files a killed writer left in ``folder``; returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    gone = []
    for p in folder.glob(f".*{TMP_SUFFIX}"):
        p.unlink(missing_ok=True)
        gone.append(p)
    return gone


def atomic_dir(final: Path | str, write: Callable[[Path], None]) -> Path:
    """A folder written whole or not at all: ``write(folder)`` fills ``.<name>.partial``
    beside ``final``, which then replaces ``final`` (an earlier one is replaced whole).
    Partial folders a killed writer left are removed first (callers hold the run's lock)."""
    import shutil

    final = Path(final)
    work = final.parent / f".{final.name}{PARTIAL}"
    for orphan in final.parent.glob(f".*{PARTIAL}"):
        shutil.rmtree(orphan, ignore_errors=True)
    try:
        work.mkdir(parents=True)
        write(work)
    except OSError as err:
        shutil.rmtree(work, ignore_errors=True)
        raise WriteError(f"cannot write {final}: {err.strerror or err}") from err
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    work.rename(final)
    return final


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
