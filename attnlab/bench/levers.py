"""levers: what each CPU speed lever gives one reader at one height (issue 59 item 3), on the
threads the bench runs with. For each lever: steps/s of ``Trainer.advance()`` (after warm-up
steps), its ratio to float32, and the validation exact accuracy after the same short training
(same seed, same strips) under it, so that "faster at the same accuracy" can be judged.

- ``float32``: the baseline;
- ``channels_last``: the reader's weights (so its convolutions' outputs) in channels-last
  memory format;
- ``bf16``: bf16 autocast (``train.bf16=true``), only where the CPU has bf16 (oneDNN says
  so: ``torch.ops.mkldnn._is_mkldnn_bf16_supported``); otherwise the row says why not;
- ``compile``: the loss compiled by inductor (``train.compile=true``), when asked for
  (``--levers``): compiling takes a minute or more of CPU, spent in the steps before
  validation, never in the timed ones.

A lever is worth keeping where it is over 10% faster (``PAYS``) at an accuracy within the
run-to-run spread; this section only measures, ``show`` says which rows would pass.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

import torch

from attnlab.bench.common import fmt, reader_config, table
from attnlab.runs.rundir import RunDir

LEVERS = ("float32", "channels_last", "bf16")  # the default; "compile" when asked for
KEYS = {"bf16": ["train.bf16=true"], "compile": ["train.compile=true"]}  # a lever's overrides
ALL = (*LEVERS, "compile")
PAYS = 1.10  # faster by over 10%


def bf16_on_cpu() -> bool:
    """Whether this CPU runs bf16 in oneDNN (avx512_bf16 / AMX), as autocast needs."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def run_lever(
    lever: str, reader: str, device: str, overrides: list[str], seconds: float, train_steps: int
) -> dict[str, Any]:
    """One lever: ``train_steps`` steps from the seed (then the validation exact accuracy),
    then steps timed for ``seconds``."""
    from attnlab.training.trainer import Trainer

    cfg = reader_config(reader, device, [*overrides, *KEYS.get(lever, [])])
    with tempfile.TemporaryDirectory(prefix="attnlab_levers_") as tmp:
        trainer = Trainer(cfg, RunDir(tmp))
        if lever == "channels_last":
            trainer.model.to(memory_format=torch.channels_last)
        for _ in range(train_steps):
            loss = trainer.advance()
        if failed := getattr(trainer.loss_fn, "failed", None):  # train.compile fell back
            return {"lever": lever, "skipped": f"torch could not compile it: {failed[:160]}"}
        val = trainer.validate()
        trainer.timer.reset()
        t0 = time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds or trainer.timer.steps == 0:
            trainer.advance()
        elapsed = time.perf_counter() - t0
        return {
            "lever": lever,
            "steps_per_s": round(trainer.timer.steps / elapsed, 3),
            "timed_steps": trainer.timer.steps,
            "seconds": round(elapsed, 2),
            "train_steps": train_steps,
            "loss": round(float(loss), 4) if train_steps else None,
            "val_exact": round(float(val["exact_acc"]), 4),
            "val_cer": round(float(val["cer"]), 4),
            "bf16_autocast": trainer.autocast,
        }


def run(
    reader: str,
    device: str,
    overrides: list[str],
    seconds: float,
    train_steps: int,
    levers: tuple[str, ...] = LEVERS,
) -> dict[str, Any]:
    """Every lever of ``levers`` on ``reader`` with ``overrides`` (data.height among them)."""
    rows = []
    for lever in levers:
        if lever == "bf16" and device == "cpu" and not bf16_on_cpu():
            rows.append({"lever": lever, "skipped": "this CPU has no bf16 (oneDNN says so)"})
            continue
        rows.append(run_lever(lever, reader, device, overrides, seconds, train_steps))
    base = next((r for r in rows if r["lever"] == "float32"), None)
    for r in rows:
        if base is not None and "steps_per_s" in r:
            r["speedup"] = round(r["steps_per_s"] / base["steps_per_s"], 3)
            r["val_exact_change"] = round(r["val_exact"] - base["val_exact"], 4)
            r["pays"] = r["speedup"] > PAYS
    return {
        "reader": reader,
        "overrides": list(overrides),
        "threads": torch.get_num_threads(),
        "bf16_cpu": bf16_on_cpu(),
        "rows": rows,
    }


def show(r: dict[str, Any], device: str) -> None:
    print(
        f"levers: {r['reader']} {' '.join(r['overrides'])} on {device}, "
        f"{r['threads']} thread(s); bf16 on this CPU: {'yes' if r['bf16_cpu'] else 'no'}"
    )
    header = ["lever", "steps/s", "vs float32", "val exact", "change", f"> {PAYS:.2f}x"]
    rows = []
    for x in r["rows"]:
        if "skipped" in x:
            rows.append([x["lever"], "-", "-", "-", "-", x["skipped"]])
            continue
        rows.append(
            [
                x["lever"],
                fmt(x["steps_per_s"], 2),
                f"{x.get('speedup', 1.0):.2f}x",
                f"{100 * x['val_exact']:.1f}%",
                f"{100 * x.get('val_exact_change', 0.0):+.1f} pt",
                "yes" if x.get("pays") else "no",
            ]
        )
    print(table(rows, header))
    steps = next((x["train_steps"] for x in r["rows"] if "train_steps" in x), 0)
    print(
        f"(val exact: after {steps} steps from the same seed under each lever; steps/s: "
        "timed after them. A shared machine: ratios, not speeds; run twice)"
    )
