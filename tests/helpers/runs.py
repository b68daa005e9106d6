"""Helpers shared by several test modules (run directories written by hand, the faults
tests' subprocess helpers); test modules import from here, never from each other."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from attnlab.runs.evaldir import STRIP_PRINTS, EvalMeta
from attnlab.runs.rundir import RunDir, RunStatus, TrainMetrics

EVAL_HEADER = (
    "length,split,n,exact_acc,exact_lo,exact_hi,cer,cer_lo,cer_hi,sub,ins,del,ref_chars,"
    "len_err,mean_conf,align,entropy"
)


def _png(path: Path, seed: int = 0) -> None:
    """A tiny real PNG (a random 'attention map')."""
    import matplotlib.image

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    matplotlib.image.imsave(path, rng.random((8, 24)), cmap="viridis")


def write_run(
    run_dir: Path,
    *,
    seed: int,
    reader: str = "attention",
    train: tuple[int, int] = (1, 8),
    train_set: list[int] | None = None,
    state: str | None = "complete",
    error: str | None = None,
    metrics: bool = True,
    best_step: int = 1500,
    acc: dict[int, float] | None = None,
    cer: dict[int, float] | None = None,
    eval_name: str | None = "synthetic-greedy",
    eval_step: int | None = None,
    eval_json: bool = True,
    lengths: range = range(1, 17),
    maps: dict[int, tuple[int, int]] | None = None,
    history: bool = True,
) -> Path:
    """Write a run directory in the on-disk formats of train.py and evaluate.py.

    `acc`/`cer` map length -> value (default: 1.0 / 0.0); `maps` maps length -> (n correct,
    n failure) attention-map PNGs. Pass eval_name=None for a run without evaluation. The
    evaluation reads the best checkpoint (step `best_step`) unless `eval_step` says otherwise;
    eval_json=False leaves it partial (eval.json is written last).
    """
    run = RunDir(run_dir)
    hydra = run.config.parent
    hydra.mkdir(parents=True)
    config = {
        "seed": seed,
        "model": {"name": reader, "hidden": 64},
        "data": {"train_lengths": list(train), "train_length_set": train_set, "height": 32},
        "train": {"steps": 1500, "lr": 0.001},
    }
    run.config.write_text(yaml.safe_dump(config, sort_keys=False))
    (hydra / "hydra.yaml").write_text("hydra:\n  run:\n    dir: .\n")
    run.overrides.write_text(yaml.safe_dump([f"seed={seed}", f"model={reader}"]))
    if state is not None:
        run.write_status(RunStatus(state), 1500 if state == "complete" else 700, error)
    acc = acc or {}
    cer = cer or {}
    seen = sorted(set(train_set) if train_set is not None else range(train[0], train[1] + 1))
    if metrics:
        by_length = {str(n): {"exact_acc": acc.get(n, 1.0), "cer": cer.get(n, 0.0)} for n in seen}
        run.write_metrics(
            TrainMetrics(
                reader=reader,
                step=1500,
                params=123456,
                elapsed_s=88.1,
                strips_per_s=512.0,
                seen_lengths=seen,
                val={"exact_acc": 0.99, "cer": 0.001, "by_length": by_length},
                best={"step": best_step, "exact_acc": 0.99},
            )
        )
    if history:
        rows = ["step,loss,lr,val_exact_acc,val_cer", "0,,0.001,0.0,0.9"]
        for step in range(100, 1501, 100):
            loss = 2.3 * math.exp(-step / (400 + 50 * seed))
            val = f"{min(1.0, step / 1200):.3f},{max(0.0, 0.9 - step / 1300):.3f}"
            rows.append(f"{step},{loss:.4f},0.001," + (val if step % 500 == 0 else ","))
        run.history.write_text("\n".join(rows) + "\n")
    if eval_name is not None:
        ev = run.eval_dir(eval_name)
        ev.path.mkdir(parents=True)
        lines = [EVAL_HEADER]
        totals: dict[str, list[tuple[float, float]]] = {"seen": [], "unseen": []}
        for n in lengths:
            split = "seen" if n in seen else "unseen"
            a, c = acc.get(n, 1.0), cer.get(n, 0.0)
            totals[split].append((a, c))
            align = "" if reader == "fixed" else "0.9"
            lines.append(
                f"{n},{split},100,{a},{a},{a},{c},{c},{c},0,0,0,{100 * n},0.0,0.95,{align},{align}"
            )
        for split, vals in totals.items():
            if vals:
                a = sum(v[0] for v in vals) / len(vals)
                c = sum(v[1] for v in vals) / len(vals)
                lines.append(f"all,{split},{100 * len(vals)},{a},{a},{a},{c},{c},{c},0,0,0,1,0,1,,")
        ev.table_csv.write_text("\n".join(lines) + "\n")
        ev.table_md.write_text("| length |\n|---|\n")
        if maps and reader == "attention":
            for n, (n_ok, n_bad) in maps.items():
                for i in range(n_ok):
                    _png(ev.map_path(n, "correct", i), seed=n * 10 + i)
                for i in range(n_bad):
                    _png(ev.map_path(n, "failure", i), seed=n * 10 + i + 5)
            _png(ev.attention_summary, seed=99)
        if eval_json:
            meta = EvalMeta(
                name=eval_name,
                source="synthetic",
                decoding="greedy",
                reader=reader,
                seen_lengths=seen,
                lengths=list(lengths),
                checkpoint=str(run.checkpoint("best")),
                step=best_step if eval_step is None else eval_step,
                n_per_length=100,
            )
            ev.write_meta(meta)
    return run_dir


def add_readings(run: Path, correct: dict[int, list[int]], prints: dict[int, str] | None = None):
    """Give a hand-made run's evaluation a readings.csv (strip i of length n: right or not,
    one substitution when wrong) and strip fingerprints in eval.json."""
    ev = RunDir(run).eval_dir("synthetic-greedy")
    rows = []
    for n, marks in correct.items():
        for i, ok in enumerate(marks):
            truth = "7" * n
            reading = truth if ok else "1" + truth[1:]
            rows.append(
                {"source": f"test-len{n:02d}#{i}", "length": n, "truth": truth,
                 "reading": reading, "confidence": 0.9, "correct": bool(ok),
                 "sub": 0 if ok else 1, "ins": 0, "del": 0, "mode": "", "oracle_reading": ""}
            )  # fmt: skip
    pd.DataFrame(rows).to_csv(ev.readings, index=False)
    meta = json.loads(ev.meta_file.read_text())
    meta.setdefault("extra", {})[STRIP_PRINTS] = {
        str(n): (prints or {}).get(n, f"set-{n}") for n in correct
    }
    ev.meta_file.write_text(json.dumps(meta))


# One thread: runs that tests compare bit for bit (a resumed run with the session's trained
# one) train at the same thread count whatever the load (train.thread_policy=adaptive would
# follow the load, and 1- and 2-thread runs differ in the last bits).
TINY = ["preset=tiny", "train.progress=plain", "train.threads=1"]


def one_line_error(res: subprocess.CompletedProcess[str], *mentions: str) -> None:
    assert res.returncode == 2, (res.stdout[-2000:], res.stderr[-2000:])
    assert res.stderr.startswith("attnlab: error:") and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr
    for word in mentions:
        assert word in res.stderr, (word, res.stderr)


def start_training(run: Path, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "attnlab.cli", "train", *TINY, *args, f"hydra.run.dir={run}"]
    return subprocess.Popen(
        cmd, cwd=run.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


@contextlib.contextmanager
def busy_run(run: Path, *args: str, stop: int = signal.SIGKILL) -> Iterator[subprocess.Popen]:
    """A tiny training of ``args`` in ``run`` (a subprocess), once it has written its
    status: the run is busy for the block, and ``stop`` ends the training after it."""
    run.mkdir(exist_ok=True)
    proc = start_training(run, *args)
    try:
        wait_for(run / "status.json", proc)
        yield proc
    finally:
        proc.send_signal(stop)
        proc.wait(timeout=60)


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while not path.exists():
        assert proc.poll() is None, f"training ended before {path} appeared: {proc.stderr.read()}"
        assert time.time() < deadline, f"{path} did not appear"
        time.sleep(0.01)


def _small_disk(limit: int):
    """A process whose files cannot grow past ``limit`` bytes: writes fail as on a full disk."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    return limit_files


def run_limited(args: list[object], cwd: Path, limit: int, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnlab.cli", *map(str, args)], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=300, preexec_fn=_small_disk(limit),
    )  # fmt: skip


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path (the lock file left out: it only
    says which process last held the run)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def lost(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Files of ``before`` that are gone or changed in ``after`` (new files are allowed)."""
    return sorted(k for k, v in before.items() if after.get(k) != v)


def unchanged(root: Path, before: dict[str, str]) -> None:
    after = checksums(root)
    assert lost(before, after) == [] and sorted(after) == sorted(before), (
        lost(before, after),
        sorted(set(after) - set(before)),
    )


def write_sweep(sweep: Path, jobs: list[dict]) -> Path:
    """A Hydra multirun directory: multirun.yaml at the top, jobs in 0/, 1/, ..."""
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra:\n  mode: MULTIRUN\n")
    for i, job in enumerate(jobs):
        write_run(sweep / str(i), **job)
    return sweep


def evaluated_copies(trained: dict, root: Path, run_cli, *overrides: str) -> dict[str, Path]:
    """Each of the session's tiny runs copied under ``root`` and evaluated once (eval.n=4,
    no bootstrap; ``overrides`` added), by kind."""
    out = {}
    for kind, run in trained.items():
        dest = root / kind
        shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
        res = run_cli(
            "eval", dest, "eval.n=4", "eval.n_boot=0", *overrides, "eval.maps_k=0", cwd=root
        )
        assert res.returncode == 0, res.stderr
        out[kind] = dest
    return out


def history_cells(run: Path) -> list[list[str]]:
    """history.csv's cells, its ``train_seconds`` column left out: those follow the clock
    (a resumed run's differ from a straight one's); every other cell repeats exactly."""
    import csv

    with (run / "history.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    clock = rows[0].index("train_seconds") if "train_seconds" in rows[0] else None
    return [[c for i, c in enumerate(row) if i != clock] for row in rows]
