"""folder: strips/s of training from a folder of labelled strips (data=folder: ``n`` strips of
lengths 1-8 exported as ``attnlab data export`` does, from the run's own data config) against
training on synthesis, one after the other, same reader; each in its own process. The
folder's decoding is set-up, not timed."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from attnlab.bench import train
from attnlab.bench.common import fmt, in_child, reader_config, table, verdict

TARGET = 0.9  # folder strips/s over synthesis strips/s, same reader


def run(
    reader: str,
    device: str,
    seconds: float,
    overrides: list[str],
    n: int = 20_000,
    child: bool = True,
    peak_n: int = train.PEAK_N,
) -> dict[str, Any]:
    """``child``: each training in its own process (False: in this one, as tests do)."""
    call = in_child if child else (lambda fn, *args: fn(*args))
    with tempfile.TemporaryDirectory(prefix="attnlab_bench_folder_") as tmp:
        folder = Path(tmp) / "strips"
        t0 = time.perf_counter()
        export(reader_config(reader, device, overrides).data, folder, n)
        export_s = time.perf_counter() - t0
        synth = call(train.run, reader, device, seconds, overrides, peak_n)
        real_overrides = [*overrides, "data=folder", f"data.path={folder}"]
        real = call(train.run, reader, device, seconds, real_overrides, peak_n)
    ratio = real["strips_per_s"] / max(synth["strips_per_s"], 1e-9)
    return {
        "reader": reader,
        "strips": n,
        "export_s": round(export_s, 1),
        "synthesis": synth,
        "folder": real,
        "ratio": round(ratio, 3),
        "target_ratio": TARGET,
        "meets_target": ratio >= TARGET,
    }


def export(data: Any, folder: Path, n: int) -> None:
    """``n`` strips of lengths 1-8 (in turn), seed 0, as PNGs and labels.csv."""
    import torch

    from attnlab.data.strips import StripSynth
    from attnlab.data.write_strips import export_folder

    lengths = torch.arange(n) % 8 + 1
    export_folder(StripSynth(data).sample(lengths, torch.Generator().manual_seed(0)), folder)


def show(r: dict[str, Any], device: str) -> None:
    print(f"folder: Trainer.advance() of the {r['reader']} reader on {device}")
    runs = (("synthesis", r["synthesis"]), (f"folder ({r['strips']} strips)", r["folder"]))
    rows = [
        [
            name,
            fmt(x["strips_per_s"]),
            f"{x['steps']} x {x['batch_size']} in {x['seconds']} s",
            f"{100 * x['data_share']:.0f}%",
        ]
        for name, x in runs
    ]
    print(table(rows, ["training strips", "strips/s", "steps", "data share"]))
    print(
        f"folder / synthesis = {100 * r['ratio']:.0f}% (target >= {100 * r['target_ratio']:.0f}%) "
        f"{verdict(r['meets_target'])}; export of the folder took {r['export_s']} s"
    )
