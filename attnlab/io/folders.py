"""A folder written whole or not at all (``atomic_dir``), and the leftovers of killed writers
settled (``settle_dirs``).

A folder is filled under a hidden name and then swapped with the old one in one step (Linux
``renameat2(RENAME_EXCHANGE)``) or, where the OS cannot swap, the old one is renamed aside
first; at every instant the old folder or the new one is whole on disk, and the next call
puts a set-aside folder back when its replacement never arrived. Its writer holds the hidden
folder's lock while it writes (``attnlab.io.folder_lock``): a sibling call in the same parent
removes only what killed writers left, never a live writer's folder. Files are written by
``attnlab.io``, whose steps (``fsync_dir``, ``crash_point``, ``WriteError``) this builds on.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from attnlab.io import WriteError, crash_point, folder_lock, fsync_dir
from attnlab.io.disk_errors import os_reason

# A folder being written: .<name>.partial beside its final name, renamed when complete;
# locked by its writer while it writes (unlocked: a killed writer's, removed).
PARTIAL = ".partial"
# An old folder renamed aside while its replacement moves in (only where the OS cannot swap
# two names in one step): .<name>.aside, whole; put back if the replacement never arrived.
ASIDE = ".aside"


def atomic_dir(final: Path | str, write: Callable[[Path], None]) -> Path:
    """A folder written whole or not at all: ``write(folder)`` fills ``.<name>.partial``
    beside ``final``, which then replaces ``final`` (an earlier one is replaced whole: at
    every instant the old folder or the new one is whole, see ``_swap_in``). The writer
    holds that folder's lock (``attnlab.io.folder_lock``) until it is in place, so a sibling
    call settles what killed writers left beside it (``settle_dirs``) and never a live
    writer's folder; another live writer of the same name is one WriteError."""
    final = Path(final)
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise WriteError(f"cannot write {final}: it is not a folder")
    work = final.parent / f".{final.name}{PARTIAL}"
    fd = claimed = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with folder_lock.held(final.parent):
            _settle(final.parent)
            fd = _claim(work, final)
            claimed = True
        write(work)
        crash_point("dir:written")
        if not folder_lock.same(fd, work):
            raise OSError(errno.ENOENT, "removed by another process while it was written")
        _swap_in(work, final)
    except OSError as err:
        _drop(work, fd, claimed)
        raise WriteError(f"cannot write {final}: {os_reason(err, final)}") from err
    except BaseException:
        _drop(work, fd, claimed)
        raise
    finally:
        folder_lock.release(fd)
    return final


def _claim(work: Path, final: Path) -> int | None:
    """Make ``work`` and lock it. One left by a killed writer of the same name (or by anyone,
    where the filesystem cannot lock) is removed first; one that a live writer of the same
    name holds is a WriteError, and is left alone."""
    if os.path.lexists(work) and _remove_unheld(work, own=True):
        why = f"another process is writing it ({work})"
        raise WriteError(f"cannot write {final}: {why}")
    work.mkdir()
    return folder_lock.try_lock(work)


def _drop(work: Path, fd: int | None, claimed: bool | None) -> None:
    """Remove the unfinished ``work`` when it is still the folder this writer made."""
    if claimed and folder_lock.same(fd, work):
        shutil.rmtree(work, ignore_errors=True)


def settle_dirs(folder: Path | str) -> list[Path]:
    """Settle what killed ``atomic_dir`` writers left in ``folder``: a folder set aside
    (``.<name>.aside``) goes back to ``<name>`` when no ``<name>`` arrived (it is the only
    whole copy) and is removed when one did; partial folders (``.<name>.partial``, never
    the only whole copy) that no live writer holds are removed. A live writer's folders are
    left alone: its work folder is locked, and its swap holds ``folder`` (``_swap_in``).
    Returns the folders put back."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    with folder_lock.held(folder):
        return _settle(folder)


def _settle(folder: Path) -> list[Path]:
    """``settle_dirs``, with ``folder`` held by the caller."""
    back = []
    for aside in sorted(p for p in folder.glob(f".*{ASIDE}") if p.is_dir()):
        final = folder / aside.name.removeprefix(".").removesuffix(ASIDE)
        if final.exists() or final.is_symlink():
            _discard(aside)
        else:
            aside.rename(final)
            back.append(final)
    if back:
        fsync_dir(folder)
    for orphan in sorted(folder.glob(f".*{PARTIAL}")):
        if orphan.is_dir() and not orphan.is_symlink():
            with contextlib.suppress(OSError):  # what cannot be removed stays a leftover
                _remove_unheld(orphan)
    return back


def _remove_unheld(folder: Path, own: bool = False) -> bool:
    """Remove ``folder`` unless a live writer holds it; True when one does. Where the
    filesystem cannot say, only the next writer of its own name (``own``) removes it."""
    try:
        fd = folder_lock.try_lock(folder)
    except BlockingIOError:
        return True
    except OSError:
        fd = None  # cannot be opened (a file of that name?): cannot say
    if fd is None and not own:
        return False
    try:
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        else:
            folder.unlink()
    finally:
        folder_lock.release(fd)
    return False


def _swap_in(work: Path, final: Path) -> None:
    """Put the finished folder ``work`` at ``final``, with ``final``'s parent held (no
    settle sees the swap halfway). An old ``final`` is swapped with ``work`` in one step
    where the OS can, else renamed aside first (``.<name>.aside``) and ``work`` renamed into
    place; a crash between leaves a whole copy that ``settle_dirs`` keeps. The old folder
    is then renamed to a name being removed and removed, the parent no longer held."""
    with folder_lock.held(final.parent):
        old = _place(work, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # or the next call's settle


def _place(work: Path, final: Path) -> Path | None:
    """``_swap_in``'s renames; returns the old folder, renamed to be removed."""
    if not final.exists():
        work.rename(final)
        crash_point("dir:placed")
        fsync_dir(final.parent)
        return None
    if _exchange(work, final):
        crash_point("dir:exchanged")
        fsync_dir(final.parent)
        return _doomed(work, final)
    aside = final.parent / f".{final.name}{ASIDE}"
    final.rename(aside)  # settle_dirs left no aside folder of this name
    crash_point("dir:aside")
    try:
        work.rename(final)
    except OSError:
        aside.rename(final)
        raise
    crash_point("dir:placed")
    fsync_dir(final.parent)
    return _doomed(aside, final)


def _doomed(old: Path, final: Path) -> Path | None:
    """Rename ``old`` (the folder ``final`` replaced) to ``.<name>.aside.partial``, a name
    being removed (a folder named ``.<name>.aside`` is always whole); None where it cannot
    be renamed: it is left to the next call's settle, the new folder being in place."""
    doomed = final.parent / f".{final.name}{ASIDE}{PARTIAL}"
    shutil.rmtree(doomed, ignore_errors=True)
    try:
        old.rename(doomed)
    except OSError:
        return None
    crash_point("dir:discarding")
    return doomed


def _discard(aside: Path) -> None:
    """Remove a set-aside folder whose replacement is in place."""
    final = aside.with_name(aside.name.removesuffix(ASIDE).removeprefix("."))
    doomed = _doomed(aside, final)
    if doomed is not None:
        shutil.rmtree(doomed, ignore_errors=True)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one step (Linux ``renameat2`` with
    ``RENAME_EXCHANGE``); False where the OS, its C library or the filesystem cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    import ctypes

    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """The C library's ``renameat2`` (glibc 2.28+, musl 1.2.5+), or None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn
