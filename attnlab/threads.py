"""CPU threads that follow the free CPUs, so that a busy machine slows a run down, not to a halt.

OpenMP threads spin while they wait for each other; with more threads than free cores each
small parallel region of a step waits for a descheduled thread (a 2-thread training beside
two CPU-bound processes on 2 cores: 28 strips/s, against 673 at 1 thread). With
``train.thread_policy=adaptive`` (the default) the run measures, from /proc/stat, how many of
its CPUs other processes keep busy, and uses only the rest (at least 1, at most its share),
measured again every few seconds while it trains: a load that starts or ends mid-run moves
the count within one interval. Idle, the count is today's, so is the speed. The same thread
count gives the same numbers as before; only the count can change.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

import torch

from attnlab.runtime import usable_cpus

log = logging.getLogger(__name__)

CHECK_EVERY_S = 2.0  # between two measurements while training (a /proc/stat read: ~50 us)
FIRST_WINDOW_S = 0.2  # the measurement before the first step
# A CPU counts as free when others leave at least this much of it: 2 burners beside a
# 1-thread run on 2 CPUs leave ~0.67 of one (1 thread); idle, ~1.95 (2 threads).
SLACK = 0.3
POLICIES = ("adaptive", "fixed")


def affinity() -> set[int]:
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def _busy_seconds(cpus: set[int]) -> float | None:
    """CPU-seconds spent busy so far by everything on ``cpus`` (/proc/stat), None off Linux."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    busy = 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
            busy += user + nice + system + irq + softirq + steal
    return busy / hz


class CpuMeter:
    """How many of this process's CPUs others left free since the last ``free()``: the busy
    time of those CPUs less this process's own CPU time (its spinning threads included)."""

    def __init__(self) -> None:
        self.cpus = affinity()
        self.mark = self._sample()

    def _sample(self) -> tuple[float, float | None, float]:
        return time.perf_counter(), _busy_seconds(self.cpus), time.process_time()

    def free(self) -> float | None:
        (t0, busy0, own0), (t1, busy1, own1) = self.mark, self._sample()
        self.mark = (t1, busy1, own1)
        if busy0 is None or busy1 is None or t1 - t0 <= 0:
            return None
        others = max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)
        return usable_cpus() - others


def threads_for(free: float | None, cap: int) -> int:
    """Threads for ``free`` CPUs: at least 1, at most ``cap``; ``cap`` when unknown."""
    if free is None:
        return cap
    return max(1, min(cap, math.floor(free + SLACK)))


class ThreadGovernor:
    """Adapts torch's threads to the free CPUs, up to ``cap``; ``tick()`` once per step."""

    def __init__(self, cap: int, every_s: float = CHECK_EVERY_S) -> None:
        self.cap = max(1, cap)
        self.every_s = every_s
        self.meter = CpuMeter()  # the first tick measures from here (the run's setup)
        self.threads = torch.get_num_threads()
        self.counts: list[int] = []  # every count used, in order
        self.last = -math.inf

    def _apply(self, threads: int) -> int:
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        return threads

    def tick(self) -> int:
        """Measure again when ``every_s`` has passed (first: over the run's setup); the
        threads now."""
        now = time.perf_counter()
        if now - self.last < self.every_s:
            return self.threads
        if not self.counts:  # a setup shorter than the first window: wait out the rest
            time.sleep(max(0.0, FIRST_WINDOW_S - (now - self.meter.mark[0])))
        self.last = time.perf_counter()
        threads = threads_for(self.meter.free(), self.cap)
        if threads != self.threads:
            log.info("threads: %d -> %d (other processes use the rest)", self.threads, threads)
            self.threads = self._apply(threads)
        if not self.counts or self.counts[-1] != threads:
            self.counts.append(threads)
        return self.threads


class FixedThreads:
    """``train.thread_policy=fixed``: torch's count, as set."""

    def __init__(self) -> None:
        self.threads = torch.get_num_threads()
        self.counts = [self.threads]

    def tick(self) -> int:
        return self.threads


def governor(policy: str, cap: int) -> ThreadGovernor | FixedThreads:
    """The run's thread policy; ``cap``: the threads it would use on an idle machine."""
    if policy == "adaptive":
        return ThreadGovernor(min(cap, usable_cpus()))
    fixed = FixedThreads()
    if fixed.threads > (cpus := usable_cpus()):  # taskset -c 0, a cgroup quota, a small node
        log.warning(
            "train.thread_policy=fixed: %d threads on %d usable CPU(s) (this process's "
            "affinity and CPU quota): threads share CPUs and wait for each other; the run "
            "records %d threads (train.threads=%d, or thread_policy=adaptive)",
            fixed.threads,
            cpus,
            fixed.threads,
            cpus,
        )
    return fixed


def adapt_once() -> int:
    """Torch's threads set once from the CPUs free now (an evaluation: a short job)."""
    return ThreadGovernor(min(torch.get_num_threads(), usable_cpus())).tick()
