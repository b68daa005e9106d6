"""contention: strips/s of training on an idle machine and beside one CPU-bound process per
usable CPU (what a shared machine, a laptop or a CI runner does to a run), for the default
settings (``train.thread_policy=adaptive``), today's fixed default and 1 thread.

The burners are plain Python busy loops in their own processes, started before the run is
built (so the load is there from its start, as on a busy machine), each ending by itself
after the seconds it was given, and ended by the section when its timing is done.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import torch

from attnlab.bench.common import config_label, fmt, in_child, reader_config, table
from attnlab.runs.rundir import RunDir
from attnlab.runtime import usable_cpus

# name, overrides: the rows of the table (a fixed default = torch's threads, as before)
SETTINGS = (
    ("default", []),
    ("fixed default", ["train.thread_policy=fixed"]),
    ("1 thread", ["train.threads=1"]),
)
BURN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
TARGET_LOADED = 0.8  # default / 1 thread, loaded
TARGET_IDLE = 0.95  # default / fixed default (today's), idle
IDLE_THREADS = torch.get_num_threads()  # torch's own default in this process


def burners(n: int, seconds: float) -> list[subprocess.Popen]:
    """``n`` busy loops, each ending by itself after ``seconds``."""
    code = BURN.format(s=seconds)
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def rate(reader: str, device: str, seconds: float, overrides: list[str], load: int) -> dict:
    """Strips/s of Trainer.advance() for ``seconds`` (after 3 warm-up steps), with ``load``
    burners running from before the run is built."""
    from tempfile import TemporaryDirectory

    from attnlab.training.trainer import Trainer

    torch.set_num_threads(IDLE_THREADS)  # each row starts from torch's own default
    cfg = reader_config(reader, device, overrides)
    procs = burners(load, seconds + 60) if load else []
    try:
        time.sleep(0.5 if load else 0)  # the burners running before the run measures
        with TemporaryDirectory(prefix="attnlab_bench_") as tmp:
            trainer = Trainer(cfg, RunDir(tmp))
            for _ in range(3):
                trainer.advance()
            t0, steps = time.perf_counter(), 0
            while time.perf_counter() - t0 < seconds or steps == 0:
                trainer.advance()
                steps += 1
            elapsed = time.perf_counter() - t0
    finally:
        for p in procs:
            p.kill()
            p.wait()
    strips = steps * cfg.train.batch_size * cfg.train.accumulate
    return {
        "strips_per_s": round(strips / elapsed, 1),
        "steps": steps,
        "threads": trainer.threads.counts,
    }


def one_reader(
    reader: str,
    device: str,
    seconds: float,
    overrides: list[str],
    per_cpu: int = 1,
    repeats: int = 1,
) -> dict:
    """Every setting idle, then loaded (``per_cpu`` burners per usable CPU), in this (fresh)
    process; ``repeats`` rounds of every row in turn, each row's best kept (other work on a
    shared machine only ever slows a row down)."""
    load = per_cpu * usable_cpus()
    out: dict[str, Any] = {"reader": reader, "burners": load, "repeats": repeats, "rows": {}}
    for _ in range(repeats):
        for name, extra in SETTINGS:
            row = out["rows"].setdefault(name, {})
            for cond, n in (("idle", 0), ("loaded", load)):
                got = rate(reader, device, seconds, [*overrides, *extra], n)
                if cond not in row or got["strips_per_s"] > row[cond]["strips_per_s"]:
                    row[cond] = got
    rows = out["rows"]
    out["loaded_ratio"] = round(
        rows["default"]["loaded"]["strips_per_s"] / rows["1 thread"]["loaded"]["strips_per_s"], 3
    )
    out["idle_ratio"] = round(
        rows["default"]["idle"]["strips_per_s"] / rows["fixed default"]["idle"]["strips_per_s"], 3
    )
    return out


def run(
    readers: list[str],
    device: str,
    seconds: float,
    overrides: list[str],
    per_cpu: int = 1,
    repeats: int = 2,
) -> list[dict]:
    """Each reader in its own process (a fresh OpenMP pool)."""
    return [in_child(one_reader, r, device, seconds, overrides, per_cpu, repeats) for r in readers]


def show(results: list[dict], device: str, overrides: list[str]) -> None:
    n = results[0]["burners"]
    print(
        f"contention: Trainer.advance() strips/s, {config_label(overrides)} on {device}; "
        f"loaded = {n} CPU-bound processes beside it ({n // usable_cpus()} per usable CPU); "
        f"each figure the best of {results[0]['repeats']} rounds"
    )
    rows = []
    for r in results:
        for name, _ in SETTINGS:
            idle, loaded = r["rows"][name]["idle"], r["rows"][name]["loaded"]
            rows.append(
                [
                    r["reader"],
                    name,
                    fmt(idle["strips_per_s"]),
                    _counts(idle),
                    fmt(loaded["strips_per_s"]),
                    _counts(loaded),
                ]
            )
    print(table(rows, ["reader", "setting", "idle", "threads", "loaded", "threads"]))
    for r in results:
        ok_loaded = r["loaded_ratio"] >= TARGET_LOADED
        ok_idle = r["idle_ratio"] >= TARGET_IDLE
        print(
            f"{r['reader']}: loaded, default / 1 thread = {r['loaded_ratio']:.2f} (target >= "
            f"{TARGET_LOADED}: {'ok' if ok_loaded else 'BELOW'}); idle, default / fixed default "
            f"= {r['idle_ratio']:.2f} (target >= {TARGET_IDLE}: {'ok' if ok_idle else 'BELOW'})"
        )
    print(
        "(default = train.thread_policy=adaptive: the threads follow the CPUs others leave free; "
        "fixed default = torch's threads whatever the load, as before; threads: the counts "
        "used, in order. The idle figures hold only on a machine with nothing else running.)"
    )


def _counts(r: dict) -> str:
    return "->".join(str(c) for c in r["threads"])
