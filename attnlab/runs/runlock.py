"""The advisory lock of a run directory: one process trains or evaluates in it at a time."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from attnlab.errors import UserError


class RunLock:
    """An advisory lock on a run directory (``fcntl.flock`` on ``.lock``).

    The kernel drops it when the holding process dies, so a restart after SIGKILL or a SLURM
    requeue takes it again at once; a second live process is refused with one clear line.
    """

    def __init__(self, path: Path, purpose: str):
        self.path = Path(path)
        self.purpose = purpose
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                who = self.holder() or "another process"
                raise UserError(
                    f"{self.path.parent}: run directory is in use ({who}); wait for it to "
                    f"finish or use another run directory"
                ) from err
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{self.purpose}, pid {os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def holder(self) -> str | None:
        """Who holds the lock, or None when nobody does (probing takes it for an instant)."""
        import fcntl

        if not self.path.is_file():
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            try:
                return os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process"
            finally:
                os.close(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return None
