"""attnlab.io.atomic_dir: a folder is replaced whole. A writer killed (SIGKILL, in a real
subprocess) at any step of the replacement leaves the old folder or the new one whole, and
the next call keeps it at the final path (issue 57, item 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from attnlab import io as aio

OLD = {"a.txt": "old a", "sub/b.txt": "old b", "only-old.txt": "o"}
NEW = {"a.txt": "new a", "sub/b.txt": "new b", "only-new.txt": "n"}
THIRD = {"a.txt": "third a"}

# The writer: fills a folder with NEW and puts it at argv[1]; argv[2] == "aside" plays an
# OS or filesystem that cannot swap two names in one step (the fallback path).
WRITER = """
import json, sys
from pathlib import Path
import attnlab.io as aio
if sys.argv[2] == "aside":
    aio._exchange = lambda a, b: False
def write(work):
    for name, text in json.loads(sys.argv[3]).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
aio.atomic_dir(Path(sys.argv[1]), write)
"""


def tree(folder: Path) -> dict[str, str] | None:
    """Every file under ``folder`` and its text; None when there is no such folder."""
    if not folder.is_dir():
        return None
    return {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }


def fill(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def run_writer(final: Path, mode: str, crash_at: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != aio.CRASH_AT}
    if crash_at:
        env[aio.CRASH_AT] = crash_at
    cmd = [sys.executable, "-c", WRITER, str(final), mode, json.dumps(NEW)]
    return subprocess.run(cmd, env=env, timeout=60).returncode


def fails(work: Path) -> None:
    fill(work, {"a.txt": "half"})
    raise RuntimeError("the next writer fails too")


def whole_copies(parent: Path) -> list[dict[str, str] | None]:
    """What is on disk just after the kill: the final folder and a folder set aside."""
    return [tree(parent / "out"), tree(parent / f".out{aio.ASIDE}")]


# (path, step the writer is killed at, what the final path holds after the next call)
CASES = [
    ("swap", "dir:written", OLD),
    ("swap", "dir:exchanged", NEW),
    ("aside", "dir:written", OLD),
    ("aside", "dir:aside", OLD),
    ("aside", "dir:placed", NEW),
    ("aside", "dir:discarding", NEW),
]


@pytest.mark.parametrize(("mode", "step", "expected"), CASES)
def test_a_writer_killed_at_any_step_leaves_the_old_or_the_new_folder_whole(
    tmp_path, mode, step, expected
):
    final = tmp_path / "out"
    fill(final, OLD)
    assert run_writer(final, mode, step) == -9  # killed there, by SIGKILL
    assert OLD in whole_copies(tmp_path) or NEW in whole_copies(tmp_path)
    # The next call, even one that fails, keeps the whole copy at the final path ...
    with pytest.raises(RuntimeError):
        aio.atomic_dir(final, fails)
    assert tree(final) == expected
    # ... and one that succeeds replaces it and leaves nothing beside it.
    aio.atomic_dir(final, lambda work: fill(work, THIRD))
    assert tree(final) == THIRD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("step", ["dir:written", "dir:placed"])
def test_a_first_writer_killed_leaves_no_folder_or_the_whole_new_one(tmp_path, step):
    final = tmp_path / "out"
    assert run_writer(final, "swap", step) == -9
    aio.atomic_dir(tmp_path / "other", lambda work: fill(work, THIRD))  # a sibling's call
    if step == "dir:placed":
        assert tree(final) == NEW
        assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out"]
    else:  # nothing was there before: nothing is, and the half-made folder is gone
        assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]


@pytest.mark.parametrize("mode", ["swap", "aside"])
def test_an_unkilled_writer_replaces_the_folder_whole(tmp_path, mode):
    final = tmp_path / "out"
    fill(final, OLD)
    assert run_writer(final, mode, None) == 0
    assert tree(final) == NEW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_folder_set_aside_without_its_replacement_is_put_back_not_deleted(tmp_path):
    """The state a writer killed between its two renames leaves, whoever made it: the
    finished new folder under its partial name, the old one aside, nothing at the final path.
    Only the aside folder is known whole; it goes back, the partial one goes."""
    fill(tmp_path / f".out{aio.ASIDE}", OLD)
    fill(tmp_path / f".out{aio.PARTIAL}", NEW)
    fill(tmp_path / f".kept{aio.ASIDE}", THIRD)  # a sibling's, put back too
    with pytest.raises(RuntimeError):
        aio.atomic_dir(tmp_path / "out", fails)
    assert tree(tmp_path / "out") == OLD and tree(tmp_path / "kept") == THIRD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "out"]


def test_a_folder_set_aside_whose_replacement_arrived_is_removed(tmp_path):
    fill(tmp_path / f".out{aio.ASIDE}", OLD)
    fill(tmp_path / "out", NEW)
    assert aio.settle_dirs(tmp_path) == []
    assert tree(tmp_path / "out") == NEW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_where_the_os_can_swap_the_final_folder_never_goes_missing(tmp_path):
    """A reader looking at the final path while it is replaced again and again always finds
    a whole folder (Linux renameat2 RENAME_EXCHANGE; elsewhere the aside path above)."""
    probe_a, probe_b = tmp_path / "a", tmp_path / "b"
    probe_a.mkdir(), probe_b.mkdir()
    if not aio._exchange(probe_a, probe_b):
        pytest.skip("this OS or filesystem cannot swap two names in one step")
    final = tmp_path / "out"
    aio.atomic_dir(final, lambda work: fill(work, {"n.txt": "0"}))
    seen: list[str] = []
    done = threading.Event()

    def look() -> None:
        while not done.is_set():
            try:
                seen.append((final / "n.txt").read_text())
            except OSError as err:
                seen.append(f"missing: {err}")

    reader = threading.Thread(target=look)
    reader.start()
    try:
        for i in range(1, 150):
            aio.atomic_dir(final, lambda work, i=i: fill(work, {"n.txt": str(i)}))
    finally:
        done.set()
        reader.join()
    assert seen and not [s for s in seen if s.startswith("missing")]
    assert tree(final) == {"n.txt": "149"}


def test_a_file_in_the_way_is_one_clear_error_and_is_left_alone(tmp_path):
    final = tmp_path / "out"
    final.write_text("a note")
    with pytest.raises(aio.WriteError, match="not a folder"):
        aio.atomic_dir(final, lambda work: fill(work, NEW))
    assert final.read_text() == "a note"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
