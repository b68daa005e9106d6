"""attnlab.io.atomic_write: a new file gets the mode the umask gives without the process
umask ever being changed (another thread's files keep theirs), the rename is made durable
by flushing the folder, and a writer killed at any step leaves the old file or the new one
(issue 57, item 12)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from attnlab import io as aio
from attnlab.io import folders

# Sets each umask in turn and writes a new file and over an existing 0600 one under it.
MODES = """
import json, os, sys
from pathlib import Path
import attnlab.io as aio
folder, out = Path(sys.argv[1]), {}
for mask in (0o022, 0o027, 0o077, 0o002, 0o000):
    os.umask(mask)
    new, old = folder / f"new-{mask:o}.txt", folder / f"old-{mask:o}.txt"
    old.write_text("old")
    old.chmod(0o600)
    aio.write_text(new, "new")
    aio.write_bytes(old, b"replaced")
    out[mask] = [new.stat().st_mode & 0o777, old.stat().st_mode & 0o777, new.read_text(),
                 old.read_text(), aio.file_mode(), aio.current_umask()]
print(json.dumps(out))
"""


def test_a_written_file_has_the_mode_the_umask_gives(tmp_path):
    res = subprocess.run(
        [sys.executable, "-c", MODES, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    for mask, (new, old, new_text, old_text, mode, umask) in json.loads(res.stdout).items():
        want = 0o666 & ~int(mask)
        assert (oct(new), oct(old), oct(mode), umask) == (
            oct(want),
            oct(want),
            oct(want),
            int(mask),
        )
        assert (new_text, old_text) == ("new", "replaced")
    assert not list(tmp_path.glob(f".*{aio.TMP_SUFFIX}"))


def test_a_thread_creating_files_meanwhile_never_sees_a_changed_umask(tmp_path, monkeypatch):
    """Another thread creates files while atomic_write runs again and again; every one of
    its files gets the mode the process umask gives. Any moment in which the umask is set
    (os.umask can only set it) is widened, so that the thread cannot miss it."""
    real_umask = os.umask

    def slow_umask(mask: int) -> int:
        old = real_umask(mask)
        time.sleep(0.002)  # the thread runs meanwhile
        return old

    monkeypatch.setattr(os, "umask", slow_umask)
    side = tmp_path / "side"
    side.mkdir()
    fd = os.open(side / "probe", os.O_WRONLY | os.O_CREAT, 0o666)
    want = stat.S_IMODE(os.fstat(fd).st_mode)
    os.close(fd)
    modes: dict[int, int] = {}
    done = threading.Event()

    def create() -> None:
        while not done.is_set():
            fd = os.open(side / f"f{len(modes)}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            modes[len(modes)] = stat.S_IMODE(os.fstat(fd).st_mode)
            os.close(fd)
            time.sleep(0.0002)

    creator = threading.Thread(target=create)
    creator.start()
    try:
        i, end = 0, time.monotonic() + 10
        while (i < 60 or len(modes) < 50) and time.monotonic() < end:
            aio.write_text(tmp_path / "out.txt", f"version {i}")
            assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == want
            i += 1
    finally:
        done.set()
        creator.join()
    assert len(modes) >= 50
    assert {oct(m) for m in modes.values()} == {oct(want)}


def test_the_folder_is_flushed_after_the_rename(tmp_path, monkeypatch):
    """os.fsync is watched (called through): after the new file's own flush, its folder is
    flushed once the name points at the new bytes."""
    path = tmp_path / "out.txt"
    path.write_text("old")
    seen: list[tuple[str, int, str]] = []
    real_fsync = os.fsync

    def watched(fd: int) -> None:
        st = os.fstat(fd)
        kind = "folder" if stat.S_ISDIR(st.st_mode) else "file"
        seen.append((kind, st.st_ino, path.read_text()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", watched)
    aio.write_text(path, "new")
    folder = tmp_path.stat().st_ino
    assert ("file", path.stat().st_ino, "old") in seen  # the bytes, before the rename
    assert ("folder", folder, "new") in seen  # the name, after it
    seen.clear()
    folders.atomic_dir(tmp_path / "dir", lambda work: (work / "a").write_text("a"))
    assert [s for s in seen if s[:2] == ("folder", folder)]


WRITER = """
import sys
from pathlib import Path
import attnlab.io as aio
aio.write_text(Path(sys.argv[1]), "new")
"""


@pytest.mark.parametrize(("step", "expected"), [("file:written", "old"), ("file:renamed", "new")])
def test_a_writer_killed_at_any_step_leaves_the_old_file_or_the_new_one(tmp_path, step, expected):
    path = tmp_path / "out.txt"
    path.write_text("old")
    env = {**os.environ, aio.CRASH_AT: step}
    res = subprocess.run([sys.executable, "-c", WRITER, str(path)], env=env, timeout=60)
    assert res.returncode == -9  # killed there, by SIGKILL
    assert path.read_text() == expected
    aio.remove_orphans(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
