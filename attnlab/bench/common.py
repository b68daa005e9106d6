"""What every bench section shares: the config it runs with, the process it runs in, the
machine it runs on, and how its figures are printed."""

from __future__ import annotations

import multiprocessing
import os
import platform
import resource
import sys
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from attnlab.runtime import resolve_device
from attnlab.tasks.compose import compose


def reader_config(reader: str, device: str, overrides: list[str]) -> DictConfig:
    """``attnlab train model=READER train.device=DEVICE OVERRIDES``."""
    return compose([f"model={reader}", f"train.device={device}", *overrides])


def device_name(name: str) -> str:
    """auto | cpu | cuda -> the device the bench runs on (runtime.resolve_device's rules)."""
    return str(resolve_device(name))


def registry_names() -> list[str]:
    """Every registered reader (the lab's two first)."""
    from attnlab.models import registry

    return registry.names()


def maxrss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def current_rss_mib() -> float | None:
    """Resident memory now (Linux only)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kib = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
    return None if kib is None else int(kib) / 1024


def sync(device: str | torch.device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def in_child(fn, *args):
    """Run ``fn(*args)`` in a fresh process, so that its peak memory is its own; ``fn`` must
    be a module-level function (pickled by reference)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def run_cli(section: str, *args: object) -> None:
    """``python -m attnlab.cli ARGS`` for a section that runs real commands (typefaces,
    curves): its output kept, and on failure the section ends with the command's stderr."""
    import subprocess

    cmd = [sys.executable, "-m", "attnlab.cli", *map(str, args)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(
            f"{section}: attnlab {' '.join(cmd[3:6])}... failed:\n{res.stderr[-2000:]}"
        )


def machine(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "host": platform.node(),
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def config_label(overrides: list[str]) -> str:
    return "default config" + (f" + {' '.join(overrides)}" if overrides else "")


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else "ok" if ok else "BELOW TARGET"
