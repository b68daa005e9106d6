"""An OS error met while writing, in words: a full disk (or quota, or file-size limit) names
the disk it is on, by its mount point, and what is free there."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

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
    size = float(shutil.disk_usage(folder).free)
    units = ["bytes", "KB", "MB", "GB", "TB"]
    while size >= 1024 and len(units) > 1:
        size /= 1024
        units.pop(0)
    return f"{size:.0f} bytes" if units[0] == "bytes" else f"{size:.1f} {units[0]}"
