"""The report folder replaced whole (issue 57, items 11 and 12 in the report builder).

A report writer killed (SIGKILL, in a real subprocess) at any step leaves the earlier report
or the new one whole, and the next report, even one that fails, keeps the whole one at its
place; the process umask is never set; files of the earlier report that are not the
report's are kept as they were; writers beside it (another report into the same folder,
another tool's ``attnlab.io.folders.atomic_dir``) neither lose their folder nor take this one's."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.runs import write_run

from attnlab import io as aio
from attnlab.io import folders
from attnlab.report.build import build_report
from attnlab.report.discover import ReportError

# The writer: the report of argv[3:] at argv[1]; argv[2] == "aside" plays an OS or filesystem
# that cannot swap two names in one step (attnlab.io.folders' fallback).
WRITER = """
import sys
from pathlib import Path
from attnlab.io import folders
from attnlab.report.build import build_report
if sys.argv[2] == "aside":
    folders._exchange = lambda a, b: False
build_report([Path(p) for p in sys.argv[3:]], Path(sys.argv[1]))
"""

NOTES = {"my notes.txt": b"mine", "notes/deeper/n.txt": b"kept too"}


def contents(folder: Path) -> dict[str, bytes] | None:
    """Every file under ``folder`` and its bytes, less the times they carry (a TensorBoard
    event file as its folder); symlinks as their targets; None when there is no folder."""
    if not folder.is_dir() or folder.is_symlink():
        return None
    found: dict[str, bytes] = {}
    for p in folder.rglob("*"):
        name = p.relative_to(folder).as_posix()
        if p.is_symlink():
            found[name] = b"-> " + os.readlink(p).encode()
        elif p.is_file() and "tfevents" in p.name:
            found[f"{p.parent.relative_to(folder).as_posix()}/<events>"] = b""
        elif p.is_file():  # index.html says the minute it was made
            found[name] = re.sub(rb"Generated [0-9: -]+\.", b"Generated .", p.read_bytes())
    return found


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> SimpleNamespace:
    """Two runs without evaluations (quick reports); the earlier report (run a) and the new
    one (runs a and f), each as it is once a user has put notes into its folder."""
    root = tmp_path_factory.mktemp("report-swap")
    a = write_run(root / "runs/a", seed=0, eval_name=None, history=False)
    f = write_run(root / "runs/f", seed=0, reader="fixed", eval_name=None, history=False)
    build_report([a], root / "old")
    build_report([a, f], root / "new")
    return SimpleNamespace(
        a=a,
        f=f,
        old_dir=root / "old",
        bare_new=contents(root / "new"),
        old={**contents(root / "old"), **NOTES},
        new={**contents(root / "new"), **NOTES},
    )


def earlier_report(reports: SimpleNamespace, site: Path) -> Path:
    """The earlier report at ``site/report``, with a user's notes (a file and a folder)
    beside its files."""
    report = site / "report"
    shutil.copytree(reports.old_dir, report)
    for name, text in NOTES.items():
        (report / name).parent.mkdir(parents=True, exist_ok=True)
        (report / name).write_bytes(text)
    assert contents(report) == reports.old
    return report


def run_writer(report: Path, mode: str, crash_at: str | None, *runs: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k != aio.CRASH_AT}
    if crash_at:
        env[aio.CRASH_AT] = crash_at
    cmd = [sys.executable, "-c", WRITER, str(report), mode, *map(str, runs)]
    return subprocess.run(cmd, env=env, timeout=120, capture_output=True).returncode


def no_runs(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir(exist_ok=True)
    return tmp_path / "empty"


# (how the OS swaps, the step the writer is killed at, which report is at --out after)
CASES = [
    ("swap", "file:written", "old"),  # while it writes its first file
    ("swap", "dir:written", "old"),  # built, notes kept, not yet swapped
    ("swap", "dir:exchanged", "new"),  # swapped; the earlier one not yet removed
    ("aside", "dir:aside", "old"),  # the earlier report set aside, the new one not in place
    ("aside", "dir:placed", "new"),
    ("aside", "dir:discarding", "new"),
]


@pytest.mark.parametrize(("mode", "step", "expected"), CASES)
def test_a_report_killed_at_any_step_leaves_the_earlier_or_the_new_report_whole(
    reports, tmp_path, mode, step, expected
):
    site = tmp_path / "site"
    report = earlier_report(reports, site)
    assert run_writer(report, mode, step, reports.a, reports.f) == -signal.SIGKILL
    on_disk = [contents(report), contents(site / f".report{folders.ASIDE}")]
    assert reports.old in on_disk or reports.new in on_disk
    # The next report, even one that fails (no runs there), keeps the whole one at --out ...
    with pytest.raises(ReportError, match="no runs found"):
        build_report([no_runs(tmp_path)], report)
    assert contents(report) == getattr(reports, expected)
    # ... and one that succeeds replaces it, keeps the notes, and leaves nothing beside it.
    build_report([reports.a, reports.f], report)
    assert contents(report) == reports.new
    assert os.listdir(site) == ["report"]


@pytest.mark.parametrize("step", ["dir:written", "dir:placed"])
def test_a_first_report_killed_leaves_no_folder_or_the_whole_new_one(reports, tmp_path, step):
    site = tmp_path / "site"
    site.mkdir()
    assert run_writer(site / "report", "swap", step, reports.a, reports.f) == -signal.SIGKILL
    with pytest.raises(ReportError, match="no runs found"):
        build_report([no_runs(tmp_path)], site / "report")
    if step == "dir:placed":
        assert contents(site / "report") == reports.bare_new
        assert os.listdir(site) == ["report"]
    else:  # nothing was there before: nothing is, and the unfinished folder is gone
        assert os.listdir(site) == []


@pytest.mark.parametrize(
    "aside, unfinished",
    [
        (f".report{folders.ASIDE}", ".report.0123456789abcdef.building"),
        (".report.old.partial", ".report.ab_c1234.partial"),  # what earlier builders left
    ],
)
def test_an_earlier_report_set_aside_without_its_replacement_goes_back(
    reports, tmp_path, aside, unfinished
):
    """The state a writer killed between its two renames leaves: the earlier report aside,
    the finished new one under its unfinished name, nothing at --out. Only the one set aside
    is known whole; it goes back, the other goes."""
    site = tmp_path / "site"
    earlier_report(reports, site).rename(site / aside)
    shutil.copytree(reports.old_dir, site / unfinished)
    with pytest.raises(ReportError, match="no runs found"):
        build_report([no_runs(tmp_path)], site / "report")
    assert contents(site / "report") == reports.old
    assert os.listdir(site) == ["report"]


def test_the_umask_is_never_set_and_gives_the_report_its_modes(reports, tmp_path, monkeypatch):
    """Another thread creates files while reports are written and replaced; each of its files
    gets the mode the process umask gives. Any moment in which the umask is set (os.umask
    can only set it) is widened, so that the thread cannot miss it. The report's folder and
    files get the modes that the umask gives a new folder and a new file."""
    real_umask = os.umask

    def slow_umask(mask: int) -> int:
        old = real_umask(mask)
        time.sleep(0.05)  # the thread runs meanwhile
        return old

    old_mask = real_umask(0o027)
    monkeypatch.setattr(os, "umask", slow_umask)
    side = tmp_path / "side"
    side.mkdir()
    modes: list[int] = []
    done = threading.Event()

    def create() -> None:
        while not done.is_set():
            fd = os.open(side / f"f{len(modes)}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
            os.close(fd)
            time.sleep(0.001)

    thread = threading.Thread(target=create)
    thread.start()
    try:
        for _ in range(2):  # a new report, then one replacing it
            build_report([reports.a], tmp_path / "report")
    finally:
        done.set()
        thread.join()
        real_umask(old_mask)
    assert modes and set(modes) == {0o640}
    folders = [tmp_path / "report", *(p for p in (tmp_path / "report").rglob("*") if p.is_dir())]
    files = [p for p in (tmp_path / "report").rglob("*") if p.is_file()]
    assert {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o750}
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o640}


def stopped_while_building(report: Path, *runs: Path) -> subprocess.Popen:
    """A report writer (a subprocess) stopped (SIGSTOP) while it builds ``report``: its
    hidden folder beside ``report`` holds its first files, not yet its last (index.html)."""

    def building() -> bool:
        with contextlib.suppress(OSError):
            for hidden in report.parent.glob(f".{report.name}.*"):
                names = os.listdir(hidden)
                if names and "index.html" not in names:
                    return True
        return False

    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(report), "swap", *runs])
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if building():
                proc.send_signal(signal.SIGSTOP)
                time.sleep(0.05)  # stopped by now
                if building():
                    return proc
                proc.send_signal(signal.SIGCONT)
            time.sleep(0.001)
        proc.wait(timeout=120)
    pytest.fail("the writer never stopped while building")


def test_a_report_beside_a_live_writer_leaves_its_folder_alone(reports, tmp_path):
    """Another report into the same folder, a report into a folder beside it and another
    tool's atomic_dir there, while a writer is stopped midway: each writes its own, the
    stopped writer's folder is left alone, and once resumed it puts its whole report in."""
    site = tmp_path / "site"
    report = earlier_report(reports, site)
    proc = stopped_while_building(report, reports.a, reports.f)
    try:
        building = sorted(p.name for p in site.iterdir() if p.name.startswith(".report."))
        build_report([reports.a], report)  # the same folder: settles what is left there
        build_report([reports.a], site / "other")
        folders.atomic_dir(site / "export", lambda work: (work / "x.txt").write_text("x"))
        assert sorted(p.name for p in site.iterdir() if p.name.startswith(".report.")) == building
        assert contents(report) == reports.old  # the second report, with the notes
    finally:
        proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=120) == 0
    assert contents(report) == reports.new
    assert sorted(os.listdir(site)) == ["export", "other", "report"]


def test_files_not_the_reports_are_kept_as_they_were(reports, tmp_path):
    """A user's file, folder and symlink (kept a symlink) in the earlier report, and files of
    the earlier report that the new one has not (a stale comparisons.csv) dropped."""
    report = earlier_report(reports, tmp_path / "site")
    (report / "latest").symlink_to("my notes.txt")
    (report / "comparisons.csv").write_text("stale")
    build_report([reports.a, reports.f], report)
    assert contents(report) == {**reports.new, "latest": b"-> my notes.txt"}
    assert os.listdir(tmp_path / "site") == ["report"]


def test_a_symlinked_report_folder_is_replaced_at_its_target(reports, tmp_path):
    site = tmp_path / "site"
    target = earlier_report(reports, site)
    (site / "link").symlink_to("report")
    build_report([reports.a, reports.f], site / "link")
    assert (site / "link").is_symlink() and os.readlink(site / "link") == "report"
    assert contents(target) == reports.new
    assert sorted(os.listdir(site)) == ["link", "report"]


def test_a_file_in_the_way_is_one_clear_error_and_is_left_alone(reports, tmp_path):
    out = tmp_path / "report"
    out.write_text("a note")
    with pytest.raises(aio.WriteError, match="not a folder"):
        build_report([reports.a], out)
    assert out.read_text() == "a note" and os.listdir(tmp_path) == ["report"]
