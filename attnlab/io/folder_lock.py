"""Advisory locks on folders (``flock``), which the kernel drops when their holder dies.

``attnlab.io.folders.atomic_dir`` holds the lock of the folder it fills (``.<name>.partial``)
for as long as it writes, so that a sibling call in the same parent can tell a live writer's
folder (held) from a killed writer's leftover (not held) and removes only the latter. The parent
itself is held, briefly, while a folder is claimed, swapped in or a leftover settled, so that
no settle sees a swap halfway (an old folder set aside that its writer is about to replace).

A thread that holds a folder (its work folder, while its write fills it) does not wait for
that folder again: a folder written inside a folder being written does not deadlock. Where
the OS or filesystem cannot lock (not POSIX, a network filesystem without locks), nothing
is held and ``try_lock`` says so (None): then nobody can tell a live writer's folder from a
leftover, and attnlab.io.folders removes one only where the next writer of its own name
needs it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_here = threading.local()  # (st_dev, st_ino) of the folders this thread holds


def _held_here() -> set[tuple[int, int]]:
    if not hasattr(_here, "folders"):
        _here.folders = set()
    return _here.folders


def _key(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def try_lock(folder: Path, wait: bool = False) -> int | None:
    """A descriptor of ``folder`` holding an exclusive lock on it (``release`` it), or None
    where the filesystem cannot lock. Without ``wait``, raises BlockingIOError where another
    process (or another descriptor) holds it; OSError where the folder cannot be opened."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return None
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            raise BlockingIOError(err.errno, "held by another process", str(folder)) from err
        return None  # ENOLCK, EBADF (NFS without locks), EOPNOTSUPP: the filesystem cannot
    except BaseException:  # interrupted while waiting
        os.close(fd)
        raise
    _held_here().add(_key(fd))
    return fd


def release(fd: int | None) -> None:
    """Drop the lock ``fd`` holds (closing it drops the flock); None is nothing held."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        _held_here().discard(_key(fd))
    os.close(fd)


@contextlib.contextmanager
def held(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock for the ``with`` block, waiting for it; nothing where this
    thread holds it already or the folder cannot be opened or locked."""
    try:
        st = folder.stat()
        mine = (st.st_dev, st.st_ino) in _held_here()
    except OSError:
        mine = True  # no folder to hold: the caller's own steps say what is wrong
    fd = None
    if not mine:
        with contextlib.suppress(PermissionError):  # a folder one may write but not list
            fd = try_lock(folder, wait=True)
    try:
        yield
    finally:
        release(fd)


def same(fd: int | None, folder: Path) -> bool:
    """Whether ``folder`` is still the folder ``fd`` holds (not removed, renamed or made
    again); True where nothing is held (the filesystem cannot say)."""
    if fd is None:
        return True
    try:
        here, locked = folder.stat(), os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (locked.st_dev, locked.st_ino)
