"""A report folder replaced whole: at every instant the earlier report or the new one is whole.

The report is built in a hidden folder ``.<name>.<random>.building`` beside its place, made
the way ``mkdir`` makes a folder (0o777 under the process umask, which is never set, not even
for a moment to read it) and locked (``flock``) while it is written. Files of the earlier
report that are not the report's (a note someone keeps there) are linked, or copied where the
filesystem cannot link, into the new one; then the two are swapped by attnlab.io.folders'
swap (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere the earlier report is renamed aside to
``.<name>.aside`` first). The writer kills itself at the named steps of ``attnlab.io.CRASH_AT``
("dir:written", "dir:exchanged", "dir:aside", "dir:placed", "dir:discarding"; the crash tests).

The next report into the same place settles what a killed writer left there first: a report
set aside without its replacement goes back (it is the only whole copy), hidden folders of
this name that no live writer holds are removed. Other names beside it, another report's or
another tool's, are left alone; and the building folder's suffix is not attnlab.io.folders'
``.partial``, whose sweep (``settle_dirs``) would remove it under a live writer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from attnlab.io import WriteError, crash_point, folders, fsync_dir, os_reason
from attnlab.io.folders import ASIDE, PARTIAL

BUILDING = ".building"
# What report builders before this one set aside while swapping (``.<name>.old.partial``):
# the only whole copy when nothing is at ``<name>``, so it is put back like an aside folder.
OLD_ASIDE = ".old" + PARTIAL


def report_place(out_dir: Path) -> Path:
    """Where the report at ``out_dir`` goes, settled (see the module docstring): ``out_dir``,
    or the folder a symlink ``out_dir`` points at (the link is kept, the report replaced at
    its target). Something at ``out_dir`` that is not a folder is a WriteError."""
    final = Path(os.path.realpath(out_dir)) if out_dir.is_symlink() else out_dir
    if os.path.lexists(final) and not final.is_dir():
        raise WriteError(f"cannot write {out_dir}: it is not a folder")
    try:
        settle(final)
    except OSError as err:
        raise WriteError(f"cannot write {out_dir}: {os_reason(err, final)}") from err
    return final


def settle(final: Path) -> list[Path]:
    """Put back the earlier report a killed writer set aside when nothing reached ``final``
    (else remove it), and remove the hidden folders of ``final``'s name that no live writer
    holds; returns the folders put back."""
    parent = final.parent
    if not parent.is_dir():
        return []
    back = []
    for aside in (parent / f".{final.name}{ASIDE}", parent / f".{final.name}{OLD_ASIDE}"):
        if aside.is_dir() and not aside.is_symlink() and not os.path.lexists(final):
            aside.rename(final)
            back.append(final)
    if back:
        fsync_dir(parent)
    if (parent / f".{final.name}{ASIDE}").is_dir() and final.is_dir():
        folders._discard(parent / f".{final.name}{ASIDE}")  # its replacement is in place
    names = {f".{final.name}{ASIDE}{PARTIAL}", f".{final.name}{OLD_ASIDE}"}  # being removed
    left = re.compile(  # unfinished: ours, or (mkdtemp's names) those of earlier builders
        re.escape(f".{final.name}.")
        + f"([0-9a-f]{{16}}{re.escape(BUILDING)}|[a-z0-9_]{{8}}{re.escape(PARTIAL)})"
    )
    for folder in sorted(p for p in parent.iterdir() if p.name in names or left.fullmatch(p.name)):
        with contextlib.suppress(OSError):
            _remove_unheld(folder)
    return back


def _remove_unheld(folder: Path) -> None:
    """Remove ``folder`` unless a live writer holds it (or the filesystem cannot say)."""
    if folder.is_symlink() or not folder.is_dir():
        return
    try:
        fd = _lock(folder)
    except BlockingIOError:
        return  # a live writer's
    if fd is None:
        return
    try:
        shutil.rmtree(folder)
    finally:
        os.close(fd)


def _lock(folder: Path) -> int | None:
    """A descriptor of ``folder`` holding an exclusive advisory lock on it (``flock``, dropped
    by the kernel when the holder dies); None where the filesystem cannot lock. Raises
    BlockingIOError where another process holds it, OSError where it cannot be opened."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return None
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            raise BlockingIOError(err.errno, "held by another process", str(folder)) from err
        return None
    return fd


class Building:
    """A hidden folder beside ``final`` that a report is built in (``with Building(final) as
    b:``, then ``b.folder``), locked while it is written and removed at the end unless it
    was swapped in (``b.swap_in``)."""

    def __init__(self, final: Path, shown: Path | None = None):
        self.final = final
        self.shown = shown or final  # the place as the user named it, for messages
        self.folder = Path()  # made by __enter__
        self._fd: int | None = None

    def __enter__(self) -> Building:
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.folder, self._fd = _new_folder(self.final)
        except OSError as err:
            raise WriteError(f"cannot write {self.shown}: {os_reason(err, self.final)}") from err
        return self

    def __exit__(self, *exc: object) -> None:
        if self.folder.name.endswith(BUILDING):  # gone when swapped in; else unfinished
            shutil.rmtree(self.folder, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def swap_in(self, is_report_file: Callable[[str], bool]) -> bool:
        """Put the finished report in place of ``final``, with the files of the earlier one
        that are not the report's (``is_report_file`` says which are); True when an earlier
        report was replaced. An OS error is a WriteError; the earlier report stays whole."""
        try:
            if self._fd is not None and not _same(self._fd, self.folder):
                raise OSError(errno.ENOENT, "removed by another process while it was written")
            replaced = self.final.is_dir()
            if replaced:
                keep_files(self.final, self.folder, is_report_file)
            crash_point("dir:written")
            folders._swap_in(self.folder, self.final)
        except OSError as err:
            raise WriteError(f"cannot write {self.shown}: {os_reason(err, self.final)}") from err
        return replaced


def _new_folder(final: Path) -> tuple[Path, int | None]:
    """A new empty folder ``.<name>.<random>.building`` beside ``final`` and the descriptor
    that holds its lock (None where the filesystem cannot lock)."""
    for _ in range(100):
        folder = final.parent / f".{final.name}.{secrets.token_hex(8)}{BUILDING}"
        try:
            folder.mkdir()  # 0o777 under the umask, as a new folder is made
            fd = _lock(folder)
        except (FileExistsError, FileNotFoundError, BlockingIOError):
            continue  # taken, or removed meanwhile by a settle that found it unlocked
        if fd is None or _same(fd, folder):
            return folder, fd
        os.close(fd)
    raise FileExistsError(errno.EEXIST, "no free name to build in", str(final.parent))


def _same(fd: int, folder: Path) -> bool:
    """Whether ``folder`` is still the folder ``fd`` holds (not removed and made again)."""
    try:
        here, held = folder.stat(), os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def keep_files(old: Path, new: Path, is_report_file: Callable[[str], bool]) -> None:
    """The entries of ``old`` that are not the report's and not in ``new``, into ``new``:
    files hard-linked (copied where the filesystem cannot link), folders copied the same
    way, symlinks as symlinks; then flushed, so the new report has them once it is in place."""
    for entry in sorted(old.iterdir()):
        target = new / entry.name
        if is_report_file(entry.name) or os.path.lexists(target):
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link_or_copy)
            for folder, _, _ in os.walk(target):
                fsync_dir(folder)
        else:
            _link_or_copy(entry, target)
    fsync_dir(new)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)
        with open(dst, "rb") as fh:
            os.fsync(fh.fileno())
