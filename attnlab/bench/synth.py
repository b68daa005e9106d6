"""synth: strips/s of synthesis (8-digit strips, batches of 1024) on ONE CPU thread."""

from __future__ import annotations

import time
from typing import Any

import torch

from attnlab.bench.common import fmt, table, verdict

TARGET = 20_000  # strips/s on one core


def run(seconds: float, batch: int = 1024, length: int = 8, data: Any = None) -> dict[str, Any]:
    """``data``: the data config (default: DataConfig(), the default training data)."""
    from attnlab.config import DataConfig
    from attnlab.data.strips import StripSynth

    t0 = time.perf_counter()
    synth = StripSynth(DataConfig() if data is None else data)
    bank_s = time.perf_counter() - t0
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        lengths = torch.full((batch,), length)
        synth.sample(lengths, gen)  # warm-up
        n, t0 = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds or n == 0:
            n += len(synth.sample(lengths, gen))
        elapsed = time.perf_counter() - t0
    finally:
        torch.set_num_threads(saved)
    rate = n / elapsed
    return {
        "strips_per_s": round(rate, 1),
        "strips": n,
        "seconds": round(elapsed, 2),
        "glyph_bank_s": round(bank_s, 2),
        "target_strips_per_s": TARGET,
        "meets_target": rate >= TARGET,
    }


def show(r: dict[str, Any]) -> None:
    print("synth: 8-digit strips, default DataConfig, batches of 1024, 1 CPU thread")
    row = [
        fmt(r["strips_per_s"]),
        f">= {fmt(r['target_strips_per_s'])}",
        verdict(r["meets_target"]),
        f"{r['strips']} strips in {r['seconds']} s",
    ]
    print(table([row], ["strips/s", "target", "", "measured"]))
    print(
        f"(glyph bank ready in {r['glyph_bank_s']} s, once per process, not timed: built, or "
        "loaded from the disk cache, attnlab.data.bank_cache)"
    )
