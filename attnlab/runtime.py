"""Where and how computation runs: device choice, CPU threads, and SIGTERM."""

from __future__ import annotations

import os
import signal
import threading

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


def autocast(device: torch.device, enabled: bool) -> torch.autocast:
    """bf16 autocast on the device's own type (a no-op when not ``enabled``)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def set_threads(threads: int) -> None:
    """``threads`` > 0: that many. 0: the job's share of the CPUs under a submitit launcher
    (SLURM's cpus-per-task; one each for local parallel jobs), else torch's default."""
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
        if threading.current_thread() is threading.main_thread() and not os.environ.get(
            "SUBMITIT_EXECUTOR"
        ):
            self.previous = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Interrupted()

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
