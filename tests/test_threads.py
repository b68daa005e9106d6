"""A busy machine and a GPU machine: threads that follow the free CPUs (attnlab.threads), the
contention bench section, and the sweep launcher's GPU slots, tested on CPU with a simulated
device list (ATTNLAB_FAKE_GPUS)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from attnlab.bench import contention
from attnlab.errors import UserError
from attnlab.report.build import build_report
from attnlab.report.discover import discover_runs
from attnlab.runtime import cgroup_cpus, gpu_ids, local_jobs, usable_cpus
from attnlab.threads import ThreadGovernor, adapt_once, threads_for

TINY = ["preset=tiny", "train.progress=plain"]
TWO_CPUS = pytest.mark.skipif(usable_cpus() < 2, reason="needs 2 usable CPUs")


def test_threads_for_free_cpus():
    assert threads_for(1.95, 2) == 2  # idle: today's count
    assert threads_for(0.67, 2) == 1  # 2 burners beside a 1-thread run on 2 CPUs
    assert threads_for(0.0, 4) == 1 and threads_for(7.9, 4) == 4 and threads_for(None, 3) == 3


def test_cgroup_quota(tmp_path):
    (tmp_path / "a").write_text("150000 100000\n")
    (tmp_path / "b").write_text("max 100000\n")
    assert cgroup_cpus(tmp_path / "a") == 1.5
    assert cgroup_cpus(tmp_path / "b") is None and cgroup_cpus(tmp_path / "c") is None


def test_a_slurm_job_keeps_to_the_cpus_it_was_given(monkeypatch):
    """SLURM_CPUS_PER_TASK caps the usable CPUs even where the cluster does not confine the
    job (task/none); an unset, empty or malformed value caps nothing."""
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    free = usable_cpus()
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert usable_cpus() == 1
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", str(free + 5))
    assert usable_cpus() == free
    for bad in ("", "0", "two", "-1"):
        monkeypatch.setenv("SLURM_CPUS_PER_TASK", bad)
        assert usable_cpus() == free, bad


@TWO_CPUS
def test_governor_drops_to_one_thread_beside_a_burner_per_cpu():
    saved = torch.get_num_threads()
    procs = contention.burners(usable_cpus(), 10)
    try:
        governor = ThreadGovernor(cap=usable_cpus(), every_s=0)
        time.sleep(0.5)  # the burners running while it measures
        assert governor.tick() == 1 and torch.get_num_threads() == 1
        torch.set_num_threads(saved)
        assert adapt_once() == 1 and torch.get_num_threads() == 1  # what `attnlab eval` does
    finally:
        for p in procs:
            p.kill()
            p.wait()
        torch.set_num_threads(saved)


def test_trained_run_records_policy_threads_and_device(trained):
    cfg = OmegaConf.load(trained["attention"] / ".hydra" / "config.yaml")
    metrics = json.loads((trained["attention"] / "metrics.json").read_text())
    assert cfg.train.thread_policy == "adaptive" and cfg.train.threads >= 1
    assert metrics["device"] == "cpu" and 1 <= min(metrics["threads"])
    assert max(metrics["threads"]) <= cfg.train.threads


@TWO_CPUS
def test_contention_section(capsys):
    r = contention.one_reader("fixed", "cpu", 0.2, TINY)
    rows = r["rows"]
    assert r["burners"] == usable_cpus()
    assert rows["1 thread"]["loaded"]["threads"] == [1]
    assert rows["default"]["loaded"]["threads"][0] == 1  # the load was there from its start
    assert rows["fixed default"]["loaded"]["threads"] == [contention.IDLE_THREADS]
    loaded = rows["default"]["loaded"]["strips_per_s"] / rows["1 thread"]["loaded"]["strips_per_s"]
    assert r["loaded_ratio"] == pytest.approx(loaded, abs=0.001)
    contention.show([r], "cpu", TINY)
    out = capsys.readouterr().out
    assert "loaded, default / 1 thread = " in out and "fixed default" in out


def sweep_on_fake_gpus(tmp_path: Path, cli_env: dict, gpus: str, per_gpu: int) -> list:
    """A 2-reader tiny sweep (2 steps) with ATTNLAB_FAKE_GPUS=gpus; its runs (discovered)."""
    sweep = tmp_path / f"gpus{gpus.replace(',', '_')}-{per_gpu}"
    args = ["sweep", "lengths", *TINY, "seed=0", "train.steps=2", "train.threads=1",
            f"hydra.launcher.jobs_per_gpu={per_gpu}", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    res = subprocess.run([sys.executable, "-m", "attnlab.cli", *args], cwd=tmp_path,
                         env={**cli_env, "ATTNLAB_FAKE_GPUS": gpus}, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return discover_runs([sweep])


def test_jobs_at_once_from_the_gpus(monkeypatch):
    monkeypatch.setenv("ATTNLAB_FAKE_GPUS", "0,1")
    assert gpu_ids() == ["0", "1"] and local_jobs() == 2 and local_jobs(3) == 6
    monkeypatch.setenv("ATTNLAB_FAKE_GPUS", "3")
    assert local_jobs(2) == 2  # the two jobs of the sweep below: one round
    with pytest.raises(UserError, match="jobs_per_gpu"):
        local_jobs(0)


@pytest.mark.slow
def test_sweep_gives_each_job_its_own_gpu(tmp_path, cli_env):
    runs = sweep_on_fake_gpus(tmp_path, cli_env, "0,1", 1)
    assert sorted(r.device for r in runs) == ["cpu [GPU 0]", "cpu [GPU 1]"]
    index = build_report([runs[0].sweep], tmp_path / "report").read_text()  # the run table
    assert "<td>cpu [GPU 0]</td>" in index and "<td>cpu [GPU 1]</td>" in index


@pytest.mark.slow
def test_sweep_jobs_share_a_gpu_when_asked(tmp_path, cli_env):
    runs = sweep_on_fake_gpus(tmp_path, cli_env, "3", 2)
    assert [r.device for r in runs] == ["cpu [GPU 3]", "cpu [GPU 3]"]
