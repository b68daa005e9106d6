"""Speed of attnlab's moving parts, with the targets they are held to printed beside them.

    python scripts/bench.py                        # synth, train, eval (1-2 minutes on CPU)
    python scripts/bench.py --only synth,train     # a subset
    python scripts/bench.py --only eval --run outputs/RUN   # time the default evaluation
    python scripts/bench.py --only converge [--reader fixed] [--max-seconds 300]
    python scripts/bench.py --device cuda --json bench.json  # also write the figures
    python scripts/bench.py --threads 1            # torch threads (default: torch's own)

Sections:
  synth     strips/s of synthesis (8-digit strips, batches of 1024) on ONE CPU core
  train     strips/s of the real training step (attnlab.tasks.train.Trainer.train_step) of each
            reader at the default config, and peak memory; each reader runs in its own
            process so that its peak resident memory is its own
  eval      strips/s of greedy reading (attnlab.tasks.evaluate.read_strips); with --run, the time
            of the default evaluation (fixed test sets of lengths 1..2x the longest seen
            length, 1,000 strips each); without it, an untrained attention reader
  converge  (only when asked) training wall time until every seen length reaches 99% exact
            accuracy on its validation set
  folder    (only when asked) strips/s of training from a folder of labelled strips
            (data=folder: an `attnlab data export` of --folder-n strips, lengths 1-8) against
            training on synthesis, one after the other, same reader; target >= 90%
  typefaces (only when asked) held-out typeface benchmark: scripts/typefaces.py with its
            defaults (one training per left-out family; about 3 minutes each on 2 cores)

Numbers are wall-clock on whatever else the machine is doing: on a shared machine, run twice.
On a busy machine, torch's default of one thread per core can be several times slower than
--threads 1 (its threads wait on each other); compare both before reading much into a figure.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from attnlab.runs.rundir import RunDir

SECTIONS = ("synth", "train", "eval", "converge", "typefaces", "folder")
DEFAULT_SECTIONS = ("synth", "train", "eval")

SYNTH_TARGET = 20_000  # strips/s on one core
# A plain per-column BiGRU reader, batch 128, on 2 CPU cores; the targets are twice these.
# Readers without a reference figure (every reader after the lab's two) show their speed only.
TRAIN_REFERENCE = {"fixed": 1_000, "attention": 650}
EVAL_TARGET_S = 30.0  # the default evaluation (16 lengths x 1,000 strips) on a 2-core CPU
CONVERGE_REFERENCE_S = 150.0  # to 97% on the seen lengths
CONVERGE_TARGET_S = 90.0  # to 99% on every seen length
FOLDER_TARGET = 0.9  # folder strips/s over synthesis strips/s, same reader


# ---------------------------------------------------------------------------------------------
# Helpers


def registry_names() -> list[str]:
    """Every registered reader (the lab's two first)."""
    from attnlab.models import registry

    return registry.names()


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        sys.exit("bench: --device cuda asked for, but torch sees no CUDA device")
    return name


def compose(reader: str, device: str, overrides: list[str]):
    """The config ``attnlab train model=READER`` would run with."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from attnlab.models import registry

    registry.discover()  # every reader's config schema, as the CLI's tasks register them
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="attnlab.conf", version_base="1.3"):
        return hydra_compose(
            config_name="train",
            overrides=[f"model={reader}", f"train.device={device}", *overrides],
        )


def maxrss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def current_rss_mib() -> float | None:
    """Resident memory now (Linux only)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kib = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
    return None if kib is None else int(kib) / 1024


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def in_child(fn, *args):
    """Run ``fn(*args)`` in a fresh process, so that its peak memory is its own."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def machine(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "host": platform.node(),
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def config_label(overrides: list[str]) -> str:
    return "default config" + (f" + {' '.join(overrides)}" if overrides else "")


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else "ok" if ok else "BELOW TARGET"


# ---------------------------------------------------------------------------------------------
# synth


def bench_synth(seconds: float) -> dict[str, Any]:
    from attnlab.config import DataConfig
    from attnlab.data.strips import StripSynth

    t0 = time.perf_counter()
    synth = StripSynth(DataConfig())
    bank_s = time.perf_counter() - t0
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        lengths = torch.full((1024,), 8)
        for _ in range(3):
            synth.sample(lengths, gen)
        n, t0 = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds:
            n += len(synth.sample(lengths, gen))
    finally:
        torch.set_num_threads(saved)
    rate = n / elapsed
    return {
        "strips_per_s": round(rate, 1),
        "strips": n,
        "seconds": round(elapsed, 2),
        "glyph_bank_build_s": round(bank_s, 2),
        "target_strips_per_s": SYNTH_TARGET,
        "meets_target": rate >= SYNTH_TARGET,
    }


def show_synth(r: dict[str, Any]) -> None:
    print("synth: 8-digit strips, default DataConfig, batches of 1024, 1 CPU thread")
    rows = [
        [
            fmt(r["strips_per_s"]),
            "-" if r["target_strips_per_s"] is None else f">= {fmt(r['target_strips_per_s'])}",
            verdict(r["meets_target"]),
            f"{r['strips']} strips in {r['seconds']} s",
        ]
    ]
    print(table(rows, ["strips/s", "target", "", "measured"]))
    print(f"(glyph bank built once per process in {r['glyph_bank_build_s']} s, not timed)")


# ---------------------------------------------------------------------------------------------
# train


def bench_train(reader: str, device: str, seconds: float, overrides: list[str]) -> dict[str, Any]:
    """Runs in its own process: Trainer.train_step of one reader at the default config."""
    from attnlab.training.trainer import Trainer

    cfg = compose(reader, device, overrides)
    with tempfile.TemporaryDirectory(prefix="attnlab_bench_") as tmp:
        trainer = Trainer(cfg, RunDir(tmp))
        setup_peak = maxrss_mib()  # includes the transient peak of building the glyph bank
        # Time spent drawing strips, to tell the data pipeline from the model.
        data_s = [0.0]
        draw = trainer.stream.next

        def timed_next():
            t = time.perf_counter()
            batch = draw()
            data_s[0] += time.perf_counter() - t
            return batch

        trainer.stream.next = timed_next  # type: ignore[method-assign]
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        for _ in range(3):
            trainer.train_step()
        sync(device)
        data_s[0] = 0.0
        steps, t0 = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds:
            loss = trainer.train_step()
            steps += 1
        sync(device)
        elapsed = time.perf_counter() - t0
        t = cfg.train
        strips = steps * t.batch_size * t.accumulate
        out = {
            "reader": reader,
            "overrides": list(overrides),
            "strips_per_s": round(strips / elapsed, 1),
            "steps": steps,
            "seconds": round(elapsed, 2),
            "batch_size": t.batch_size * t.accumulate,
            "data_share": round(data_s[0] / elapsed, 3),
            "params": trainer.params,
            "loss": round(loss, 4),
            "torch_threads": torch.get_num_threads(),
            "peak_rss_mib": round(maxrss_mib(), 1),
            "setup_peak_rss_mib": round(setup_peak, 1),
            "rss_after_mib": None if (now := current_rss_mib()) is None else round(now, 1),
            "bf16_autocast": trainer.autocast,
            "reference_strips_per_s": TRAIN_REFERENCE.get(reader),
            "target_strips_per_s": 2 * TRAIN_REFERENCE[reader]
            if reader in TRAIN_REFERENCE
            else None,
        }
        target = out["target_strips_per_s"]
        out["meets_target"] = None if target is None else out["strips_per_s"] >= target
        if device.startswith("cuda"):
            out["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return out


def show_train(results: list[dict[str, Any]], device: str) -> None:
    label = config_label(results[0]["overrides"])
    print(f"train: Trainer.train_step, {label} on {device}")
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


# ---------------------------------------------------------------------------------------------
# folder: training on labelled strips against synthesis


def bench_folder(args, device: str) -> dict[str, Any]:
    """The training step's strips/s with data=folder (a folder exported here) and with
    synthesis, each in its own process; the folder's decoding is set-up, not timed."""
    import subprocess

    reader = args.reader or "attention"
    with tempfile.TemporaryDirectory(prefix="attnlab_bench_folder_") as tmp:
        folder = Path(tmp) / "strips"
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "attnlab.cli", "data", "export", str(folder)]
        subprocess.run([*cmd, "--n", str(args.folder_n), "--lengths", "1-8"], check=True)
        export_s = time.perf_counter() - t0
        synth = in_child(bench_train, reader, device, args.train_seconds, args.override)
        real_overrides = [*args.override, "data=folder", f"data.path={folder}"]
        real = in_child(bench_train, reader, device, args.train_seconds, real_overrides)
    ratio = real["strips_per_s"] / max(synth["strips_per_s"], 1e-9)
    return {
        "reader": reader,
        "strips": args.folder_n,
        "export_s": round(export_s, 1),
        "synthesis": synth,
        "folder": real,
        "ratio": round(ratio, 3),
        "target_ratio": FOLDER_TARGET,
        "meets_target": ratio >= FOLDER_TARGET,
    }


def show_folder(r: dict[str, Any], device: str) -> None:
    print(f"folder: Trainer.train_step of the {r['reader']} reader on {device}")
    runs = (("synthesis", r["synthesis"]), (f"folder ({r['strips']} strips)", r["folder"]))
    rows = [
        [name, fmt(x["strips_per_s"]), f"{x['steps']} x {x['batch_size']} in {x['seconds']} s",
         f"{100 * x['data_share']:.0f}%"]
        for name, x in runs
    ]  # fmt: skip
    print(table(rows, ["training strips", "strips/s", "steps", "data share"]))
    print(
        f"folder / synthesis = {100 * r['ratio']:.0f}% (target >= {100 * r['target_ratio']:.0f}%) "
        f"{verdict(r['meets_target'])}; export of the folder took {r['export_s']} s"
    )


# ---------------------------------------------------------------------------------------------
# eval


def bench_eval(args, device: str) -> dict[str, Any]:
    from attnlab.config import seen_lengths
    from attnlab.data.strips import StripSynth, fixed_set
    from attnlab.evaluation.inference import read_strips
    from attnlab.evaluation.metrics import quick_scores
    from attnlab.models import registry
    from attnlab.runs import checkpoint
    from attnlab.tasks.evaluate import default_lengths

    dev = torch.device(device)
    if args.run:
        ckpt_path = checkpoint.resolve(args.run, "best")
        ckpt = checkpoint.load(ckpt_path)
        reader, exp = checkpoint.restore_reader(ckpt, ckpt_path)
        source = f"{ckpt_path} (step {int(ckpt.get('step', 0))})"
        n = args.eval_n or exp.eval.n
        batch_size = exp.eval.batch_size
        data, lengths = exp.data, default_lengths(seen_lengths(exp.data))
    else:
        exp = compose(args.reader or "attention", device, args.override)
        torch.manual_seed(0)
        reader = registry.build(exp.model, exp.data.height)
        source = f"UNTRAINED {reader.name} reader (random weights; pass --run RUN for real figures)"
        n = args.eval_n or 100
        batch_size = exp.eval.batch_size
        data, lengths = exp.data, default_lengths(seen_lengths(exp.data))
    reader.to(dev).eval()
    synth = StripSynth(data)  # the bank is built here, outside the timing

    # Warm-up on a few strips (first-call costs of the kernels).
    read_strips(reader, fixed_set(synth, "bench", 4, 64), dev, batch_size)
    sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    synth_s = read_s = 0.0
    steps_total = 0
    exact = []
    for length in lengths:
        t0 = time.perf_counter()
        strips = fixed_set(synth, "test", length, n)
        t1 = time.perf_counter()
        r = read_strips(reader, strips, dev, batch_size)  # as evaluate_run calls it
        sync(device)
        t2 = time.perf_counter()
        synth_s += t1 - t0
        read_s += t2 - t1
        steps_total += sum(len(t) + 1 for t in r.texts)
        exact.append(quick_scores(strips.labels, r.texts)[0])
    total = len(lengths) * n
    default_total = len(lengths) * 1000
    wall = synth_s + read_s
    out: dict[str, Any] = {
        "source": source,
        "trained": bool(args.run),
        "lengths": [lengths[0], lengths[-1]],
        "n_per_length": n,
        "batch_size": batch_size,
        "strips": total,
        "synth_s": round(synth_s, 2),
        "read_s": round(read_s, 2),
        "seconds": round(wall, 2),
        "strips_per_s": round(total / wall, 1),
        "read_strips_per_s": round(total / read_s, 1),
        "mean_reading_tokens": round(steps_total / total, 2),
        "mean_exact_acc": round(sum(exact) / len(exact), 4),
        "default_eval_strips": default_total,
        "projected_default_eval_s": round(wall * default_total / total, 1),
        "target_s": EVAL_TARGET_S,
        "peak_rss_mib": round(maxrss_mib(), 1),
    }
    out["meets_target"] = out["projected_default_eval_s"] < EVAL_TARGET_S
    if device.startswith("cuda"):
        out["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if args.run and args.eval_full:
        out["full_evaluate_run_s"] = round(full_evaluate_run(ckpt_path, device, n), 1)
    return out


def full_evaluate_run(ckpt_path: Path, device: str, n: int) -> float:
    """``attnlab eval`` end to end (tables, bootstrap, maps) on a copy of the checkpoint, so
    nothing is written into the run itself."""
    import shutil

    from attnlab.config import EvalConfig
    from attnlab.tasks.evaluate import evaluate_run

    with tempfile.TemporaryDirectory(prefix="attnlab_bench_eval_") as tmp:
        copy = Path(tmp) / "checkpoints" / "best.pt"
        copy.parent.mkdir(parents=True)
        shutil.copy2(ckpt_path, copy)
        t0 = time.perf_counter()
        evaluate_run(Path(tmp), EvalConfig(n=n), "best", device, say=lambda *_: None)
        sync(device)
        return time.perf_counter() - t0


def show_eval(r: dict[str, Any], device: str) -> None:
    print(f"eval: read_strips (greedy) on {device}; {r['source']}")
    lo, hi = r["lengths"]
    rows = [
        [
            f"{lo}..{hi} x {r['n_per_length']}",
            fmt(r["strips_per_s"]),
            fmt(r["read_strips_per_s"]),
            f"{r['synth_s']} + {r['read_s']} = {r['seconds']} s",
            f"{r['default_eval_strips'] // 1000} x 1000: {r['projected_default_eval_s']} s",
            f"< {r['target_s']:.0f} s",
            verdict(r["meets_target"]),
        ]
    ]
    header = ["strips", "strips/s", "read only", "synth + read", "default eval", "target", ""]
    print(table(rows, header))
    print(
        f"(mean reading {r['mean_reading_tokens']} tokens incl. EOS; exact accuracy "
        f"{100 * r['mean_exact_acc']:.1f}% averaged over lengths; batch {r['batch_size']}; "
        f"peak RSS {fmt(r['peak_rss_mib'])} MiB"
        + (f"; peak CUDA {fmt(r['peak_cuda_mib'])} MiB" if "peak_cuda_mib" in r else "")
        + ")"
    )
    if not r["trained"]:
        print(
            "NOTE: an untrained reader rarely emits EOS, so it decodes to its step limit (one "
            "step per encoder column): this over-states the time a trained reader takes."
        )
    if "full_evaluate_run_s" in r:
        print(f"full evaluate_run (tables, bootstrap, maps): {r['full_evaluate_run_s']} s")


# ---------------------------------------------------------------------------------------------
# typefaces


def bench_typefaces(reader: str) -> dict[str, Any]:
    """scripts/typefaces.py (it prints its own table)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "typefaces", Path(__file__).with_name("typefaces.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.main(["--model", reader])


# ---------------------------------------------------------------------------------------------
# converge


def bench_converge(args, device: str, reader: str) -> dict[str, Any]:
    from attnlab.training.trainer import Trainer

    cfg = compose(reader, device, args.override)
    with tempfile.TemporaryDirectory(prefix="attnlab_bench_") as tmp:
        trainer = Trainer(cfg, RunDir(tmp))
        train_s = val_s = 0.0
        start = time.perf_counter()
        trace: list[dict[str, Any]] = []
        reached = False
        mean_97: dict[str, Any] | None = None  # first validation with mean exact >= 97%
        while True:
            t0 = time.perf_counter()
            for _ in range(args.val_every):
                trainer.train_step()
                trainer.step += 1
                if train_s + time.perf_counter() - t0 >= args.max_seconds:
                    break  # out of time: one last validation
            sync(device)
            t1 = time.perf_counter()
            val = trainer.validate()
            val_s += time.perf_counter() - t1
            train_s += t1 - t0
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
            print(
                f"  step {trainer.step:5d}  train {train_s:6.1f} s  val exact "
                f"{100 * val['exact_acc']:5.1f}%  worst: length {worst_len} at "
                f"{100 * worst:5.1f}%",
                flush=True,
            )
            if worst >= args.threshold:
                reached = True
                break
            if train_s >= args.max_seconds:
                break
        total = time.perf_counter() - start
    return {
        "reader": reader,
        "threshold": args.threshold,
        "reached": reached,
        "steps": trainer.step,
        "train_s": round(train_s, 1),
        "validation_s": round(val_s, 1),
        "total_s": round(total, 1),
        "val_every": args.val_every,
        "max_seconds": args.max_seconds,
        "overrides": list(args.override),
        "mean_97": mean_97,
        "trace": trace,
        "reference_s": CONVERGE_REFERENCE_S,
        "target_s": CONVERGE_TARGET_S,
        "meets_target": reached and train_s <= CONVERGE_TARGET_S,
    }


def show_converge(r: dict[str, Any], device: str) -> None:
    print(
        f"converge: {r['reader']} reader, {config_label(r['overrides'])} on {device}, "
        f"validation every "
        f"{r['val_every']} steps; stop when every seen length >= {100 * r['threshold']:.0f}%"
    )
    got = "reached" if r["reached"] else f"NOT reached within {r['max_seconds']:.0f} s"
    rows = [
        [
            got,
            str(r["steps"]),
            f"{r['train_s']} s",
            f"{r['validation_s']} s",
            f"{r['total_s']} s",
            f"<= {r['target_s']:.0f} s",
            verdict(r["meets_target"]),
        ]
    ]
    print(table(rows, ["", "steps", "training", "validation", "total", "target", ""]))
    m = r["mean_97"]
    got97 = "not reached" if m is None else f"{m['train_s']} s (step {m['step']})"
    print(
        f"(reference: ~{r['reference_s']:.0f} s to 97% on the seen lengths; here mean exact "
        f">= 97% after {got97})"
    )


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmarks of attnlab: synthesis, training, evaluation, convergence.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("Sections:")[1] if __doc__ else None,
    )
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_SECTIONS),
        help=f"comma-separated sections of {','.join(SECTIONS)} (default: %(default)s)",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    p.add_argument(
        "--reader",
        choices=registry_names(),
        help="train: only this reader (default: every registered reader); converge, eval, "
        "typefaces: this reader (default attention)",
    )
    p.add_argument("--synth-seconds", type=float, default=3.0, help="timed seconds (synth)")
    p.add_argument("--train-seconds", type=float, default=10.0, help="timed seconds per reader")
    p.add_argument("--run", type=Path, help="eval: a trained run directory (its best.pt)")
    p.add_argument(
        "--eval-n",
        type=int,
        default=0,
        help="eval: strips per length (default: the run's eval.n, or 100 without --run)",
    )
    p.add_argument(
        "--eval-full",
        action="store_true",
        help="eval: also time evaluate_run end to end (tables, bootstrap, maps); needs --run",
    )
    p.add_argument("--folder-n", type=int, default=20_000, help="folder: strips exported")
    p.add_argument("--max-seconds", type=float, default=300.0, help="converge: training limit")
    p.add_argument("--val-every", type=int, default=50, help="converge: steps between checks")
    p.add_argument("--threshold", type=float, default=0.99, help="converge: exact accuracy")
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU threads for torch outside synth (sets train.threads too); 0 = torch's default",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Hydra override for the composed train config (repeatable), e.g. preset=gpu",
    )
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        p.error(f"--only: unknown section(s) {', '.join(unknown)}; choose from {SECTIONS}")
    if args.eval_full and not args.run:
        p.error("--eval-full needs --run")
    if args.threads < 0:
        p.error("--threads must be >= 0")
    if args.threads:
        args.override = [f"train.threads={args.threads}", *args.override]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine(device)
    print(
        f"machine: {info['host']}  nproc {info['nproc']} (usable {info['affinity']})  "
        f"torch {info['torch']} ({info['torch_threads']} threads)  python {info['python']}  "
        f"device {device}" + (f" [{info['gpu']}, CUDA {info['cuda']}]" if "gpu" in info else "")
    )
    if info["load_avg"]:
        print(f"load average at start: {info['load_avg']} (other work skews the timings)")
    report: dict[str, Any] = {"machine": info, "sections": {}}
    started = time.perf_counter()

    def save() -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.json.with_suffix(args.json.suffix + ".tmp")
            tmp.write_text(json.dumps(report, indent=2) + "\n")
            tmp.replace(args.json)

    for section in [s for s in SECTIONS if s in args.sections]:
        print()
        if section == "synth":
            r = bench_synth(args.synth_seconds)
            show_synth(r)
        elif section == "train":
            readers = [args.reader] if args.reader else registry_names()
            results = []
            for reader in readers:
                results.append(
                    in_child(bench_train, reader, device, args.train_seconds, args.override)
                )
            r = {x["reader"]: x for x in results}
            show_train(results, device)
        elif section == "eval":
            r = bench_eval(args, device)
            show_eval(r, device)
        elif section == "typefaces":
            r = bench_typefaces(args.reader or "attention")
        elif section == "folder":
            r = bench_folder(args, device)
            show_folder(r, device)
        else:
            r = bench_converge(args, device, args.reader or "attention")
            show_converge(r, device)
        report["sections"][section] = r
        save()
    report["total_s"] = round(time.perf_counter() - started, 1)
    save()
    where = f"; figures in {args.json}" if args.json else ""
    print(f"\nbench done in {report['total_s']} s{where}")
    return 0


if __name__ == "__main__":
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from attnlab.errors import UserError

    try:
        sys.exit(main())
    except (UserError, HydraException, OmegaConfBaseException) as err:
        # A bad --run or --override: one line, as the CLI does.
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"bench: error: {first}", file=sys.stderr)
        sys.exit(2)
