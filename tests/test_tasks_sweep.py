"""``attnlab sweep lengths`` end to end on the tiny config, and the cluster launcher configs.

The sweep runs once per process (conftest's ``tiny_sweep``: real submitit subprocesses, a
few tens of seconds on two cores; test_api.py reads it too); the tests below read what it
left on disk.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

# hydra/launcher=slurm: attnlab's subclass of the plugin's launcher (waits for every job; job
# states from squeue without SLURM accounting); the plugin's own preset keeps the plugin's.
SLURM_LAUNCHER = "hydra_plugins.attnlab_slurm.launcher.SlurmLauncher"
PLUGIN_SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
# Each job uses one torch thread: two parallel jobs on a two-core machine stay fast.
# data.train_lengths is repeated on purpose: sweep.yaml's sweeper params would otherwise
# override preset=tiny's [1, 3] with [1, 8] (see test_sweep_preset_sets_train_lengths).
TINY = ["preset=tiny", "seed=0"]


def job_config(job: Path) -> dict:
    return yaml.safe_load((job / ".hydra" / "config.yaml").read_text())


def jobs_by(sweep: Path, key) -> dict:
    return {
        key(job_config(p.parent.parent)): p.parent.parent
        for p in sweep.glob("*/.hydra/config.yaml")
    }


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_sweep_succeeds(tiny_sweep):
    result, sweep = tiny_sweep
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert f"sweep {sweep}: 2 job(s) complete, 0 failed or incomplete" in result.stdout
    assert "FAILED" not in result.stdout
    assert (sweep / "multirun.yaml").is_file()
    # Real submitit jobs: one folder per job with its pickled result and logs.
    submitted = list((sweep / ".submitit").glob("*/*_result.pkl"))
    assert len(submitted) == 2


@pytest.mark.parametrize("reader", ["fixed", "attention"])
def test_sweep_job_complete(tiny_sweep, reader):
    _, sweep = tiny_sweep
    jobs = jobs_by(sweep, lambda c: c["model"]["name"])
    assert sorted(jobs) == ["attention", "fixed"]
    job = jobs[reader]
    status = json.loads((job / "status.json").read_text())
    assert status == {"state": "complete", "step": 30, "error": None}
    # Under submitit_local each job has one thread, recorded in its config (train.threads=0
    # is resolved to the number the job ran with) and shown in the report's run table.
    assert job_config(job)["train"]["threads"] == 1
    metrics = json.loads((job / "metrics.json").read_text())
    assert metrics["reader"] == reader
    assert metrics["step"] == 30 and metrics["seen_lengths"] == [1, 2, 3]
    assert sorted(metrics["val"]["by_length"]) == ["1", "2", "3"]
    for name in ("best.pt", "last.pt"):
        assert (job / "checkpoints" / name).stat().st_size > 10_000

    table = read_csv(job / "eval" / "synthetic-greedy" / "metrics_by_length.csv")
    per_length = [r for r in table if r["length"].isdigit()]
    assert [int(r["length"]) for r in per_length] == [1, 2, 3, 4, 5, 6]  # 1 .. 2 x longest
    assert [r["split"] for r in per_length] == ["seen"] * 3 + ["unseen"] * 3
    assert {int(r["n"]) for r in per_length} == {24}  # eval.n of preset=tiny
    for row in per_length:
        assert 0 <= float(row["exact_acc"]) <= 1 and float(row["cer"]) >= 0
    totals = {r["split"]: int(r["n"]) for r in table if not r["length"].isdigit()}
    assert totals == {"seen": 72, "unseen": 72}

    maps = list((job / "eval" / "synthetic-greedy").glob("maps/*.png"))
    if reader == "attention":
        assert maps
    else:
        assert maps == []  # the fixed-context reader has no attention weights


def test_report_of_sweep(tiny_sweep, attnlab_run, tmp_path):
    _, sweep = tiny_sweep
    result = attnlab_run("report", sweep, "--out", tmp_path / "report", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    index = tmp_path / "report" / "index.html"
    assert index.stat().st_size > 1000
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "Aggregated 2 run(s)" in summary
    assert "fixed exact %" in summary and "attention exact %" in summary
    tables, paired = summary.split("## Paired differences")
    rows = [ln for ln in tables.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [ln.split("|")[1].strip() for ln in rows] == ["1", "2", "3", "4", "5", "6"]
    # The lab's default comparison, on the same strips: attention - fixed, per length.
    assert "A = attention, B = fixed; eval synthetic-greedy; 1 seed pair(s)" in paired
    diffs = read_csv(tmp_path / "report" / "comparisons.csv")
    assert [r["length"] for r in diffs] == ["1", "2", "3", "4", "5", "6", "all", "all"]


@pytest.mark.slow
def test_failed_job_does_not_lose_the_others(attnlab_cli, tmp_path):
    # The failing job comes first: the next must still run. Its config passes every check
    # (a bad value is refused before any job starts: test_tasks_sweep_checks.py); its loss
    # turns non-finite at its second step.
    sweep = tmp_path / "s2"
    result = attnlab_cli(
        "sweep", "lengths", *TINY, "model=attention", "optim.lr=1e30,0.003",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 1, (result.stdout[-3000:], result.stderr[-3000:])
    jobs = jobs_by(sweep, lambda c: c["optim"]["lr"])
    assert sorted(jobs) == [0.003, 1e30]

    good = jobs[0.003]
    assert json.loads((good / "status.json").read_text())["state"] == "complete"
    # The default launcher (hydra/launcher=parallel) divides the CPUs between its jobs.
    from attnlab.runtime import local_jobs, usable_cpus

    threads = job_config(good)["train"]["threads"]
    assert threads >= 1 and (local_jobs() == 1 or threads * local_jobs() <= usable_cpus())
    from attnlab.report import discover_runs

    assert [r.threads for r in discover_runs([sweep]) if r.path == good] == [threads]
    assert (good / "eval" / "synthetic-greedy" / "metrics_by_length.csv").is_file()

    bad = json.loads((jobs[1e30] / "status.json").read_text())
    assert bad["state"] == "failed" and bad["step"] < 10
    assert "non-finite loss" in bad["error"]
    assert not (jobs[1e30] / "checkpoints" / "last.pt").exists()

    assert f"sweep {sweep}: 1 job(s) complete, 1 failed or incomplete" in result.stdout
    lines = result.stdout.splitlines()
    failed = [i for i, ln in enumerate(lines) if "FAILED" in ln]
    assert len(failed) == 1 and str(jobs[1e30]) in lines[failed[0]]
    assert "non-finite loss" in lines[failed[0]]
    logs = lines[failed[0] + 1].split("logs:")[1].split(",")
    assert logs and all(Path(log.strip()).is_file() for log in logs), lines[failed[0] + 1]
    assert "Traceback" not in result.stderr


def test_sweep_preset_sets_train_lengths(attnlab_run, tmp_path):
    # optim.lr=1e30 makes each job stop at its second step (a non-finite loss), after it
    # wrote its config (train.steps=0 is refused before any job starts). In this process,
    # on hydra/launcher=basic: the composition is what is tested, not the launcher.
    sweep = tmp_path / "s3"
    result = attnlab_run(
        "sweep", "lengths", "preset=tiny", "seed=0", "model=fixed", "optim.lr=1e30",
        "hydra/launcher=basic", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    (job,) = [p.parent.parent for p in sweep.glob("*/.hydra/config.yaml")]
    assert job_config(job)["data"]["train_lengths"] == [1, 3]


def test_slurm_launcher_cfg_hydra(attnlab_run, tmp_path):
    overrides = ["hydra/launcher=slurm", "preset=gpu", "hydra.launcher.partition=gpu"]
    result = attnlab_run("sweep", "lengths", *overrides, "--cfg", "hydra", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    launcher = yaml.safe_load(result.stdout)["hydra"]["launcher"]
    assert launcher["_target_"] == SLURM_LAUNCHER and launcher["partition"] == "gpu"
    assert launcher["gpus_per_node"] == 1 and launcher["max_num_timeout"] == 3
    assert not list(tmp_path.iterdir())


def test_slurm_launcher_composes():
    """The same composition as the CLI test above, through Hydra's compose API."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    from attnlab.tasks.compose import compose

    overrides = ["hydra/launcher=slurm", "preset=gpu", "hydra.launcher.partition=gpu"]
    cfg = compose(overrides, "sweep", hydra=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == SLURM_LAUNCHER
    assert launcher.partition == "gpu"
    assert launcher.gpus_per_node == 1 and launcher.max_num_timeout == 3
    assert cfg.train.device == "cuda" and cfg.train.batch_size == 1024  # preset=gpu

    plain = compose(["hydra/launcher=submitit_slurm"], "sweep", hydra=True)
    assert plain.hydra.launcher._target_ == PLUGIN_SLURM_LAUNCHER

    # Hydra instantiates only the launchers its scan of the hydra_plugins namespace package
    # found (in an editable install too, next to the submitit plugin's).
    found = {f"{c.__module__}.{c.__name__}": c for c in Plugins.instance().discover(Launcher)}
    assert SLURM_LAUNCHER in found, sorted(found)
    # By name: Hydra's scan may load a plugin module afresh, so class objects can differ.
    bases = {f"{c.__module__}.{c.__name__}" for c in found[SLURM_LAUNCHER].__mro__}
    assert PLUGIN_SLURM_LAUNCHER in bases, sorted(bases)


def _children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (from /proc: the loky workers of a sweep)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while listed
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop_sweep(args: list[str], sweep: Path, ready, cwd: Path, env) -> None:
    """Starts ``attnlab sweep lengths ARGS`` (default launcher), sends SIGTERM to its main
    process once ``ready()``, and checks that it fails and leaves no worker process."""
    import signal
    import subprocess
    import sys
    import time

    cmd = [sys.executable, "-m", "attnlab.cli", "sweep", "lengths", *args,
           f"hydra.sweep.dir={sweep}"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.time() + 240
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the jobs did not get there"
            time.sleep(0.1)
        workers = _children(proc.pid)
        assert workers
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, (out[-2000:], err[-2000:])
    deadline = time.time() + 30
    while any(_alive(pid) for pid in workers):
        assert time.time() < deadline, "worker processes still running after the sweep ended"
        time.sleep(0.2)


@pytest.mark.slow
def test_sigterm_to_the_sweep_ends_its_workers(tmp_path, cli_env):
    """``kill PID`` of a sweep on the default launcher (hydra/launcher=parallel): every job
    records itself interrupted and no worker process is left training."""
    sweep = tmp_path / "s5"
    # Three jobs on two workers: the third must never start once the sweep is stopped.
    args = ["preset=tiny", "model=fixed", "seed=0,1,2", "hydra.launcher.n_jobs=2",
            "train.steps=100000"]  # fmt: skip
    both_training = lambda: len(list(sweep.glob("*/checkpoints/last.pt"))) == 2  # noqa: E731
    _stop_sweep(args, sweep, both_training, tmp_path, cli_env)
    jobs = sorted(p.parent for p in sweep.glob("*/status.json"))
    assert len(jobs) == 2, jobs  # the queued job never started
    for job in jobs:
        status = json.loads((job / "status.json").read_text())
        assert status["state"] == "interrupted", status
        assert (job / "checkpoints" / "last.pt").is_file()  # it resumes from here


@pytest.mark.slow
def test_sigterm_during_a_jobs_evaluation_records_it_interrupted(tmp_path, cli_env):
    sweep = tmp_path / "s6"
    status = sweep / "0" / "status.json"

    def evaluating() -> bool:  # training is complete, the evaluation (long: eval.n) is not
        try:
            return json.loads(status.read_text())["state"] == "complete"
        except (OSError, ValueError):
            return False

    args = ["preset=tiny", "model=fixed", "seed=0", "eval.n=20000"]
    _stop_sweep(args, sweep, evaluating, tmp_path, cli_env)
    got = json.loads(status.read_text())
    assert got["state"] == "interrupted" and got["error"].startswith("evaluation: Interrupted")
    assert not (sweep / "0" / "eval" / "synthetic-greedy").exists()  # no partial evaluation


@pytest.mark.slow
def test_ctrl_c_to_the_sweeps_process_group_ends_every_job_interrupted(tmp_path, cli_env):
    """A terminal's Ctrl-C: SIGINT to the whole foreground process group (the sweep and its
    loky workers) once both jobs have trained a few steps. Each job saves last.pt at the
    step it stopped (status.json says so), the summary prints the command that resumes the
    sweep, and no worker is left (before: 'killed at step 0', status 'running', no last.pt)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from attnlab.runs import checkpoint

    sweep = tmp_path / "s7"
    args = ["train.steps=100000", "train.checkpoint_every=1000", "hydra.launcher.n_jobs=2"]
    cmd = [sys.executable, "-m", "attnlab.cli", "sweep", "lengths", *TINY, *args]
    cmd.append(f"hydra.sweep.dir={sweep}")
    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=cli_env, stdout=pipe, stderr=pipe, text=True,
        start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal,
    )  # fmt: skip

    def trained_some() -> bool:  # both jobs past step 5, far from a checkpoint (every 1000)
        logs = list(sweep.glob("*/train.log"))
        return len(logs) == 2 and all("step 5/100000" in log.read_text() for log in logs)

    try:
        deadline = time.time() + 240
        while not trained_some():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the jobs did not get there"
            time.sleep(0.1)
        workers = _children(proc.pid)
        assert workers
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    jobs = sorted(p.parent for p in sweep.glob("*/status.json"))
    assert len(jobs) == 2, jobs
    for job in jobs:
        status = json.loads((job / "status.json").read_text())
        assert status["state"] == "interrupted", status
        assert status["error"] == "interrupted (Ctrl-C)", status
        assert status["step"] >= 5
        assert checkpoint.load(job / "checkpoints" / "last.pt").step == status["step"]
        assert f"  interrupted {job}: interrupted (Ctrl-C)\n" in out  # listed as what it is
    assert "FAILED" not in out
    assert "0 job(s) complete, 2 failed or incomplete (2 interrupted)" in out
    assert f"  resume the sweep with: attnlab sweep lengths {' '.join(TINY)}" in out
    deadline = time.time() + 30
    while any(_alive(pid) for pid in workers):
        assert time.time() < deadline, "worker processes still running after the sweep ended"
        time.sleep(0.2)


def ctrl_c_as_in_a_terminal() -> None:
    """In the child, before exec: SIGINT's default action, as in a terminal's foreground
    job. A process started with ``&`` from a non-interactive shell (a CI script) inherits
    SIGINT ignored, and every Ctrl-C sent to it would be lost."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ctrl_c_ignored() -> None:
    """In the child, before exec: SIGINT ignored, as ``attnlab ... &`` from a script gets it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize(
    "after_s, before_exec",
    [(0.3, ctrl_c_as_in_a_terminal), (1.5, ctrl_c_ignored)],
    ids=["workers-starting", "started-with-sigint-ignored"],
)
def test_ctrl_c_while_the_workers_start_ends_130_with_every_job_interrupted(
    tmp_path, cli_env, after_s, before_exec
):
    """A Ctrl-C to the sweep's process group while loky's workers are still starting (before:
    exit 1, TerminatedWorkerError, no status, no resume line): exit 130, every job that has a
    run directory interrupted, the command that resumes the sweep, no worker left. The same
    when attnlab was started with SIGINT ignored (``&`` from a script): a Ctrl-C to its group
    still stops it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    sweep = tmp_path / "s8"
    cmd = [sys.executable, "-m", "attnlab.cli", "sweep", "lengths", *TINY, "train.steps=100000",
           "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=before_exec,
    )  # fmt: skip
    try:
        deadline = time.time() + 120
        while not (sweep / "multirun.yaml").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the sweep did not start"
            time.sleep(0.01)
        time.sleep(after_s)
        workers = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out[-2000:], err[-3000:])
    assert "Traceback" not in err and "TerminatedWorkerError" not in err, err[-3000:]
    assert "FAILED" not in out, out[-2000:]
    for status in sweep.glob("*/status.json"):
        assert json.loads(status.read_text())["state"] == "interrupted", status.read_text()
        assert f"  interrupted {status.parent}: interrupted (Ctrl-C)" in out
    assert f"  resume the sweep with: attnlab sweep lengths {' '.join(TINY)}" in out, out
    deadline = time.time() + 30
    while any(_alive(pid) for pid in workers | _children(proc.pid)):
        assert time.time() < deadline, "worker processes still running after the sweep ended"
        time.sleep(0.2)
