"""converge: training wall time until every seen length reaches ``threshold`` exact accuracy
on its validation set (Trainer.advance() between validations; validation not counted)."""

from __future__ import annotations

import tempfile
import time
from typing import Any

from attnlab.bench.common import config_label, reader_config, sync, table, verdict
from attnlab.runs.rundir import RunDir

REFERENCE_S = 150.0  # to 97% on the seen lengths
TARGET_S = 90.0  # to 99% on every seen length


def run(
    reader: str,
    device: str,
    overrides: list[str],
    max_seconds: float = 300.0,
    val_every: int = 50,
    threshold: float = 0.99,
    say=print,
) -> dict[str, Any]:
    from attnlab.training.trainer import Trainer

    cfg = reader_config(reader, device, overrides)
    with tempfile.TemporaryDirectory(prefix="attnlab_bench_") as tmp:
        trainer = Trainer(cfg, RunDir(tmp))
        val_s = 0.0
        start = time.perf_counter()
        trace: list[dict[str, Any]] = []
        reached = False
        mean_97: dict[str, Any] | None = None  # first validation with mean exact >= 97%
        while True:
            for _ in range(val_every):
                trainer.advance()
                if trainer.timer.step_s >= max_seconds:
                    break  # out of time: one last validation
            sync(device)
            t1 = time.perf_counter()
            val = trainer.validate()
            val_s += time.perf_counter() - t1
            train_s = trainer.timer.step_s
            worst_len, worst = min(
                ((n, v["exact_acc"]) for n, v in val["by_length"].items()), key=lambda x: x[1]
            )
            trace.append(
                {
                    "step": trainer.step,
                    "train_s": round(train_s, 1),
                    "exact_acc": round(val["exact_acc"], 4),
                    "min_exact_acc": round(worst, 4),
                    "worst_length": int(worst_len),
                }
            )
            if mean_97 is None and val["exact_acc"] >= 0.97:
                mean_97 = {"step": trainer.step, "train_s": round(train_s, 1)}
            say(
                f"  step {trainer.step:5d}  train {train_s:6.1f} s  val exact "
                f"{100 * val['exact_acc']:5.1f}%  worst: length {worst_len} at "
                f"{100 * worst:5.1f}%"
            )
            if worst >= threshold:
                reached = True
                break
            if train_s >= max_seconds:
                break
        total = time.perf_counter() - start
    return {
        "reader": reader,
        "threshold": threshold,
        "reached": reached,
        "steps": trainer.step,
        "train_s": round(train_s, 1),
        "validation_s": round(val_s, 1),
        "total_s": round(total, 1),
        "val_every": val_every,
        "max_seconds": max_seconds,
        "overrides": list(overrides),
        "mean_97": mean_97,
        "trace": trace,
        "reference_s": REFERENCE_S,
        "target_s": TARGET_S,
        "meets_target": reached and train_s <= TARGET_S,
    }


def show(r: dict[str, Any], device: str) -> None:
    print(
        f"converge: {r['reader']} reader, {config_label(r['overrides'])} on {device}, "
        f"validation every {r['val_every']} steps; stop when every seen length >= "
        f"{100 * r['threshold']:.0f}%"
    )
    got = "reached" if r["reached"] else f"NOT reached within {r['max_seconds']:.0f} s"
    row = [
        got,
        str(r["steps"]),
        f"{r['train_s']} s",
        f"{r['validation_s']} s",
        f"{r['total_s']} s",
        f"<= {r['target_s']:.0f} s",
        verdict(r["meets_target"]),
    ]
    print(table([row], ["", "steps", "training", "validation", "total", "target", ""]))
    m = r["mean_97"]
    got97 = "not reached" if m is None else f"{m['train_s']} s (step {m['step']})"
    print(
        f"(reference: ~{r['reference_s']:.0f} s to 97% on the seen lengths; here mean exact "
        f">= 97% after {got97})"
    )
