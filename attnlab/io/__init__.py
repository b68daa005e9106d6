"""The one atomic writer: every file attnlab writes is written whole or not at all.

A file is written to a temporary name in its own folder, created the way ``open(path, "w")``
creates a file (mode 0o666 under the process umask: 0644 under the usual 022, never
``mkstemp``'s 0600, unreadable to colleagues on a shared cluster; the umask is never
changed, not even for a moment, so other threads' files keep theirs), flushed to disk,
renamed into place, and the rename made durable by flushing the folder.
Text, JSON, CSV, PNG and checkpoints all go through ``atomic_write``; a whole folder goes
through ``attnlab.io.folders.atomic_dir``, built on the steps here (``fsync_dir``,
``crash_point``, ``WriteError``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnlab.errors import UserError
from attnlab.io.csv_format import csv_rows, csv_text  # noqa: F401  (written through here)
from attnlab.io.disk_errors import FULL, free_space, os_reason  # noqa: F401

TMP_SUFFIX = ".tmp"
# Crash tests: a writer whose environment names one of its steps here kills itself
# (SIGKILL) at that step ("file:written", "dir:written", "dir:exchanged", "dir:aside", ...).
CRASH_AT = "ATTNLAB_IO_CRASH_AT"
# Concurrency tests: a writer whose environment names one of those steps here stops itself
# there (SIGSTOP) until it is continued (SIGCONT), holding what it holds at that step.
STOP_AT = "ATTNLAB_IO_STOP_AT"


class WriteError(UserError):
    """A file that cannot be written (a full disk, no permission, a folder in the way)."""


def current_umask() -> int:
    """The process umask, read without setting it (``os.umask`` can only set it: setting it
    to read it would give another thread's new file the wrong mode for that moment)."""
    try:  # Linux 4.7+
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    import tempfile  # elsewhere: the mode a new file is given, seen on a probe file

    folder = tempfile.mkdtemp(prefix=".attnlab-umask-")
    try:
        fd = os.open(os.path.join(folder, "probe"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777)
        try:
            return 0o777 & ~os.fstat(fd).st_mode
        finally:
            os.close(fd)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file under the current umask."""
    return 0o666 & ~current_umask()


def crash_point(step: str) -> None:
    """A named step of a write; the crash tests kill the writer here (``CRASH_AT``), the
    concurrency tests stop it here (``STOP_AT``)."""
    if os.environ.get(CRASH_AT) == step:
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
    if os.environ.get(STOP_AT) == step and hasattr(signal, "SIGSTOP"):
        os.kill(os.getpid(), signal.SIGSTOP)


def fsync_dir(folder: Path | str) -> None:
    """Make the renames in ``folder`` durable by flushing the folder itself (POSIX); a
    no-op where a folder cannot be opened or flushed (Windows, some network filesystems)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EISDIR, errno.EPERM):
            return
        raise
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _new_tmp(path: Path) -> Path:
    """A new empty file ``.<name>.<random>.tmp`` beside ``path``, created with 0o666 under
    the process umask (the mode ``open(path, "w")`` gives), never an existing one."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
        try:
            os.close(os.open(tmp, flags, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))


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
        tmp = _new_tmp(path)
    except OSError as err:
        raise WriteError(f"cannot write {path}: {os_reason(err, path)}") from err
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:  # the bytes are on disk before the name points at them
            os.fsync(fh.fileno())
        crash_point("file:written")
        os.replace(tmp, path)
        crash_point("file:renamed")
        fsync_dir(path.parent)  # and the name is on disk too
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


def write_bytes(path: Path | str, data: bytes) -> Path:
    return atomic_write(path, lambda p: p.write_bytes(data))


def write_text(path: Path | str, text: str) -> Path:
    return atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


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


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
