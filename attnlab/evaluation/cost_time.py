"""What a reader costs when it runs: time per strip of greedy reading and of one training
step, and the peak memory of a training step, on the device it runs on.

Reading is timed with oracle lengths (``Reader.read(..., lengths=)``: exactly L digits, then
EOS), so an untrained reader reads as many steps as a trained one would. Memory: on CUDA
the peaks of ``max_memory_allocated`` and ``max_memory_reserved`` over the step after
``reset_peak_memory_stats`` (two peaks, not necessarily at the same instant); on CPU the
peak growth of the process's resident memory over the step, sampled every half millisecond
from ``/proc/self/statm``, after glibc's ``malloc_trim`` has handed the heap freed by earlier
steps back to the system (otherwise the step reuses it and shows no growth; ``MEMORY_KIND``
says which; none where there is no /proc).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from attnlab.runtime import autocast

MEMORY_KIND = {
    "cuda": "CUDA max_memory_allocated / max_memory_reserved over the step",
    "cpu": "CPU peak resident growth over the step (sampled, after malloc_trim)",
}
STATM = Path("/proc/self/statm")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# Repeated timings of one measure further apart than this (slowest / fastest) are said: the
# machine was busy meanwhile, and the best of them may still be slowed.
DISAGREE = 1.5


def best_seconds(
    fn: Callable[[], Any], device: torch.device, repeats: int, spread: list[float] | None = None
) -> float:
    """The fastest of ``repeats`` calls of ``fn`` after one warm-up call; the slowest over
    the fastest is appended to ``spread`` when one is given."""
    fn()
    times = []
    for _ in range(max(1, repeats)):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    if spread is not None:
        spread.append(max(times) / max(min(times), 1e-12))
    return min(times)


def read_seconds(
    model: Any,
    batch: Any,
    size: int,
    device: torch.device,
    repeats: int,
    spread: list[float] | None = None,
) -> float:
    """Seconds per strip of greedy reading (oracle lengths) in batches of ``size`` strips
    (the first ``size`` of ``batch``; size 1: each of up to 4 strips alone, averaged);
    ``spread`` as ``best_seconds``'s."""
    model.eval()
    lengths = torch.tensor([len(s) for s in batch.labels])

    def chunk(i: int, n: int):
        w = batch.widths[i : i + n]
        images = batch.images[i : i + n, :, : int(w.max())].to(device)
        return images, w.to(device), lengths[i : i + n].to(device)

    if size == 1:
        times = [
            best_seconds(
                lambda a=chunk(i, 1): model.read(*a[:2], lengths=a[2]), device, repeats, spread
            )
            for i in range(min(4, len(batch.labels)))
        ]
        return sum(times) / len(times)
    args = chunk(0, size)
    read = best_seconds(lambda: model.read(*args[:2], lengths=args[2]), device, repeats, spread)
    return read / size


def trim_heap() -> bool:
    """Hand the C heap's free memory back to the system (glibc's ``malloc_trim``); False
    where there is no glibc."""
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


class RssPeak:
    """Peak resident memory of this process while the block runs, sampled by a thread."""

    def __init__(self, every_s: float = 0.0005):
        self.every_s = every_s
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.start = self.peak = 0
        self._stop = threading.Event()

    def rss(self) -> int:
        return int(STATM.read_text().split()[1]) * self.page

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.every_s)

    def __enter__(self) -> RssPeak:
        trim_heap()
        self.start = self.peak = self.rss()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.start) / 2**20


def train_step(model: Any, opt: Any, micro: list[Any], device: torch.device, bf16: bool) -> float:
    """One optimiser step over the micro-batches ``micro`` (gradients accumulated, each
    micro-batch's loss divided by their number, as the trainer does); its loss."""
    model.train()
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for b in micro:
        w = b.widths
        images = b.images[:, :, : int(w.max())].to(device)
        with autocast(device, bf16):
            loss = model.loss(images, w.to(device), b.labels)
        (loss / len(micro)).backward()
        total += float(loss.detach()) / len(micro)
    opt.step()
    return total


def measure_step(
    model: Any,
    opt: Any,
    micro: list[Any],
    device: torch.device,
    bf16: bool,
    repeats: int,
    spread: list[float] | None = None,
) -> dict[str, Any]:
    """Seconds per strip of one training step (the best of ``repeats``) and the peak memory
    of one more step, measured alone (``MEMORY_KIND``); ``spread`` as ``best_seconds``'s."""
    strips = sum(len(b.labels) for b in micro)
    step = lambda: train_step(model, opt, micro, device, bf16)  # noqa: E731
    seconds = best_seconds(step, device, repeats, spread)
    out: dict[str, Any] = {"train_s_per_strip": seconds / strips, "train_strips": strips}
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        train_step(model, opt, micro, device, bf16)
        _sync(device)
        out["mem_kind"] = MEMORY_KIND["cuda"]
        out["mem_peak_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        out["mem_reserved_mib"] = torch.cuda.max_memory_reserved(device) / 2**20
    elif STATM.is_file():
        with RssPeak() as rss:
            train_step(model, opt, micro, device, bf16)
        out["mem_kind"] = MEMORY_KIND["cpu"]
        out["mem_peak_mib"] = rss.growth_mib
        out["mem_reserved_mib"] = None
    return out
