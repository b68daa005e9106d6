"""attnlab.io.folders.atomic_dir: a folder is replaced whole. A writer killed (SIGKILL, in a real
subprocess) at any step of the replacement leaves the old folder or the new one whole, and
the next call keeps it at the final path (issue 57, item 11). A live writer's folders are
left alone by a call beside it, a killed writer's are settled by it (item 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from attnlab import io as aio
from attnlab.io import folders

OLD = {"a.txt": "old a", "sub/b.txt": "old b", "only-old.txt": "o"}
NEW = {"a.txt": "new a", "sub/b.txt": "new b", "only-new.txt": "n"}
THIRD = {"a.txt": "third a"}

# The writer: fills a folder with NEW and puts it at argv[1]; argv[2] == "aside" plays an
# OS or filesystem that cannot swap two names in one step (the fallback path).
WRITER = """
import json, sys
from pathlib import Path
from attnlab.io import folders
if sys.argv[2] == "aside":
    folders._exchange = lambda a, b: False
def write(work):
    for name, text in json.loads(sys.argv[3]).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
folders.atomic_dir(Path(sys.argv[1]), write)
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
    return [tree(parent / "out"), tree(parent / f".out{folders.ASIDE}")]


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
        folders.atomic_dir(final, fails)
    assert tree(final) == expected
    # ... and one that succeeds replaces it and leaves nothing beside it.
    folders.atomic_dir(final, lambda work: fill(work, THIRD))
    assert tree(final) == THIRD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("step", ["dir:written", "dir:placed"])
def test_a_first_writer_killed_leaves_no_folder_or_the_whole_new_one(tmp_path, step):
    final = tmp_path / "out"
    assert run_writer(final, "swap", step) == -9
    folders.atomic_dir(tmp_path / "other", lambda work: fill(work, THIRD))  # a sibling's call
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
    fill(tmp_path / f".out{folders.ASIDE}", OLD)
    fill(tmp_path / f".out{folders.PARTIAL}", NEW)
    fill(tmp_path / f".kept{folders.ASIDE}", THIRD)  # a sibling's, put back too
    with pytest.raises(RuntimeError):
        folders.atomic_dir(tmp_path / "out", fails)
    assert tree(tmp_path / "out") == OLD and tree(tmp_path / "kept") == THIRD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "out"]


def test_a_folder_set_aside_whose_replacement_arrived_is_removed(tmp_path):
    fill(tmp_path / f".out{folders.ASIDE}", OLD)
    fill(tmp_path / "out", NEW)
    assert folders.settle_dirs(tmp_path) == []
    assert tree(tmp_path / "out") == NEW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_where_the_os_can_swap_the_final_folder_never_goes_missing(tmp_path):
    """A reader looking at the final path while it is replaced again and again always finds
    a whole folder (Linux renameat2 RENAME_EXCHANGE; elsewhere the aside path above)."""
    probe_a, probe_b = tmp_path / "a", tmp_path / "b"
    probe_a.mkdir(), probe_b.mkdir()
    if not folders._exchange(probe_a, probe_b):
        pytest.skip("this OS or filesystem cannot swap two names in one step")
    final = tmp_path / "out"
    folders.atomic_dir(final, lambda work: fill(work, {"n.txt": "0"}))
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
            folders.atomic_dir(final, lambda work, i=i: fill(work, {"n.txt": str(i)}))
    finally:
        done.set()
        reader.join()
    assert seen and not [s for s in seen if s.startswith("missing")]
    assert tree(final) == {"n.txt": "149"}


def test_a_file_in_the_way_is_one_clear_error_and_is_left_alone(tmp_path):
    final = tmp_path / "out"
    final.write_text("a note")
    with pytest.raises(aio.WriteError, match="not a folder"):
        folders.atomic_dir(final, lambda work: fill(work, NEW))
    assert final.read_text() == "a note"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ----------------------------------------------------------------- live writers beside (#1)

# A writer that writes first.txt, says so, waits for a line on stdin (the test acts
# meanwhile: the writer is alive and mid-write), then writes second.txt and puts its
# folder at argv[1]; argv[2] == "aside" as in WRITER.
PAUSED = """
import sys
from pathlib import Path
from attnlab.io import folders
if sys.argv[2] == "aside":
    folders._exchange = lambda a, b: False
def write(work):
    (work / "first.txt").write_text("1")
    print("first", flush=True)
    sys.stdin.readline()
    (work / "second.txt").write_text("2")
folders.atomic_dir(Path(sys.argv[1]), write)
"""
WHOLE = {"first.txt": "1", "second.txt": "2"}


def paused_writer(final: Path, mode: str = "swap") -> subprocess.Popen:
    """A writer process stopped midway through filling its folder (see PAUSED)."""
    env = {k: v for k, v in os.environ.items() if k not in (aio.CRASH_AT, aio.STOP_AT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", PAUSED, str(final), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline() == "first\n"
    assert tree(final.parent / f".{final.name}{folders.PARTIAL}") == {"first.txt": "1"}
    return proc


def resume(proc: subprocess.Popen) -> int:
    proc.stdin.write("go\n")
    proc.stdin.close()
    return proc.wait(timeout=60)


def beside_sibling(tmp_path: Path) -> None:
    folders.atomic_dir(tmp_path / "other", lambda work: fill(work, THIRD))


def beside_settle(tmp_path: Path) -> None:
    assert folders.settle_dirs(tmp_path) == []


def beside_process(tmp_path: Path) -> None:  # another process's atomic_dir
    assert run_writer(tmp_path / "other", "swap", None) == 0


def beside_same_name(tmp_path: Path) -> None:
    with pytest.raises(aio.WriteError, match="another process is writing it"):
        folders.atomic_dir(tmp_path / "out", lambda work: fill(work, THIRD))


BESIDE = [beside_sibling, beside_settle, beside_process, beside_same_name]


@pytest.mark.parametrize("mode", ["swap", "aside"])
@pytest.mark.parametrize("beside", BESIDE, ids=lambda f: f.__name__)
def test_a_live_writers_folder_is_left_alone_by_a_call_beside_it(tmp_path, mode, beside):
    """Writer A, alive and midway (first.txt written), and meanwhile an atomic_dir of
    another name in the same parent (here, or in another process), a bare settle, or one of
    A's own name (refused in one line): A's folder is left alone, and once A goes on it puts
    its whole folder (first.txt and second.txt) in place of the old one."""
    final = tmp_path / "out"
    fill(final, OLD)
    proc = paused_writer(final, mode)
    try:
        beside(tmp_path)
        assert tree(tmp_path / f".out{folders.PARTIAL}") == {"first.txt": "1"}
        assert tree(final) == OLD
    finally:
        code = resume(proc)
    assert code == 0
    assert tree(final) == WHOLE
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"out"} | ({"other"} if beside in (beside_sibling, beside_process) else set())
    )


def test_a_killed_writers_folder_is_removed_by_the_next_call_beside_it(tmp_path):
    """A writer killed midway holds nothing (the kernel drops its lock): its half-filled
    folder is a leftover, removed by the next call in the same parent."""
    final = tmp_path / "out"
    fill(final, OLD)
    proc = paused_writer(final)
    proc.kill()
    assert proc.wait(timeout=60) == -9
    beside_sibling(tmp_path)
    assert tree(final) == OLD and tree(tmp_path / "other") == THIRD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out"]
    folders.atomic_dir(final, lambda work: fill(work, NEW))  # and its own name is free again
    assert tree(final) == NEW


def stopped_at(final: Path, step: str) -> subprocess.Popen:
    """A WRITER of NEW in "aside" mode, stopped (SIGSTOP) at ``step`` of its swap."""
    env = {k: v for k, v in os.environ.items() if k != aio.CRASH_AT}
    env[aio.STOP_AT] = step
    cmd = [sys.executable, "-c", WRITER, str(final), "aside", json.dumps(NEW)]
    proc = subprocess.Popen(cmd, env=env)
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the writer ended ({status}) before {step}"
    return proc


@pytest.mark.parametrize("step", ["dir:aside", "dir:placed"])
def test_a_folder_set_aside_by_a_live_writer_is_left_to_it(tmp_path, step):
    """Where the OS cannot swap, a writer sets the old folder aside, then moves its own in.
    A call beside it meanwhile waits for that swap to end rather than put the aside folder
    back (or remove it) under the writer: the writer's folder is the one in place."""
    final = tmp_path / "out"
    fill(final, OLD)
    proc = stopped_at(final, step)
    done = threading.Event()
    errors: list[BaseException] = []

    def sibling() -> None:
        try:
            beside_sibling(tmp_path)
        except BaseException as err:  # reported below
            errors.append(err)
        finally:
            done.set()

    thread = threading.Thread(target=sibling, daemon=True)
    try:
        thread.start()
        assert not done.wait(0.5)  # waiting for the stopped writer's swap
        assert (tmp_path / f".out{folders.ASIDE}").is_dir()
    finally:
        proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=60) == 0
    assert done.wait(60) and not errors
    assert tree(final) == NEW and tree(tmp_path / "other") == THIRD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out"]


def test_a_folder_written_inside_a_folder_being_written_does_not_wait_for_itself(tmp_path):
    final = tmp_path / "out"

    def write(work: Path) -> None:
        fill(work, {"a.txt": "a"})
        folders.atomic_dir(work / "sub", lambda inner: fill(inner, {"b.txt": "b"}))

    folders.atomic_dir(final, write)
    assert tree(final) == {"a.txt": "a", "sub/b.txt": "b"}
    assert sorted(p.name for p in final.iterdir()) == ["a.txt", "sub"]
