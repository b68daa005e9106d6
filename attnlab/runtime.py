"""Where computation runs: device choice and CPU threads."""

from __future__ import annotations

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


def set_threads(threads: int) -> None:
    """``threads`` > 0: that many. 0: the job's share of the CPUs under a submitit launcher
    (SLURM's cpus-per-task; one each for local parallel jobs), else torch's default."""
    import os

    if threads <= 0:
        if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
            threads = int(os.environ["SLURM_CPUS_PER_TASK"])
        elif os.environ.get("SUBMITIT_EXECUTOR") == "local":
            threads = 1
    if threads > 0:
        torch.set_num_threads(threads)
