"""eval: strips/s of greedy reading (``attnlab.evaluation.inference.read_strips``); with a
run, the time of its default evaluation (fixed test sets of lengths 1..2x the longest seen
length, eval.n strips each); without one, an untrained reader."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from attnlab.bench.common import fmt, maxrss_mib, reader_config, sync, table, verdict

TARGET_S = 30.0  # the default evaluation (16 lengths x 1,000 strips) on a 2-core CPU


def run(
    device: str,
    run_dir: Path | None = None,
    reader_name: str = "attention",
    overrides: list[str] | None = None,
    n: int = 0,
    full: bool = False,
) -> dict[str, Any]:
    from attnlab.config import seen_lengths
    from attnlab.evaluation.evaluate import eval_lengths

    reader, exp, source, ckpt_path = _reader(device, run_dir, reader_name, overrides)
    n = n or (exp.eval.n if run_dir is not None else 100)
    lengths = eval_lengths(seen_lengths(exp.data))
    timed = _read_timed(reader, exp, device, lengths, n)
    total = len(lengths) * n
    default_total = len(lengths) * 1000
    wall = timed["synth_s"] + timed["read_s"]
    out: dict[str, Any] = {
        "source": source,
        "trained": run_dir is not None,
        "lengths": [lengths[0], lengths[-1]],
        "n_per_length": n,
        "batch_size": exp.eval.batch_size,
        "strips": total,
        "synth_s": round(timed["synth_s"], 2),
        "read_s": round(timed["read_s"], 2),
        "seconds": round(wall, 3),
        "strips_per_s": round(total / wall, 1),
        "read_strips_per_s": round(total / timed["read_s"], 1),
        "mean_reading_tokens": round(timed["tokens"] / total, 2),
        "mean_exact_acc": round(sum(timed["exact"]) / len(timed["exact"]), 4),
        "default_eval_strips": default_total,
        "projected_default_eval_s": round(wall * default_total / total, 1),
        "target_s": TARGET_S,
        "peak_rss_mib": round(maxrss_mib(), 1),
    }
    out["meets_target"] = out["projected_default_eval_s"] < TARGET_S
    if device.startswith("cuda"):
        out["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if ckpt_path is not None and full:
        out["full_evaluate_run_s"] = round(full_evaluate_run(ckpt_path, device, n), 1)
    return out


def _reader(
    device: str, run_dir: Path | None, reader_name: str, overrides: list[str] | None
) -> tuple[Any, Any, str, Path | None]:
    """The reader timed, its config, a line naming it, and its checkpoint: a run's best
    checkpoint, or without a run an untrained reader of ``reader_name``."""
    from attnlab.models import registry
    from attnlab.runs import locate
    from attnlab.runs.restore import restore

    if run_dir is not None:
        ckpt_path = locate.resolve(run_dir, "best")
        got = restore(ckpt_path, device)
        return got.reader, got.config, f"{ckpt_path} (step {got.ckpt.step})", ckpt_path
    exp = reader_config(reader_name, device, list(overrides or []))
    torch.manual_seed(0)
    reader = registry.build(exp.model, exp.data.height, exp.data.charset)
    source = f"UNTRAINED {reader.name} reader (random weights; pass --run RUN for real figures)"
    return reader, exp, source, None


def _read_timed(reader: Any, exp: Any, device: str, lengths: list[int], n: int) -> dict:
    """Each length's fixed test set drawn, then read greedily as evaluate_run reads it, after
    a warm-up: seconds drawing (``synth_s``) and reading (``read_s``), the reading tokens
    (EOS included) and each length's exact accuracy."""
    from attnlab.data.strips import StripSynth, fixed_set
    from attnlab.evaluation.inference import read_strips
    from attnlab.evaluation.metrics import quick_scores
    from attnlab.runtime import bf16_autocast

    dev = torch.device(device)
    batch_size = exp.eval.batch_size
    bf16 = bf16_autocast(exp.train.bf16, dev)
    reader.to(dev).eval()
    synth = StripSynth(exp.data)  # the bank is built here, outside the timing
    # Warm-up on a few strips (first-call costs of the kernels).
    read_strips(reader, fixed_set(synth, "bench", 4, 64), dev, batch_size, bf16=bf16)
    sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    timed: dict[str, Any] = {"synth_s": 0.0, "read_s": 0.0, "tokens": 0, "exact": []}
    for length in lengths:
        t0 = time.perf_counter()
        strips = fixed_set(synth, "test", length, n)
        t1 = time.perf_counter()
        r = read_strips(reader, strips, dev, batch_size, bf16=bf16)  # as evaluate_run reads
        sync(device)
        t2 = time.perf_counter()
        timed["synth_s"] += t1 - t0
        timed["read_s"] += t2 - t1
        timed["tokens"] += sum(len(t) + 1 for t in r.texts)
        timed["exact"].append(quick_scores(strips.labels, r.texts)[0])
    return timed


def full_evaluate_run(ckpt_path: Path, device: str, n: int) -> float:
    """``attnlab eval`` end to end (tables, bootstrap, maps) on a copy of the checkpoint, so
    nothing is written into the run itself."""
    import shutil

    from attnlab.config import EvalConfig
    from attnlab.evaluation.evaluate import evaluate_run

    with tempfile.TemporaryDirectory(prefix="attnlab_bench_eval_") as tmp:
        copy = Path(tmp) / "checkpoints" / "best.pt"
        copy.parent.mkdir(parents=True)
        shutil.copy2(ckpt_path, copy)
        t0 = time.perf_counter()
        evaluate_run(Path(tmp), EvalConfig(n=n), "best", device, say=lambda *_: None)
        sync(device)
        return time.perf_counter() - t0


def show(r: dict[str, Any], device: str) -> None:
    print(f"eval: read_strips (greedy) on {device}; {r['source']}")
    lo, hi = r["lengths"]
    row = [
        f"{lo}..{hi} x {r['n_per_length']}",
        fmt(r["strips_per_s"]),
        fmt(r["read_strips_per_s"]),
        f"{r['synth_s']} + {r['read_s']} = {r['seconds']} s",
        f"{r['default_eval_strips'] // 1000} x 1000: {r['projected_default_eval_s']} s",
        f"< {r['target_s']:.0f} s",
        verdict(r["meets_target"]),
    ]
    header = ["strips", "strips/s", "read only", "synth + read", "default eval", "target", ""]
    print(table([row], header))
    cuda = f"; peak CUDA {fmt(r['peak_cuda_mib'])} MiB" if "peak_cuda_mib" in r else ""
    print(
        f"(mean reading {r['mean_reading_tokens']} tokens incl. EOS; exact accuracy "
        f"{100 * r['mean_exact_acc']:.1f}% averaged over lengths; batch {r['batch_size']}; "
        f"peak RSS {fmt(r['peak_rss_mib'])} MiB{cuda})"
    )
    if not r["trained"]:
        print(
            "NOTE: an untrained reader rarely emits EOS, so it decodes to its step limit (one "
            "step per encoder column): this over-states the time a trained reader takes."
        )
    if "full_evaluate_run_s" in r:
        print(f"full evaluate_run (tables, bootstrap, maps): {r['full_evaluate_run_s']} s")
