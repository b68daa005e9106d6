"""Where and how computation runs: device choice, CPU threads, and SIGTERM."""

from __future__ import annotations

import math
import os
import signal
import threading
from pathlib import Path

import torch

from attnlab.errors import UserError


def resolve_device(name: str) -> torch.device:
    """``auto`` = CUDA when present, else CPU; ``cuda`` without a GPU is a clear error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise UserError(f"device: {name!r} is not a device (auto, cpu, cuda, cuda:N)") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device: {name!r} asked for, but no CUDA GPU is available here")
    return device


def bf16_autocast(bf16: bool | None, device: torch.device) -> bool:
    """Whether a run autocasts to bf16 on ``device``: ``train.bf16`` true = yes, on any device
    that supports it (CPU included); false = no; null (the default) = on CUDA only, so that
    default CPU runs compute in float32 as they always have."""
    if bf16 is None:
        return device.type == "cuda" and torch.cuda.is_bf16_supported()
    if not bf16:
        return False
    return device.type == "cpu" or (device.type == "cuda" and torch.cuda.is_bf16_supported())


def autocast(device: torch.device | str, enabled: bool) -> torch.autocast:
    """bf16 autocast on the device's own type (a no-op when not ``enabled``)."""
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=enabled)


# Memory one training job may take at its peak (a default run peaks below 1 GiB, most of it
# the transient of building the glyph bank): a sweep runs no more jobs at once than fit.
JOB_MEMORY_GIB = 1.5


def cgroup_cpus(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> float | None:
    """The cgroup v2 CPU quota in CPUs ("200000 100000" = 2.0), None when unlimited or absent."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def slurm_cpus() -> int | None:
    """The CPUs SLURM gave this job's task (``SLURM_CPUS_PER_TASK``, set by ``--cpus-per-task``),
    None outside a job or when unset. A cluster without ``task/affinity`` or cgroups (ours:
    scripts/slurm_local.sh) does not confine a job to them; the job keeps to them itself."""
    value = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (e.g. a container's share), no more
    than its cgroup CPU quota nor the CPUs SLURM gave its task."""
    if hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count() or 1
    if (quota := cgroup_cpus()) is not None:
        cpus = min(cpus, math.floor(quota))
    if (given := slurm_cpus()) is not None:
        cpus = min(cpus, given)
    return max(1, cpus)


def available_memory_gib() -> float | None:
    """MemAvailable (Linux), None elsewhere."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


# A simulated device list for tests without a GPU ("0,1"): read wherever CUDA GPUs are listed.
FAKE_GPUS = "ATTNLAB_FAKE_GPUS"
# GPU memory one default training job takes at its peak, measured (scripts/gpu_check.sh prints
# it): None until measured, and then one job per GPU.
JOB_GPU_MEMORY_GIB: float | None = None


def gpu_ids() -> list[str]:
    """The GPUs a sweep hands out (the ids CUDA_VISIBLE_DEVICES takes); [] without CUDA."""
    if (fake := os.environ.get(FAKE_GPUS)) is not None:
        return [x.strip() for x in fake.split(",") if x.strip()]
    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    return [x for x in visible if x][:count] or [str(i) for i in range(count)]


def jobs_per_gpu(setting: int | None = None) -> int:
    """Sweep jobs sharing one GPU: ``setting`` (hydra.launcher.jobs_per_gpu) when given, else
    as many as the smallest GPU's memory holds at JOB_GPU_MEMORY_GIB each; 1 when unknown."""
    if setting is not None:
        if setting < 1:
            raise UserError(f"hydra.launcher.jobs_per_gpu: {setting} must be >= 1 (or null)")
        return setting
    if JOB_GPU_MEMORY_GIB is None or os.environ.get(FAKE_GPUS) is not None:
        return 1
    if not torch.cuda.is_available():
        return 1
    gib = min(
        torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())
    )
    return max(1, int(gib / 2**30 // JOB_GPU_MEMORY_GIB))


def local_jobs(per_gpu: int | None = None) -> int:
    """Sweep jobs to run at once on this machine (conf/hydra/launcher/parallel.yaml). With
    GPUs: jobs_per_gpu(per_gpu) on each (the launcher gives each job its GPU through
    CUDA_VISIBLE_DEVICES). Without: one per usable CPU, no more than the available memory
    holds (JOB_MEMORY_GIB each); each job then runs with CPUs // jobs torch threads (joblib
    sets OMP_NUM_THREADS in its workers), so jobs x threads never exceeds the CPUs."""
    if gpus := gpu_ids():
        return len(gpus) * jobs_per_gpu(per_gpu)
    jobs = usable_cpus()
    memory = available_memory_gib()
    if memory is not None:
        jobs = min(jobs, int(memory // JOB_MEMORY_GIB))
    return max(1, jobs)


def device_label(device: torch.device) -> str:
    """The device a run used, with the GPU(s) it was given: ``cuda:0 [GPU 3]``."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    return f"{device} [GPU {given}]" if given else str(device)


def set_threads(threads: int) -> None:
    """``threads`` > 0: that many. 0: the job's share of the CPUs under a submitit launcher
    (SLURM's cpus-per-task; one each for local parallel jobs), else torch's default (in a
    job of hydra/launcher=parallel: CPUs // jobs, from the OMP_NUM_THREADS joblib sets)."""
    if threads <= 0:
        if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
            threads = int(os.environ["SLURM_CPUS_PER_TASK"])
        elif os.environ.get("SUBMITIT_EXECUTOR") == "local":
            threads = 1
    if threads > 0:
        torch.set_num_threads(threads)


class Interrupted(KeyboardInterrupt):
    """SIGTERM (what SLURM and `kill` send) handled like Ctrl-C."""


class sigterm_as_interrupt:
    """While training, SIGTERM raises ``Interrupted`` so the status says so. Not under
    submitit, whose own handlers checkpoint and requeue on a cluster."""

    def __enter__(self):
        self.previous = None
        self.received = False  # whether a SIGTERM came while this handler was on
        if threading.current_thread() is threading.main_thread() and not os.environ.get(
            "SUBMITIT_EXECUTOR"
        ):
            self.previous = signal.signal(signal.SIGTERM, self._raise)
        return self

    def _raise(self, signum, frame):
        self.received = True
        raise Interrupted()

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


class stop_between_steps:
    """Ctrl-C and SIGTERM (under submitit, its preemption and time-limit signal instead: its
    own handler checkpoints the job and requeues it) while the training loop runs are held
    until the step in progress is whole: ``requested`` is the signal that came, and
    ``deliver()``, once the loop has saved last.pt, hands it on as if it came then
    (KeyboardInterrupt, ``Interrupted``, submitit's requeue). A second one is handed on at
    once. Outside the main thread nothing is held."""

    def __enter__(self) -> stop_between_steps:
        self.requested: int | None = None
        self.previous: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in _stop_signals():
                self.previous[signum] = signal.signal(signum, self._hold)
        return self

    def _hold(self, signum, frame):
        if self.previous.get(signum) is signal.SIG_IGN:  # ignored before (a worker's Ctrl-C)
            return
        if self.requested is not None:
            self.deliver(signum)
        self.requested = signum

    def deliver(self, signum: int | None = None) -> None:
        """Put the handlers back and raise the signal again: their turn now."""
        signum, self.requested = signum or self.requested, None
        self._restore()
        if signum is not None:
            signal.raise_signal(signum)

    def _restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self.previous = {}

    def __exit__(self, *exc):
        self._restore()


def _stop_signals() -> list[int]:
    """SIGINT, and SIGTERM or, under submitit, its requeue signal (SUBMITIT_PREEMPT_SIGNAL,
    USR2 by default; submitit only logs SIGTERM)."""
    if not os.environ.get("SUBMITIT_EXECUTOR"):
        return [signal.SIGINT, signal.SIGTERM]
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    return [signal.SIGINT, getattr(signal, f"SIG{name}", signal.SIGUSR2)]
