"""Faults of run directories and bad input: nothing lost, nothing silent, one line and exit
status 2. Each test here failed before its fix (the issue's numbered items in brackets).
Config values are in test_faults_config.py, folder data and ``attnlab read`` faults in
test_data_images.py; a real SLURM cluster in test_tasks_slurm.py.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest
import torch
from helpers.runs import TINY, busy_run, one_line_error, run_limited, start_training, wait_for

pytestmark = pytest.mark.slow  # nearly every test trains a tiny run in a subprocess

# --- [2] one process per run directory --------------------------------------------------------


def test_a_second_process_in_a_busy_run_directory_is_refused(tmp_path, attnlab_run):
    run = tmp_path / "run"
    with busy_run(run, "train.steps=100000", "train.checkpoint_every=100"):
        second = attnlab_run("train", *TINY, "seed=1", f"hydra.run.dir={run}", cwd=tmp_path)
        one_line_error(second, "in use", "train, pid")
        evaluation = attnlab_run("eval", run, "eval.n=4", cwd=tmp_path)
        assert evaluation.returncode == 2  # no best.pt yet, or the run is locked: never mixed
    # A dead process holds no lock: the run resumes at once (to a shorter end, to be quick).
    res = attnlab_run("train", *TINY, "train.steps=20", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr


# --- [3] a refused command leaves a finished run as it was ------------------------------------


@pytest.mark.parametrize(
    "override, mentions",
    [("model=fixed", "another model config"), ("train.steps=0", "train.steps")],
)
def test_a_refused_command_leaves_a_finished_run_untouched(
    override, mentions, trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])

    def files() -> dict[Path, bytes]:
        skip = ("train.log", ".lock")  # the log says what was refused; the lock is free again
        return {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name not in skip}

    before = files()
    res = attnlab_run("train", *TINY, override, f"hydra.run.dir={run}", cwd=tmp_path)
    one_line_error(res, mentions)
    after = files()
    assert sorted(after) == sorted(before)
    changed = [str(p.relative_to(run)) for p in before if before[p] != after[p]]
    assert changed == []
    assert json.loads((run / "status.json").read_text())["state"] == "complete"
    assert "refused" in (run / "train.log").read_text()


# --- [5] files readable by colleagues --------------------------------------------------------


def test_every_file_a_run_an_evaluation_and_a_report_leave_is_readable_by_others(
    tmp_path, attnlab_run
):
    run = tmp_path / "run"
    old = os.umask(0o022)
    try:  # the subprocesses inherit the umask
        assert attnlab_run("train", *TINY, f"hydra.run.dir={run}", cwd=tmp_path).returncode == 0
        assert attnlab_run("eval", run, "eval.n=6", cwd=tmp_path).returncode == 0
        res = attnlab_run("report", run, "--out", tmp_path / "report", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        export = attnlab_run("data", "export", tmp_path / "x", "--n", "2", cwd=tmp_path)
        assert export.returncode == 0, export.stderr
    finally:
        os.umask(old)
    files = [p for root in (run, tmp_path / "report", tmp_path / "x") for p in root.rglob("*")]
    files = [p for p in files if p.is_file()]
    assert len(files) > 20
    unreadable = [str(p) for p in files if not p.stat().st_mode & stat.S_IROTH]
    assert unreadable == []
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in files if p.name != ".lock")


# --- [6] status after a signal, stale runs ------------------------------------------------------


def test_sigterm_records_interrupted_with_the_step_and_the_run_resumes(tmp_path, attnlab_run):
    run = tmp_path / "run"
    run.mkdir()
    proc = start_training(run, "train.steps=400", "train.checkpoint_every=10")
    wait_for(run / "checkpoints" / "last.pt", proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "interrupted" and status["step"] >= 10, status
    res = attnlab_run("train", *TINY, "train.steps=30", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "resumed from" in (run / "train.log").read_text()


def test_a_killed_run_is_reported_stale_with_its_last_checkpoint_step(tmp_path, attnlab_run):
    run = tmp_path / "run"
    run.mkdir()
    proc = start_training(run, "train.steps=400", "train.checkpoint_every=10")
    wait_for(run / "checkpoints" / "last.pt", proc)
    deadline = time.time() + 60
    while json.loads((run / "status.json").read_text())["step"] < 10:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    status = json.loads((run / "status.json").read_text())
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    # The status follows every checkpoint (a kill may fall between the two writes).
    assert status["state"] == "running" and status["step"] % 10 == 0
    assert 0 < status["step"] <= ckpt["step"] <= status["step"] + 10
    res = attnlab_run("report", run, "--out", tmp_path / "report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "stale" in (tmp_path / "report" / "summary.md").read_text()


# --- [7] orphans, re-runs, logs ----------------------------------------------------------------


def test_rerunning_a_finished_run_cleans_orphans_and_keeps_its_timing(
    trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    orphan = run / "checkpoints" / ".last.pt.abc123.tmp"
    orphan.write_bytes(b"half a checkpoint")
    before = json.loads((run / "metrics.json").read_text())
    res = attnlab_run("train", *TINY, f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    after = json.loads((run / "metrics.json").read_text())
    assert not orphan.exists()
    assert before["elapsed_s"] > 0 and after["elapsed_s"] == before["elapsed_s"]
    assert after["strips_per_s"] == before["strips_per_s"] > 0


def test_a_run_refused_at_start_says_why_on_stderr_and_writes_nothing(tmp_path, attnlab_run):
    run = tmp_path / "run"
    res = attnlab_run("train", *TINY, "model.stride=3", f"hydra.run.dir={run}", cwd=tmp_path)
    one_line_error(res, "stride")  # the reason, on stderr
    # A value refused by the checks writes nothing into the run (#24, #25): no train.log (the
    # job log is lazy), no status, no .hydra/, no lock; a sweep job still records "failed"
    # and its reason for the sweep summary (test_tasks_sweep.py).
    assert not run.exists() or not any(run.iterdir()), sorted(run.iterdir())


# --- [10] paths are data ---------------------------------------------------------------------


def test_paths_with_commas_quotes_and_non_ascii_characters(
    trained, attnlab_run, tmp_path, copy_run
):
    run = copy_run(trained["attention"], name="rün, it's [1]")
    folder = tmp_path / "strïps, 'x'"
    res = attnlab_run("data", "export", folder, "--n", "4", "--lengths", "2-3", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (folder / "labels.csv").is_file()
    res = attnlab_run("eval", run, "--folder", folder, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (out,) = (run / "eval").glob(f"folder-{folder.name}-*-greedy")
    assert (out / "eval.json").is_file()


# --- [11] full disk, files in the way ----------------------------------------------------------


def test_a_full_disk_is_one_line_naming_the_file_and_loses_nothing(
    trained, copy_run, tmp_path, cli_env
):
    run = tmp_path / "run"
    res = run_limited(["train", *TINY, f"hydra.run.dir={run}"], tmp_path, 100_000, cli_env)
    one_line_error(res, "cannot write", ".pt")
    assert not list((run / "checkpoints").glob(".*.tmp"))

    done = copy_run(trained["attention"], name="done")
    res = run_limited(["eval", done, "eval.n=30"], tmp_path, 20_000, cli_env)
    one_line_error(res, "cannot write")
    assert not (done / "eval").exists() or list((done / "eval").iterdir()) == []

    res = run_limited(["report", trained["attention"], "--out", tmp_path / "rep"], tmp_path,
                      20_000, cli_env)  # fmt: skip
    one_line_error(res, "cannot write")

    res = run_limited(["data", "export", tmp_path / "ex", "--n", "30"], tmp_path, 100, cli_env)
    one_line_error(res, "cannot write")


def test_outputs_that_would_land_on_something_else_are_refused(trained, attnlab_run, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    one_line_error(attnlab_run("report", trained["fixed"], "--out", a_file, cwd=tmp_path), "--out")
    one_line_error(attnlab_run("data", "export", a_file, "--n", "2", cwd=tmp_path), "export.out")
    res = attnlab_run("data", "preview", f"preview.out={tmp_path}", cwd=tmp_path)
    one_line_error(res, "preview.out")
    assert a_file.read_text() == "keep me"


def test_the_sweep_summary_calls_a_killed_job_killed_and_names_its_own_logs(tmp_path):
    from attnlab.runs.rundir import RunDir, RunStatus
    from attnlab.tasks.sweep import job_logs, summarize

    sweep = tmp_path / "sweep"
    states = [RunStatus.complete, RunStatus.running, RunStatus.interrupted, RunStatus.complete]
    for i, state in enumerate(states):
        job = RunDir(sweep / str(i))
        job.config.parent.mkdir(parents=True)
        job.config.write_text("seed: 0\n")
        (job.config.parent / "hydra.yaml").write_text(f"hydra:\n  job:\n    id: '7_{i}'\n")
        job.write_status(state, 40, None if i != 2 else "interrupted (SystemExit)")
        (sweep / ".submitit" / f"7_{i}").mkdir(parents=True)
        (sweep / ".submitit" / f"7_{i}" / f"7_{i}_0_log.err").write_text("")
        job.metrics_file.write_text("{}")
    # job 0 was evaluated after its training; job 3 was killed outright while it evaluated:
    # "complete" (training's word), and only an evaluation from before its training ended
    old = RunDir(sweep / "3").eval_dir("synthetic-greedy")
    old.path.mkdir(parents=True)
    old.meta_file.write_text("{}")
    os.utime(old.meta_file, (1, 1))
    RunDir(sweep / "0").eval_dir("synthetic-greedy").path.mkdir(parents=True)
    RunDir(sweep / "0").eval_dir("synthetic-greedy").meta_file.write_text("{}")
    done, failed = summarize(sweep)
    assert done == [sweep / "0"]
    assert failed[0] == (sweep / "1", "killed at step 40 (no process holds the run)")
    assert failed[1][1].startswith("interrupted: interrupted (SystemExit)")
    assert failed[2] == (
        sweep / "3",
        "killed while evaluating: training complete at step 40, 0 of its 1 evaluation(s) written",
    )
    with RunDir(sweep / "3").lock("eval"):  # still evaluating
        assert summarize(sweep)[1][2][1].startswith("running: evaluating")
    assert job_logs(sweep / "1", sweep) == [sweep / ".submitit" / "7_1" / "7_1_0_log.err"]
    with RunDir(sweep / "1").lock("train"):  # a live process: not killed, running
        assert summarize(sweep)[1][0][1].startswith("running")


def test_resuming_to_fewer_steps_than_done_says_so(trained, copy_run, attnlab_run, tmp_path):
    run = copy_run(trained["attention"])
    log = (run / "train.log").read_bytes()
    res = attnlab_run("train", *TINY, "train.steps=1", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "nothing to train" in res.stdout + res.stderr
    assert (run / "train.log").read_bytes() == log  # a finished run is left as it was
