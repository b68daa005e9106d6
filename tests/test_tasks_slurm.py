"""``attnlab sweep lengths hydra/launcher=slurm`` on a real SLURM scheduler.

Needs a cluster that answers ``sinfo`` with an idle node; ``bash scripts/slurm_local.sh up``
starts a one-node one on this machine (Debian packages, no accounting). Without one the
whole module is skipped, and ``pytest -ra`` prints why. Every test drives real ``attnlab``
subprocesses on ``preset=tiny`` (one CPU and 1 GB per job) and the scheduler's own
commands (``scontrol requeue``, ``scancel``). 4-5 minutes on 2 cores (7 at load average 8);
``-k 'not time_limit'`` leaves out the slowest (about 1.5 min).

``ATTNLAB_SLURM_PARTITION`` picks the partition (default: the cluster's default one).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
import yaml
from helpers.slurm import (
    Sweep,
    find_partition,
    hydra_job,
    job_info,
    read_json,
    release_if_held,
    run,
    wait_for,
)

pytestmark = pytest.mark.slow


PARTITION, WHY = find_partition()
if PARTITION is None:
    pytest.skip(WHY, allow_module_level=True)

# Whether sacct answers (SLURM accounting): without it, hydra/launcher=slurm reads job states
# from squeue (hydra_plugins/attnlab_slurm/launcher.py).
ACCOUNTING = bool(shutil.which("sacct")) and run("sacct", "-n", "-j", "1").returncode == 0

# Every job: one CPU, no GPU, 1 GB; the job's own SLURM time limit is set per test.
SLURM = [
    "hydra/launcher=slurm",
    "preset=tiny",
    f"hydra.launcher.partition={PARTITION}",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1",
]


@pytest.fixture(scope="module")
def start_sweep(cli_env):
    """``start_sweep(cwd, *overrides)``: a sweep in ``cwd/sweep``; killed and its jobs
    cancelled at the end of the module if still there."""
    started: list[Sweep] = []

    def start(cwd: Path, *args: str) -> Sweep:
        sweep = Sweep(cwd, cli_env, [*SLURM, *args])
        started.append(sweep)
        return sweep

    yield start
    for sweep in started:
        sweep.cleanup()


# -- a: a sweep runs to completion -------------------------------------------------------------


@pytest.fixture(scope="module")
def complete_sweep(tmp_path_factory, start_sweep):
    sweep = start_sweep(
        tmp_path_factory.mktemp("slurm_a"), "seed=0", "hydra.launcher.timeout_min=5"
    )
    sweep.wait(300)
    sweep.elapsed = time.time() - sweep.started
    return sweep


def test_sweep_completes_on_slurm(complete_sweep, attnlab_cli, tmp_path):
    sweep = complete_sweep
    assert sweep.proc.returncode == 0, sweep.tail()
    assert f"sweep {sweep.dir}: 2 job(s) complete, 0 failed or incomplete" in sweep.stdout
    assert "FAILED" not in sweep.stdout
    submission = next(sweep.dir.glob(".submitit/*/*_submission.sh")).read_text()
    assert f"#SBATCH --partition={PARTITION}" in submission
    readers = set()
    for num in (0, 1):
        job = sweep.dir / str(num)
        readers.add(yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["model"]["name"])
        assert read_json(job / "status.json") == {"state": "complete", "step": 30, "error": None}
        assert (job / "eval" / "synthetic-greedy" / "eval.json").is_file()
        assert (job / "eval" / "synthetic-greedy" / "metrics_by_length.csv").is_file()
        job_id = sweep.slurm_id(job)  # a real SLURM array task, not a local process
        assert re.fullmatch(rf"\d+_{num}", job_id), job_id
        assert (sweep.dir / ".submitit" / job_id / f"{job_id}_0_result.pkl").is_file()
    assert readers == {"fixed", "attention"}

    report = attnlab_cli("report", sweep.dir, "--out", tmp_path / "report", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report" / "index.html").stat().st_size > 1000
    assert "Aggregated 2 run(s)" in (tmp_path / "report" / "summary.md").read_text()


# -- e: without accounting, job states from squeue, said once ---------------------------------


def test_sacct_warning_at_most_once(complete_sweep):
    """submitit asks ``sacct`` for job states at every poll; without accounting each poll
    printed a "Bypassing sacct error" warning (twice on stdout, once on stderr) and sacct's
    own "Slurm accounting storage is disabled". attnlab's launcher asks sacct once, and when
    it does not answer says so once and reads the states from squeue: submitit's sacct
    watcher is then never asked."""
    sweep = complete_sweep
    both = sweep.stdout + sweep.stderr
    assert both.count("Bypassing sacct error") <= (1 if ACCOUNTING else 0), sweep.tail()
    assert both.count("accounting storage is disabled") <= 1, sweep.tail()  # in that line
    assert both.count("job states come from squeue") == (0 if ACCOUNTING else 1), sweep.tail()


# -- b: a job requeued in mid-run resumes exactly ----------------------------------------------


def test_requeued_job_resumes_exactly(start_sweep, tmp_path):
    """Two identical jobs; the first is requeued (``scontrol requeue``: SIGTERM, then SIGKILL
    after KillWait) once it has a checkpoint, and must end with the same numbers and weights
    as the second, which ran straight through."""
    steps = 600  # tiny steps: long enough (~20 s) for the test to see it running and requeue it
    sweep = start_sweep(
        tmp_path, "model=attention", "seed=0,0", f"train.steps={steps}",
        "train.checkpoint_every=20", "hydra.launcher.timeout_min=5",
    )  # fmt: skip
    job, ref = sweep.job(0), sweep.job(1)
    last = job / "checkpoints" / "last.pt"
    wait_for(last.is_file, 120, "job 0's first checkpoint", sweep)
    job_id = sweep.slurm_id(job)
    status = read_json(job / "status.json")
    assert status["state"] == "running" and status["step"] < steps, status
    assert run("scontrol", "requeue", job_id).returncode == 0
    wait_for(lambda: release_if_held(job_id), 60, f"{job_id} to be requeued", sweep)

    assert sweep.wait(300) == 0, sweep.tail()
    assert job_info(job_id).get("Restarts", "1") != "0"  # SLURM did restart it
    resumed = re.findall(r"resumed from (\S+) at step (\d+)", (job / "train.log").read_text())
    assert len(resumed) == 1 and resumed[0][0] == str(last), resumed
    assert 0 < int(resumed[0][1]) < steps  # it really stopped in mid-run
    assert "resumed" not in (ref / "train.log").read_text()
    assert read_json(job / "status.json") == {"state": "complete", "step": steps, "error": None}

    got, want = read_json(job / "metrics.json"), read_json(ref / "metrics.json")
    assert got["step"] == want["step"] == steps
    assert got["val"] == want["val"]
    assert got["best"] == want["best"]
    # One CPU a job (cpus_per_task=1, SLURM_CPUS_PER_TASK): one thread each, whatever the
    # other job's load, so the two sum every gradient in the same order.
    assert got["threads"] == want["threads"] == [1]
    model = torch.load(last, weights_only=True)["model"]
    model_ref = torch.load(ref / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert model.keys() == model_ref.keys()
    for name, tensor in model.items():
        assert torch.equal(tensor, model_ref[name]), name
    assert (job / "eval" / "synthetic-greedy" / "eval.json").is_file()
    assert (job / ".lock").is_file() and not _lock_held(job)


def _lock_held(job: Path) -> bool:
    from attnlab.runs.rundir import RunDir

    return RunDir(job).lock_holder() is not None


# -- c: a job that hits its time limit is requeued by submitit and resumes ---------------------


@pytest.fixture(scope="module")
def time_limit_sweep(tmp_path_factory, start_sweep):
    """One job with a one-minute limit whose training alone takes a minute of wall time
    (``train.minutes=1``, its steps left open): the limit comes while it trains, on a fast
    machine as on a slow one. (It trained a step count sized from the complete sweep's
    speed before, and was skipped whenever training then went faster: 2 CI runs of 4.)

    SLURM sends SIGUSR2 ``signal_delay_s`` before the limit, checking every 30 s, so 20 to
    50 s after the start with signal_delay_s=10 (submitit's default of 120 s exceeds a
    one-minute limit: the signal is then due at once and can come before submitit's handler
    exists, which kills the job). submitit checkpoints the launcher call and requeues the
    job; it resumes from last.pt and spends what was left of its minute. The requeued job is
    given 10 minutes: evaluation after training is not resumable, so on a loaded machine
    more one-minute segments might never finish."""
    cwd = tmp_path_factory.mktemp("slurm_c")
    sweep = start_sweep(
        cwd, "model=attention", "seed=0", "train.minutes=1", "train.steps=100000",
        "train.checkpoint_every=20", "hydra.launcher.timeout_min=1",
        "hydra.launcher.signal_delay_s=10",
    )  # fmt: skip
    job = sweep.job(0)
    job_id = sweep.slurm_id(job)
    held_status = []  # status.json as it was while the job waited to run again
    deadline = time.time() + 420
    while sweep.proc.poll() is None and time.time() < deadline:
        if release_if_held(job_id, "timelimit=10"):
            held_status.append(read_json(job / "status.json"))
        time.sleep(1)
    sweep.wait(30)
    sweep.steps = (read_json(job / "status.json") or {}).get("step")  # where the minute ended
    sweep.job_id, sweep.held_status = job_id, held_status
    sweep.elapsed = time.time() - sweep.started
    return sweep


def test_time_limit_requeues_and_resumes(time_limit_sweep):
    sweep = time_limit_sweep
    assert sweep.proc.returncode == 0, sweep.tail()
    assert f"sweep {sweep.dir}: 1 job(s) complete, 0 failed or incomplete" in sweep.stdout
    job = sweep.dir / "0"
    status = read_json(job / "status.json")
    assert {key: status[key] for key in ("state", "step", "error")} == {
        "state": "complete", "step": sweep.steps, "error": None,
    }  # fmt: skip
    budget = read_json(job / "metrics.json")["budget"]  # the minute, spent over two segments
    assert budget["ended_by"] == "minutes" and budget["steps_taken"] == sweep.steps, budget
    assert 0.9 <= budget["minutes_spent"] <= 1.05, budget
    assert (job / "eval" / "synthetic-greedy" / "eval.json").is_file()

    submission = next(sweep.dir.glob(".submitit/*/*_submission.sh")).read_text()
    assert "#SBATCH --time=1\n" in submission and "#SBATCH --signal=USR2@10\n" in submission
    logs = "".join(p.read_text() for p in sweep.dir.glob(f".submitit/{sweep.job_id}/*.out"))
    if "Caught signal SIGUSR2" not in logs:  # the scheduler's check came late: nothing to check
        pytest.skip(
            f"the job trained its minute ({sweep.steps} steps) without SLURM's time-limit "
            "signal: the scheduler's 30-s check came later than 50 s after the start"
        )
    assert "this job is timed-out" in logs, logs[-3000:]
    assert re.search(r"Requeued job \S+ \(\d+ remaining timeouts\)", logs), logs[-3000:]
    assert sweep.held_status, "SLURM never held the requeued job"
    resumed = re.findall(r"resumed from (\S+) at step (\d+)", (job / "train.log").read_text())
    assert resumed and all(path == str(job / "checkpoints" / "last.pt") for path, _ in resumed)
    if all(int(step) == sweep.steps for _, step in resumed):  # timed out while evaluating
        pytest.skip(
            f"the time limit came after the job's minute of training ({sweep.steps} steps), "
            "in its evaluation: the scheduler's 30-s check came late"
        )
    assert all(0 < int(step) < sweep.steps for _, step in resumed), resumed

    # The sweep directory was resolved once: the requeued job wrote into the same one.
    assert sorted(p.name for p in sweep.dir.iterdir() if not p.name.startswith(".")) == [
        "0", "multirun.yaml",
    ]  # fmt: skip
    hydra = hydra_job(job)
    assert hydra["sweep"]["dir"] == str(sweep.dir)
    assert hydra["runtime"]["output_dir"] == str(job)
    assert not (sweep.cwd / "multirun").exists() and not (sweep.cwd / "outputs").exists()


def test_time_limit_status_while_requeued(time_limit_sweep):
    """While the requeued job waits to run again, status.json should not say it failed."""
    held = [s for s in time_limit_sweep.held_status if s]
    if not held:  # the job was never requeued (it beat its limit), or never seen held
        pytest.skip("no status.json seen while SLURM held a requeued job")
    # submitit's requeue ends the process with sys.exit(-1): that is an interruption
    assert all(s["state"] in ("interrupted", "running") for s in held), held


# -- d: a job killed outright is reported as failed, the others complete -----------------------


def test_killed_job_is_reported_and_the_other_completes(start_sweep, tmp_path):
    """Job 0 is killed (``scancel --signal=KILL``: no Python handler runs) while it trains
    and job 1 goes on. The launcher learns that job 0 ended (without accounting, from
    squeue), keeps waiting for job 1, and then the summary lists job 0 as failed. Job 0
    trains far longer than it is let run: a short one could finish before the kill (CI once
    saw it do so, at 300 steps)."""
    sweep = start_sweep(
        tmp_path, "model=attention", "seed=0", "train.steps=5000,300",
        "train.checkpoint_every=20", "hydra.launcher.timeout_min=5",
    )  # fmt: skip
    killed, other = sweep.job(0), sweep.job(1)
    wait_for((killed / "checkpoints" / "last.pt").is_file, 120, "job 0's checkpoint", sweep)
    killed_id = sweep.slurm_id(killed)
    assert run("scancel", "--signal=KILL", killed_id).returncode == 0
    killed_at = time.time()

    def other_done():
        return (read_json(other / "status.json") or {}).get("state") == "complete" and (
            other / "eval" / "synthetic-greedy" / "eval.json"
        ).is_file()

    wait_for(other_done, 240, "job 1 to complete", sweep)
    wait_for(lambda: job_info(killed_id).get("JobState") != "RUNNING", 60, "job 0 to end")
    # A launcher that learns job states ends soon after both: submitit polls the scheduler
    # at most (time since submission) / 2 apart, then waits up to 15 s for the result file
    # that a killed job never writes.
    noticed = killed_at + (killed_at - sweep.started) / 2 + 15
    grace = max(0.0, noticed - time.time()) + 20
    try:
        sweep.proc.wait(grace)
    except subprocess.TimeoutExpired:
        hung = time.time() - killed_at
        sweep.proc.send_signal(signal.SIGINT)  # Ctrl-C: the summary is printed all the same
        sweep.wait(60)
        pytest.fail(
            f"the sweep had not ended {hung:.0f}s after job 0 was killed ({grace:.0f}s after "
            f"job 1 completed): the launcher never learnt that job 0 ended\n{sweep.tail()}"
        )

    out = sweep.stdout
    assert f"job {killed_id} ended without a result" in out + sweep.stderr, sweep.tail()
    assert f"sweep {sweep.dir}: 1 job(s) complete, 1 failed or incomplete" in out, sweep.tail()
    lines = out.splitlines()
    failed = [i for i, ln in enumerate(lines) if "FAILED" in ln]
    assert len(failed) == 1 and str(killed) in lines[failed[0]], out[-3000:]
    logs = [s.strip() for s in lines[failed[0] + 1].split("logs:")[1].split(",")]
    assert Path(logs[0]).is_file(), logs  # the job's own train.log
    assert any(".submitit" in s for s in logs), logs  # and where submitit's logs are
    assert sweep.proc.returncode == 1
    assert (read_json(other / "status.json") or {}).get("state") == "complete"
