"""The bench's sections (attnlab.bench), each run on preset=tiny for a fraction of a second:
the figures they return are the numbers they claim to be (rates from counts and seconds,
FLOPs counted, ratios to the measured peak)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnlab.bench import converge, explorer_size, flops, folder, synth, train
from attnlab.bench import eval as evaluation
from attnlab.runs.rundir import RunDir
from attnlab.tasks.compose import compose

# One torch thread: on a busy two-core machine, two threads wait on each other.
TINY = ["preset=tiny", "train.progress=plain", "train.threads=1"]
ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # timings on one thread


def test_compose_is_the_train_config_with_overrides():
    cfg = compose(["preset=tiny", "model=fixed", "train.steps=7"])
    assert cfg.model.name == "fixed" and cfg.train.steps == 7 and cfg.model.hidden == 16
    assert compose([], config_name="sweep").train.steps == 2500


def test_synth_section():
    r = synth.run(0.2, batch=64, data=compose(TINY).data)
    assert r["strips"] >= 64 and r["strips"] % 64 == 0
    assert r["strips_per_s"] == pytest.approx(r["strips"] / r["seconds"], rel=0.05)
    assert r["meets_target"] == (r["strips_per_s"] >= synth.TARGET)


def test_matmul_peak_is_a_rate():
    peak = flops.matmul_peak(128, repeats=2)
    assert peak["gflop_per_s"] == pytest.approx(2 * 128**3 / peak["best_s"] / 1e9, rel=0.01)
    assert peak["threads"] == torch.get_num_threads()


def test_train_section():
    r = train.run("attention", "cpu", 0.3, TINY, peak_n=256)
    assert r["steps"] >= 1 and r["batch_size"] == 32 and math.isfinite(r["loss"])
    assert r["strips_per_s"] == pytest.approx(r["steps"] * 32 / r["seconds"], rel=0.05)
    assert 0 <= r["data_share"] <= 1 and r["bf16_autocast"] is False
    # FLOPs of one step, counted: at least the GRU encoder's input and hidden products
    # (2 directions x 3 gates x 2 FLOPs x hidden x (in + hidden), per column, forward only).
    assert r["flops_per_strip"] > 2 * 3 * 2 * 16 * (8 + 16)
    assert r["gflop_per_s"] == pytest.approx(
        r["strips_per_s"] * r["flops_per_strip"] / 1e9, rel=0.01
    )
    assert r["peak_gflop_per_s"] > 0 and 0 < r["peak_ratio"] <= 1.5
    assert r["peak_ratio"] == pytest.approx(r["gflop_per_s"] / r["peak_gflop_per_s"], rel=0.01)


def test_the_train_section_times_the_own_strips_recipe_at_each_height():
    from attnlab.tasks.recipe import HEIGHTS, READERS, recipe_keys

    rows = train.run_recipes("cpu", 0.2, TINY, peak_n=256)
    assert [r["reader"] for r in rows] == [f"recipe: {READERS[h]} at {h} px" for h in HEIGHTS]
    for height, r in zip(HEIGHTS, rows, strict=True):
        assert r["steps"] >= 1 and r["overrides"] == [*recipe_keys(height)[1:], *TINY]


def tiny_run(tmp_path: Path, reader: str = "attention") -> Path:
    from attnlab.training.trainer import Trainer

    cfg = compose([*TINY, f"model={reader}", "train.steps=6", "train.val_every=3"])
    Trainer(cfg, RunDir(tmp_path)).run()
    return tmp_path


def test_eval_section_untrained():
    r = evaluation.run("cpu", None, "attention", TINY, n=3)
    assert r["lengths"] == [1, 6] and r["strips"] == 18 and not r["trained"]
    # Each figure is rounded on its own: "seconds" to 1 ms, rates and projections to 0.1.
    lo, hi = r["seconds"] - 0.0005, r["seconds"] + 0.0005
    assert 18 / hi - 0.05 <= r["strips_per_s"] <= 18 / max(lo, 1e-9) + 0.05
    assert r["read_strips_per_s"] >= r["strips_per_s"] and 0 <= r["mean_exact_acc"] <= 1
    assert lo * 6000 / 18 - 0.05 <= r["projected_default_eval_s"] <= hi * 6000 / 18 + 0.05


def test_eval_section_of_a_run_and_its_full_evaluation(tmp_path):
    run = tiny_run(tmp_path / "run")
    r = evaluation.run("cpu", run, n=3, full=True)
    assert r["trained"] and r["source"].startswith(str(run)) and r["strips"] == 18
    assert r["full_evaluate_run_s"] > 0
    assert not (run / "eval").exists()  # the full evaluation read a copy


def test_converge_section_stops_at_the_threshold_or_the_time_limit():
    reached = converge.run("fixed", "cpu", TINY, val_every=2, threshold=0.0, say=lambda _: None)
    assert reached["reached"] and reached["steps"] == 2 and len(reached["trace"]) == 1
    late = converge.run(
        "fixed", "cpu", TINY, max_seconds=0.3, val_every=1000, threshold=1.1, say=lambda _: None
    )
    assert not late["reached"] and late["train_s"] >= 0.3 and not late["meets_target"]
    assert late["trace"][-1]["step"] == late["steps"] < 1000


def test_folder_section(tmp_path):
    over = [*TINY, "data.train_lengths=[1,8]"]  # the exported folder's lengths
    r = folder.run("fixed", "cpu", 0.3, over, n=160, child=False, peak_n=128)
    assert r["synthesis"]["strips_per_s"] > 0 and r["folder"]["strips_per_s"] > 0
    assert r["ratio"] == pytest.approx(
        r["folder"]["strips_per_s"] / r["synthesis"]["strips_per_s"], rel=0.01
    )
    assert "data=folder" in r["folder"]["overrides"]


def test_explorer_size_builds_a_page(tmp_path):
    """And writes it whole (attnlab.io): an earlier page is replaced in one rename (a link
    to it keeps its bytes), and no temporary file is left beside the page."""
    earlier = tmp_path / "index_1.html"
    earlier.write_text("earlier page")
    os.link(earlier, tmp_path / "kept.html")
    page = explorer_size.build(tmp_path, 1, compose(TINY).data)
    assert page == earlier
    assert page.stat().st_size > 10_000 and "ex-view" in page.read_text()
    assert (tmp_path / "kept.html").read_text() == "earlier page"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_bench_refuses_cuda_without_a_gpu_in_one_line():
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--device", "cuda", "--only", "synth"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "bench: error: device: 'cuda' asked for, but no CUDA GPU is available here"
    )
