"""How ``hydra/launcher=slurm`` learns that its jobs ended on a cluster without accounting
(hydra_plugins/attnlab_slurm/launcher.py), without a cluster: ``squeue`` and ``sacct`` are
scripts on PATH that print recorded output, and the jobs are submitit's own ``SlurmJob``s
on real job folders. tests/test_tasks_slurm.py runs the same launcher on a real scheduler."""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from pathlib import Path

import pytest
from hydra.core.utils import JobStatus
from submitit import SlurmJob
from submitit.core.utils import UncompletedJobError

from hydra_plugins.attnlab_slurm import launcher as slurm

# `squeue --noheader --array --states=all --format=%i|%T|%N` as slurm-wlm 22.05 printed it
# for an array of three (one running, one done, one pending), a plain job cancelled, and a
# pending array that squeue printed on one line.
RECORDED = """\
77_0|RUNNING|vm
77_1|COMPLETED|vm
77_2|PENDING|
81|CANCELLED|vm
90_[2-4,7%2]|PENDING|
77_0.batch|RUNNING|vm

"""


@pytest.fixture
def scheduler(tmp_path, monkeypatch):
    """A folder of fake SLURM commands first on PATH: ``squeue`` prints ``squeue.out`` (or
    fails while ``squeue.fail`` exists), ``sacct`` fails as without accounting; both log
    their arguments (``<name>.calls``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "squeue": f'echo "$@" >> {bin_dir}/squeue.calls\n'
        f"if [ -e {bin_dir}/squeue.fail ]; then\n"
        '  echo "squeue: error: Unable to contact slurm controller" >&2; exit 1\nfi\n'
        f"cat {bin_dir}/squeue.out\n",
        "sacct": f'echo "$@" >> {bin_dir}/sacct.calls\n'
        'echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1\n',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "squeue.out").write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def calls(scheduler: Path, name: str) -> list[str]:
    path = scheduler / f"{name}.calls"
    return path.read_text().splitlines() if path.exists() else []


def job(folder: Path, job_id: str, tasks: tuple[int, ...] = (0,)) -> SlurmJob:
    """submitit's job for ``job_id`` with its files under ``folder/<job id>`` (the launcher's
    ``submitit_folder``: ``.submitit/%j``)."""
    made = SlurmJob(folder=folder / "%j", job_id=job_id, tasks=tasks)
    made.paths.folder.mkdir(parents=True, exist_ok=True)
    return made


def finish(made: SlurmJob, value: object, task: int = 0) -> None:
    """Write the result file the job's task writes when its function returns ``value``."""
    path = made.task(task).paths.result_pickle
    path.write_bytes(pickle.dumps(("success", value)))


def test_squeue_output_read_job_by_job():
    assert slurm.read_squeue(RECORDED) == {
        "77_0": "RUNNING", "77_1": "COMPLETED", "77_2": "PENDING", "81": "CANCELLED",
        "90_2": "PENDING", "90_3": "PENDING", "90_4": "PENDING", "90_7": "PENDING",
    }  # fmt: skip
    assert slurm.read_squeue("") == {}
    assert slurm.expand_job_id("5_[0-1]") == ["5_0", "5_1"]
    assert slurm.expand_job_id("5_3") == ["5_3"]


def test_a_job_squeue_lists_no_longer_is_gone_and_one_never_listed_unknown(scheduler):
    states = slurm.SqueueStates()
    (scheduler / "squeue.out").write_text(RECORDED)
    states.update()
    assert states.get("77_0") == "RUNNING" and states.get("77_1") == "COMPLETED"
    (scheduler / "squeue.out").write_text("77_0|COMPLETED|vm\n")  # 77_1: MinJobAge passed
    states.update()
    assert states.get("77_0") == "COMPLETED"
    assert states.get("77_1") == slurm.GONE and states.get("81") == slurm.GONE
    assert states.get("99_0") == "UNKNOWN"  # never listed: not known to have ended
    assert {states.get(j) for j in ("77_0", "77_1")} <= slurm.ENDED
    assert "UNKNOWN" not in slurm.ENDED
    # every job of this user, those that ended included (asking by id fails once squeue
    # forgot one of them)
    args = calls(scheduler, "squeue")[-1].split()
    assert f"--user={os.getuid()}" in args and "--states=all" in args and "--array" in args


def test_states_of_a_job_that_will_run_again_are_not_ended():
    for state in ("PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "PREEMPTED"):
        assert state not in slurm.ENDED, state
    for state in ("SUSPENDED", "CONFIGURING", "COMPLETING", "RESIZING", "SIGNALING"):
        assert state not in slurm.ENDED, state


def test_squeue_failing_keeps_the_states_and_is_said_once(scheduler, caplog):
    states = slurm.SqueueStates()
    (scheduler / "squeue.out").write_text("77_0|RUNNING|vm\n")
    states.update()
    (scheduler / "squeue.fail").touch()
    with caplog.at_level(logging.WARNING, logger=slurm.log.name):
        for _ in range(3):
            states.update()
    assert states.get("77_0") == "RUNNING"  # not GONE: squeue did not answer
    said = [r.getMessage() for r in caplog.records if "squeue failed" in r.getMessage()]
    assert said == ["squeue failed (squeue: error: Unable to contact slurm controller): "
                    "job states as they were"]  # fmt: skip
    (scheduler / "squeue.fail").unlink()
    (scheduler / "squeue.out").write_text("")
    states.update()
    assert states.get("77_0") == slurm.GONE


def test_the_wait_ends_for_jobs_that_died_and_takes_the_others_results(scheduler, tmp_path, caplog):
    """Three jobs: one with its result, one squeue says failed and one squeue forgot, both
    without a result. The wait ends (it ended only with the result files before), the two
    become failed JobReturns naming their state, and sacct is never asked."""
    folder = tmp_path / ".submitit"
    done, failed, gone = job(folder, "77_0"), job(folder, "77_1"), job(folder, "77_2")
    finish(done, "the result")
    failed.paths.stderr.write_text("line 1\nslurmstepd: error: Detected 1 oom_kill event\n")
    states = slurm.SqueueStates()
    (scheduler / "squeue.out").write_text("77_0|RUNNING|vm\n77_1|RUNNING|vm\n77_2|RUNNING|vm\n")
    states.update()
    (scheduler / "squeue.out").write_text("77_0|COMPLETED|vm\n77_1|OUT_OF_MEMORY|vm\n")

    started = time.monotonic()
    without = slurm.wait_for_jobs([done, failed, gone], states, result_wait_s=0)
    assert without == {"77_1": "OUT_OF_MEMORY", "77_2": slurm.GONE}
    assert time.monotonic() - started < 10

    with caplog.at_level(logging.ERROR, logger=slurm.log.name):
        returns = [slurm.job_return(j, [f"seed={k}"], without.get(j.job_id))
                   for k, j in enumerate((done, failed, gone))]  # fmt: skip
    assert returns[0] == "the result"
    errors = []
    for ret, state in zip(returns[1:], ("OUT_OF_MEMORY", slurm.GONE), strict=True):
        assert ret.status == JobStatus.FAILED
        with pytest.raises(UncompletedJobError, match=rf"\(state: {state}\)") as raised:
            _ = ret.return_value  # what Hydra raises once every job has ended
        errors.append(str(raised.value))
    assert "oom_kill event" in errors[0]  # the job's error stream
    assert f"Check: {gone.paths.stdout}" in errors[1]  # none: where its output would be
    assert returns[2].overrides == ["seed=2"]
    said = [r.getMessage() for r in caplog.records]
    assert f"job 77_1 ended without a result (state OUT_OF_MEMORY); submitit's logs: " \
           f"{failed.paths.folder}" in said  # fmt: skip
    assert calls(scheduler, "sacct") == []  # submitit's sacct watcher was never asked


def test_a_requeued_job_is_waited_for_until_its_result(scheduler, tmp_path):
    """squeue says REQUEUED while submitit requeues a job that hit its time limit: not an
    end. The wait goes on until the job, run again, writes its result."""
    requeued = job(tmp_path / ".submitit", "78_0")
    (scheduler / "squeue.out").write_text("78_0|REQUEUED|vm\n")
    later = threading.Timer(1.5, finish, (requeued, "after the requeue"))
    later.start()
    try:
        without = slurm.wait_for_jobs([requeued], slurm.SqueueStates(), result_wait_s=0)
    finally:
        later.join()
    assert without == {}
    assert slurm.job_return(requeued, []) == "after the requeue"


def test_an_ended_job_is_given_time_to_show_its_result_file(scheduler, tmp_path):
    """squeue may say COMPLETED before a network file system shows the result file."""
    slow = job(tmp_path / ".submitit", "79_0")
    (scheduler / "squeue.out").write_text("79_0|COMPLETED|vm\n")
    later = threading.Timer(1.5, finish, (slow, "seen late"))
    later.start()
    try:
        without = slurm.wait_for_jobs([slow], slurm.SqueueStates(), result_wait_s=10)
    finally:
        later.join()
    assert without == {}
    assert slurm.job_return(slow, []) == "seen late"


def test_a_job_of_several_tasks_has_results_once_every_task_has_one(tmp_path):
    both = job(tmp_path / ".submitit", "80_0", tasks=(0, 1))
    assert both.num_tasks == 2 and not slurm.has_results(both)
    finish(both, "task 0", task=0)
    assert not slurm.has_results(both)
    finish(both, "task 1", task=1)
    assert slurm.has_results(both)
