"""train: strips/s of the real training step of each reader at the default config, its FLOPs
per strip and the GFLOP/s it achieves against the machine's fp32 matmul peak on the same
threads (``attnlab.bench.flops``), and peak memory. ``run`` drives the Trainer through its
hooks (``advance()``, ``timer``); the bench runs each reader in its own process so that its
peak resident memory is its own."""

from __future__ import annotations

import tempfile
import time
from typing import Any

import torch

from attnlab.bench import flops
from attnlab.bench.common import (
    config_label,
    current_rss_mib,
    fmt,
    maxrss_mib,
    reader_config,
    sync,
    table,
    verdict,
)
from attnlab.runs.rundir import RunDir

# A plain per-column BiGRU reader, batch 128, on 2 CPU cores; the targets are twice these.
# Readers without a reference figure (every reader after the lab's two) show their speed only.
REFERENCE = {"fixed": 1_000, "attention": 650}
PEAK_N = 2048  # the matmul whose speed is the machine's peak


def run(
    reader: str, device: str, seconds: float, overrides: list[str], peak_n: int = PEAK_N
) -> dict[str, Any]:
    """Trainer.advance() of one reader for ``seconds`` (after 3 warm-up steps)."""
    from attnlab.training.trainer import Trainer

    cfg = reader_config(reader, device, overrides)
    with tempfile.TemporaryDirectory(prefix="attnlab_bench_") as tmp:
        trainer = Trainer(cfg, RunDir(tmp))
        setup_peak = maxrss_mib()  # includes the transient peak of building the glyph bank
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        for _ in range(3):
            trainer.advance()
        sync(device)
        trainer.timer.reset()
        t0 = time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds or trainer.timer.steps == 0:
            loss = trainer.advance()
        sync(device)
        elapsed = time.perf_counter() - t0
        timer = trainer.timer
        t = cfg.train
        strips = timer.steps * t.batch_size * t.accumulate
        rate = strips / elapsed
        counted = flops.step_flops(trainer)
        peak = flops.matmul_peak(peak_n, device=device)
        out = {
            "reader": reader,
            "overrides": list(overrides),
            "strips_per_s": round(rate, 1),
            "steps": timer.steps,
            "seconds": round(elapsed, 2),
            "batch_size": t.batch_size * t.accumulate,
            "data_share": round(timer.data_s / max(timer.step_s, 1e-9), 3),
            "params": trainer.params,
            "loss": round(loss, 4),
            "torch_threads": torch.get_num_threads(),
            "flops_per_strip": round(counted["flops_per_strip"]),
            "peak_gflop_per_s": peak["gflop_per_s"],
            "peak_n": peak["n"],
            **flops.achieved(rate, counted["flops_per_strip"], peak["gflop_per_s"]),
            "peak_rss_mib": round(maxrss_mib(), 1),
            "setup_peak_rss_mib": round(setup_peak, 1),
            "rss_after_mib": None if (now := current_rss_mib()) is None else round(now, 1),
            "bf16_autocast": trainer.autocast,
            "reference_strips_per_s": REFERENCE.get(reader),
            "target_strips_per_s": 2 * REFERENCE[reader] if reader in REFERENCE else None,
        }
        target = out["target_strips_per_s"]
        out["meets_target"] = None if target is None else rate >= target
        if device.startswith("cuda"):
            out["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return out


def run_recipes(
    device: str, seconds: float, overrides: list[str], peak_n: int = PEAK_N
) -> list[dict[str, Any]]:
    """``run`` of the own-strips recipe at each height it reads strips at (attnlab.tasks.
    recipe: what ``attnlab train data=folder`` trains), each in its own process, named by
    its keys in the reader column."""
    from attnlab.bench.common import in_child
    from attnlab.tasks.recipe import HEIGHTS, recipe_keys

    out = []
    for height in HEIGHTS:
        model, *keys = recipe_keys(height)
        reader = model.split("=", 1)[1]
        r = in_child(run, reader, device, seconds, [*keys, *overrides], peak_n)
        r["reader"] = f"recipe: {reader} at {height} px"
        out.append(r)
    return out


def show(results: list[dict[str, Any]], device: str) -> None:
    label = config_label(results[0]["overrides"])
    print(f"train: Trainer.advance(), {label} on {device}")
    header = ["reader", "strips/s", "reference", "target", "", "steps", "data share"]
    header += ["peak RSS", "RSS after"]
    if device.startswith("cuda"):
        header.append("peak CUDA")
    rows = []
    for r in results:
        row = [
            r["reader"],
            fmt(r["strips_per_s"]),
            fmt(r["reference_strips_per_s"]),
            "-" if r["target_strips_per_s"] is None else f">= {fmt(r['target_strips_per_s'])}",
            verdict(r["meets_target"]),
            f"{r['steps']} x {r['batch_size']} in {r['seconds']} s",
            f"{100 * r['data_share']:.0f}%",
            f"{fmt(r['peak_rss_mib'])} MiB",
            "-" if r["rss_after_mib"] is None else f"{fmt(r['rss_after_mib'])} MiB",
        ]
        if "peak_cuda_mib" in r:
            row.append(f"{fmt(r['peak_cuda_mib'])} MiB")
        rows.append(row)
    print(table(rows, header))
    print(
        "(reference: a plain per-column BiGRU reader, batch 128, on 2 CPU cores; target = 2x. "
        "data share = time drawing strips inside the step)"
    )
    setup = max(r["setup_peak_rss_mib"] for r in results)
    if all(r["peak_rss_mib"] <= r["setup_peak_rss_mib"] + 1 for r in results):
        print(
            f"(peak RSS is set before training starts ({fmt(setup)} MiB, mostly the transient "
            "of building the glyph bank); RSS after = resident memory while training)"
        )
    print()
    print("fraction of the machine's peak (FLOPs: matmuls and convolutions of one step, counted)")
    rows = [
        [
            r["reader"],
            fmt(r["flops_per_strip"] / 1e6, 2),
            fmt(r["strips_per_s"]),
            fmt(r["gflop_per_s"], 2),
            fmt(r["peak_gflop_per_s"], 1),
            f"{100 * r['peak_ratio']:.2f}%",
            str(r["torch_threads"]),
        ]
        for r in results
    ]
    header = ["reader", "MFLOP/strip", "strips/s", "GFLOP/s", "peak GFLOP/s", "ratio", "threads"]
    print(table(rows, header))
    n = results[0]["peak_n"]
    print(f"(peak: the best of 5 fp32 matmuls of {n} x {n} on the same threads)")
