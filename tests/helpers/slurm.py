"""The SLURM tests' helpers (tests/test_tasks_slurm.py): which partition has an idle node,
the scheduler's view of a job, and one ``attnlab sweep lengths`` subprocess on SLURM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

JOB_STATES_UP = ("idle", "mix", "mixed")


def run(*cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def find_partition() -> tuple[str | None, str]:
    """A partition with an idle node, or None and why there is none."""
    if not shutil.which("sinfo"):
        return None, "no SLURM here (sinfo not found); bash scripts/slurm_local.sh up starts one"
    try:
        out = run("sinfo", "-h", "-o", "%P|%t", timeout=15)
    except subprocess.TimeoutExpired:
        return None, "sinfo did not answer in 15 s (is slurmctld running?)"
    if out.returncode != 0:
        first = (out.stderr.strip().splitlines() or ["no output"])[0]
        return None, f"no SLURM controller answers (sinfo: {first})"
    rows = [ln.split("|") for ln in out.stdout.split() if "|" in ln]
    wanted = os.environ.get("ATTNLAB_SLURM_PARTITION")
    usable = [p for p, state in rows if state in JOB_STATES_UP]
    if wanted:
        if wanted in {p.rstrip("*") for p in usable}:
            return wanted, ""
        return None, f"partition {wanted} has no idle node (sinfo: {out.stdout.strip()!r})"
    usable.sort(key=lambda p: not p.endswith("*"))  # the default partition first
    if not usable:
        return None, f"no idle SLURM node (sinfo: {out.stdout.strip()!r})"
    return usable[0].rstrip("*"), ""


def wait_for(cond: Callable[[], object], timeout: float, what: str, sweep=None) -> object:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        if sweep is not None and sweep.proc.poll() is not None:
            raise AssertionError(f"the sweep ended (exit {sweep.proc.returncode}) before {what}")
        time.sleep(0.5)
    tail = sweep.tail() if sweep is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")


def job_info(job_id: str) -> dict[str, str]:
    """``scontrol show job``: JobState, Reason, Restarts, ... ({} once SLURM forgot it)."""
    out = run("scontrol", "show", "job", "-o", job_id)
    if out.returncode != 0:
        return {}
    return dict(kv.split("=", 1) for kv in out.stdout.split() if "=" in kv)


def release_if_held(job_id: str, *changes: str) -> bool:
    """A requeued batch job waits about two minutes (Reason=BeginTime) before SLURM starts
    it again; start it now instead (with ``changes``, e.g. ``timelimit=10``). True when it
    was held."""
    info = job_info(job_id)
    if info.get("JobState") == "PENDING" and info.get("Reason") == "BeginTime":
        out = run("scontrol", "update", f"jobid={job_id}", "starttime=now", *changes)
        assert out.returncode == 0, out.stderr
        return True
    return False


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def hydra_job(job: Path) -> dict | None:
    """The job's ``.hydra/hydra.yaml`` (None while Hydra has not finished writing it)."""
    try:
        data = yaml.safe_load((job / ".hydra" / "hydra.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return data.get("hydra") if isinstance(data, dict) else None


class Sweep:
    """One ``attnlab sweep lengths`` subprocess, its output in files, its jobs on SLURM."""

    def __init__(self, cwd: Path, env: dict[str, str], args: list[str]):
        """``args``: the overrides, ``hydra/launcher=slurm`` and its settings included."""
        self.cwd = cwd
        self.dir = cwd / "sweep"
        self.out_path, self.err_path = cwd / "stdout.txt", cwd / "stderr.txt"
        cmd = [sys.executable, "-m", "attnlab.cli", "sweep", "lengths", *args]
        cmd.append(f"hydra.sweep.dir={self.dir}")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        self.started = time.time()

    @property
    def stdout(self) -> str:
        return self.out_path.read_text()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def tail(self) -> str:
        return f"stdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the sweep did not end in {timeout:.0f}s\n{self.tail()}"
            ) from None

    def job(self, num: int, timeout: float = 120) -> Path:
        """Job ``num``'s run directory, once the job has started on SLURM."""
        job = self.dir / str(num)
        wait_for(lambda: hydra_job(job), timeout, f"job {num} to start", self)
        return job

    def slurm_id(self, job: Path) -> str:
        """The SLURM id of a job (``<array id>_<task>``), as submitit gave it to Hydra."""
        return str(hydra_job(job)["job"]["id"])

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        arrays = {p.name.split("_")[0] for p in self.dir.glob(".submitit/*") if p.is_dir()}
        if arrays:
            run("scancel", *sorted(arrays))
