"""attnlab.report on hand-made run directories: discovery, seed aggregation, files written."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.runs import EVAL_HEADER, write_run

from attnlab import report
from attnlab.evaluation.metrics import METRICS
from attnlab.report import (
    ReportError,
    aggregate,
    build_report,
    discover_runs,
    figures,
    reader_styles,
)
from attnlab.runs.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]


def write_sweep(sweep: Path, jobs: list[dict]) -> Path:
    """A Hydra multirun directory: multirun.yaml at the top, jobs in 0/, 1/, ..."""
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra:\n  mode: MULTIRUN\n")
    for i, job in enumerate(jobs):
        write_run(sweep / str(i), **job)
    return sweep


def _row(agg: pd.DataFrame, **where) -> pd.Series:
    mask = np.ones(len(agg), dtype=bool)
    for key, value in where.items():
        mask &= (agg[key] == value).to_numpy()
    assert mask.sum() == 1, f"{mask.sum()} rows match {where}"
    return agg[mask].iloc[0]


# --------------------------------------------------------------------------- discovery


def test_discovery_finds_single_runs_and_sweep_jobs(tmp_path):
    write_run(tmp_path / "outputs/2024-05-01/10-00-00", seed=0)
    write_run(tmp_path / "outputs/2024-05-01/11-00-00", seed=1, reader="fixed", eval_name=None)
    write_sweep(
        tmp_path / "multirun/2024-05-02/09-00-00",
        [{"seed": s, "train_set": [2, 4, 6]} for s in range(3)],
    )
    # a report or eval tree holding a copied .hydra must not count as a run
    for stray in ("outputs/2024-05-01/10-00-00/eval/synthetic-greedy/copy", "outputs/report"):
        (tmp_path / stray / ".hydra").mkdir(parents=True)
        (tmp_path / stray / ".hydra/config.yaml").write_text("seed: 9\n")

    runs = discover_runs([tmp_path / "outputs", tmp_path / "multirun"])
    assert len(runs) == 5
    by_seed = {(r.train, r.seed): r for r in runs}
    single = by_seed[("1-8", 0)]
    assert single.reader == "attention" and single.status == "complete"
    assert single.seen_lengths == list(range(1, 9))
    assert single.evals == ["synthetic-greedy"] and single.problems == []
    assert single.sweep is None
    job = by_seed[("2,4,6", 2)]
    assert job.seen_lengths == [2, 4, 6]
    assert job.sweep == (tmp_path / "multirun/2024-05-02/09-00-00").resolve()
    assert by_seed[("1-8", 1)].problems == ["no evaluation"]


def test_discovery_of_nothing_and_of_a_missing_path(tmp_path):
    assert discover_runs([tmp_path]) == []
    with pytest.raises(ReportError, match="no runs found under"):
        build_report([tmp_path], tmp_path / "report")
    with pytest.raises(ReportError, match="no such file or directory"):
        discover_runs([tmp_path / "nope"])


def test_problems_of_incomplete_runs(tmp_path):
    write_run(tmp_path / "a", seed=0, state="failed", error="CUDA out of memory", metrics=False,
              eval_name=None)  # fmt: skip
    write_run(tmp_path / "b", seed=1, state="running", metrics=False, eval_name=None)
    write_run(tmp_path / "c", seed=2, state=None)
    (tmp_path / "d/.hydra").mkdir(parents=True)
    (tmp_path / "d/.hydra/config.yaml").write_text("seed: 3\n")
    write_run(tmp_path / "e", seed=4)
    (tmp_path / "e/metrics.json").write_text("{not json")
    csv = tmp_path / "e/eval/synthetic-greedy/metrics_by_length.csv"
    csv.write_text(csv.read_text().replace("\n3,seen", "\nthree,seen"))
    (tmp_path / "f/.hydra").mkdir(parents=True)
    (tmp_path / "f/.hydra/config.yaml").write_text("seed: [unclosed\n")
    with RunDir(tmp_path / "b").lock("train"):  # a live process holds run b
        runs = {r.path.name: r for r in discover_runs([tmp_path])}
    assert runs["e"].problems[0].startswith("unreadable metrics.json")
    assert runs["e"].problems[1] == (
        "eval/synthetic-greedy: metrics_by_length.csv has bad length 'three'"
    )
    assert runs["e"].evals == []
    assert runs["f"].problems[0].startswith("unreadable .hydra/config.yaml")
    build_report([tmp_path], tmp_path / "report")  # broken runs are listed, never a crash
    assert "has bad length" in (tmp_path / "report/summary.md").read_text()
    assert runs["a"].status == "failed"
    assert runs["a"].problems == [
        "failed: CUDA out of memory",
        "no metrics.json",
        "no evaluation",
    ]
    assert runs["b"].status == "running" and runs["b"].problems[0] == "running (step 700)"
    assert runs["c"].status == "unknown" and runs["c"].problems == ["no status.json"]
    assert runs["c"].evals == ["synthetic-greedy"]  # its evaluation still counts
    assert runs["d"].seed == 3 and runs["d"].reader is None
    assert "config lacks model.name" in runs["d"].problems
    assert "no evaluation" in runs["d"].problems


def test_partial_and_stale_evaluations_are_listed_not_aggregated(tmp_path):
    write_run(tmp_path / "ok", seed=0, acc={9: 0.8})
    write_run(tmp_path / "partial", seed=1, acc={9: 0.0}, eval_json=False)
    write_run(tmp_path / "stale", seed=2, acc={9: 0.0}, eval_step=1000)
    write_run(tmp_path / "killed", seed=3, acc={9: 0.6})
    (tmp_path / "killed/eval/.synthetic-beam4.partial").mkdir()  # left by a dead evaluation
    runs = {r.path.name: r for r in discover_runs([tmp_path])}
    assert runs["ok"].problems == [] and runs["ok"].best_step == 1500
    assert runs["partial"].problems == ["eval/synthetic-greedy: partial (no eval.json)"]
    assert runs["stale"].problems == [
        "eval/synthetic-greedy: stale (read step 1000, best is step 1500)"
    ]
    assert runs["partial"].evals == runs["stale"].evals == []
    assert runs["killed"].problems == ["eval/synthetic-beam4: partial (being written or killed)"]
    assert runs["killed"].evals == ["synthetic-greedy"]
    row = _row(aggregate(list(runs.values())), length=9)
    assert row["n_seeds"] == 2 and row["exact_acc"] == pytest.approx(0.7)  # ok and killed only


def test_running_stale_and_interrupted_status(tmp_path):
    for name, state in [("live", "running"), ("dead", "running"), ("stopped", "interrupted")]:
        write_run(tmp_path / name, seed=0, state=state, metrics=False, eval_name=None,
                  error="interrupted (SIGTERM)" if state == "interrupted" else None)  # fmt: skip
    (tmp_path / "stopped" / "checkpoints").mkdir(exist_ok=True)
    (tmp_path / "stopped" / "checkpoints" / "last.pt").write_bytes(b"")  # what it resumes from
    with RunDir(tmp_path / "live").lock("train"):  # a live process holds only this run
        runs = {r.path.name: r for r in discover_runs([tmp_path])}
        page = build_report([tmp_path], tmp_path / "report").read_text()
    assert runs["live"].status == "running" and runs["live"].problems[0] == "running (step 700)"
    assert runs["dead"].status == "stale"
    assert runs["dead"].problems[0] == (
        "stale: status says running at step 700 but no process holds the run"
    )
    assert runs["stopped"].status == "interrupted"
    assert runs["stopped"].problems[0] == (  # with the command that resumes it
        "interrupted (SIGTERM) at step 700; resumable from last.pt: attnlab train "
        f"hydra.run.dir={tmp_path / 'stopped'}"
    )
    for status in ("running", "stale", "interrupted"):
        assert f'class="badge {status}"' in page


def test_equal_length_sets_form_one_training_range(tmp_path):
    write_run(tmp_path / "range", seed=0, train=(1, 3), acc={5: 0.4})
    write_run(tmp_path / "set", seed=1, train_set=[3, 1, 2], acc={5: 0.6})
    write_run(tmp_path / "gaps", seed=2, train_set=[4, 2, 6])
    runs = {r.path.name: r for r in discover_runs([tmp_path])}
    assert runs["range"].train == runs["set"].train == "1-3"
    assert runs["set"].seen_lengths == [1, 2, 3]
    assert runs["gaps"].train == "2,4,6"
    row = _row(aggregate(list(runs.values())), train="1-3", length=5)
    assert row["n_seeds"] == 2 and row["exact_acc"] == pytest.approx(0.5)


# --------------------------------------------------------------------------- aggregation


def test_t_quantiles():
    assert report.t_quantile_975(1) == pytest.approx(12.706, abs=1e-3)
    assert report.t_quantile_975(4) == pytest.approx(2.776, abs=1e-3)
    assert report.t_quantile_975(30) == pytest.approx(2.042, abs=1e-3)
    assert report.t_quantile_975(50) == pytest.approx(2.009, abs=2e-3)  # table: 2.0086
    assert report.t_quantile_975(10**6) == pytest.approx(1.960, abs=1e-3)


def test_three_seeds_give_mean_and_min_max(tmp_path):
    for seed, a in enumerate([0.9, 0.8, 0.7]):
        write_run(tmp_path / f"r{seed}", seed=seed, acc={12: a}, cer={12: (1 - a) / 4})
    agg = aggregate(discover_runs([tmp_path]))
    assert list(agg.columns) == report.AGG_COLUMNS
    row = _row(agg, train="1-8", reader="attention", eval="synthetic-greedy", length=12)
    assert row["split"] == "unseen" and row["n_seeds"] == 3 and row["interval"] == "min-max"
    assert row["exact_acc"] == pytest.approx(0.8)
    assert (row["exact_lo"], row["exact_hi"]) == pytest.approx((0.7, 0.9))
    assert row["cer"] == pytest.approx(0.05)
    assert (row["cer_lo"], row["cer_hi"]) == pytest.approx((0.025, 0.075))
    seen = _row(agg, reader="attention", length=3)
    assert seen["split"] == "seen" and seen["exact_acc"] == 1.0
    # totals rows keep the "all" label, one per split
    assert set(agg.loc[agg["length"] == "all", "split"]) == {"seen", "unseen"}


def test_five_seeds_give_a_t_interval(tmp_path):
    values = [0.90, 0.80, 0.70, 0.60, 0.50]
    for seed, a in enumerate(values):
        write_run(tmp_path / f"r{seed}", seed=seed, acc={10: a})
    row = _row(aggregate(discover_runs([tmp_path])), length=10)
    # mean 0.70; sample sd = sqrt(0.1 / 4) = 0.158114; se = sd / sqrt(5) = 0.070711;
    # t(0.975, 4) = 2.7764 -> half width 0.196322
    assert row["n_seeds"] == 5 and row["interval"] == "t95"
    assert row["exact_acc"] == pytest.approx(0.70)
    assert row["exact_lo"] == pytest.approx(0.70 - 0.196322, abs=1e-5)
    assert row["exact_hi"] == pytest.approx(0.70 + 0.196322, abs=1e-5)
    # identical seeds: zero-width interval
    same = _row(aggregate(discover_runs([tmp_path])), length=3)
    assert (same["exact_lo"], same["exact_hi"], same["interval"]) == (1.0, 1.0, "t95")


def test_aggregate_filters_by_eval_name(tmp_path):
    write_run(tmp_path / "a", seed=0, eval_name="synthetic-greedy")
    write_run(tmp_path / "b", seed=1, eval_name="synthetic-beam4")
    runs = discover_runs([tmp_path])
    assert set(aggregate(runs)["eval"]) == {"synthetic-greedy", "synthetic-beam4"}
    assert set(aggregate(runs, "synthetic-beam4")["eval"]) == {"synthetic-beam4"}
    empty = aggregate(runs, "nope")
    assert empty.empty and list(empty.columns) == report.AGG_COLUMNS


def test_summary_csv_aggregates_every_metric(tmp_path):
    for seed in range(2):
        write_run(tmp_path / f"a{seed}", seed=seed)
    write_run(tmp_path / "f", seed=0, reader="fixed")  # no attention: no alignment, no entropy
    build_report([tmp_path], tmp_path / "report")
    agg = pd.read_csv(tmp_path / "report/summary.csv", dtype={"length": str})
    assert list(agg.columns) == report.AGG_COLUMNS
    for m in METRICS:
        lo, hi = m.interval or (f"{m.name}_lo", f"{m.name}_hi")
        assert {m.name, lo, hi} <= set(agg.columns)
    for kept in ("exact_acc", "exact_lo", "exact_hi", "cer", "cer_lo", "cer_hi", "n_seeds"):
        assert kept in agg.columns
    att = agg[(agg["reader"] == "attention") & (agg["length"] == "3")].iloc[0]
    assert att["n_seeds"] == 2 and att["interval"] == "min-max"
    assert att["mean_conf"] == pytest.approx(0.95) and att["align"] == pytest.approx(0.9)
    assert att["ref_chars"] == 300 and att["entropy_hi"] == pytest.approx(0.9)
    fixed = agg[(agg["reader"] == "fixed") & (agg["length"] == "3")].iloc[0]
    assert math.isnan(fixed["align"]) and math.isnan(fixed["entropy"])
    md = (tmp_path / "report/summary.md").read_text()
    assert "fixed exact %" in md and "attention CER %" in md and "alignment" not in md


# --------------------------------------------------------------------------- build_report


def _partial_sweep(root: Path) -> Path:
    return write_sweep(
        root,
        [
            {"seed": 0, "acc": {9: 0.6}},
            {"seed": 1, "acc": {9: 0.4}},
            {"seed": 2, "metrics": False, "eval_name": None, "state": "running"},
            {"seed": 3, "state": "failed", "error": "loss is NaN", "eval_name": None},
            {"seed": 0, "reader": "fixed", "acc": {9: 0.1, 8: 0.5}},
        ],
    )


def test_partial_sweep_is_reported_not_dropped(tmp_path):
    sweep = _partial_sweep(tmp_path / "multirun/2024-05-02/09-00-00")
    index = build_report([tmp_path / "multirun"], tmp_path / "report")
    out = tmp_path / "report"
    assert index == out / "index.html"
    agg = pd.read_csv(out / "summary.csv", dtype={"length": str})
    row = agg[(agg["reader"] == "attention") & (agg["length"] == "9")].iloc[0]
    assert row["n_seeds"] == 2 and row["exact_acc"] == pytest.approx(0.5)
    assert row["interval"] == "min-max"

    md = (out / "summary.md").read_text()
    assert "## Incomplete or failed runs" in md
    stale = "stale: status says running at step 700 but no process holds the run"
    assert "failed: loss is NaN" in md and stale in md
    assert str(sweep / "2") in md and str(sweep / "3") in md
    assert "| 9 " in md and "50.0 [40.0, 60.0]" in md  # attention at length 9, in percent
    assert "min-max over seeds" in md

    page = index.read_text()
    assert "failed: loss is NaN" in page and "no evaluation" in page
    assert 'class="badge failed"' in page and 'class="badge stale"' in page and stale in page
    # no stray temp files: every file was written whole then renamed
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert {p.name for p in out.glob("*.png")} == {"accuracy_1_8_synthetic_greedy.png",
                                                   "training_1_8.png"}  # fmt: skip


def test_two_sweeps_together_and_html_content(tmp_path):
    write_sweep(
        tmp_path / "multirun/2024-05-01/08-00-00",
        [{"seed": s, "acc": {9: 0.9 - 0.1 * s}, "maps": {3: (2, 1), 9: (1, 2)}} for s in range(2)],
    )
    write_sweep(
        tmp_path / "multirun/2024-05-03/08-00-00",
        [{"seed": 2, "acc": {9: 0.7}}]
        + [{"seed": s, "train_set": [2, 4, 6], "reader": "fixed"} for s in range(2)],
    )
    write_run(tmp_path / "outputs/2024-05-04/12-00-00", seed=5, reader="fixed", train=(1, 4))
    index = build_report(
        [tmp_path / "multirun/2024-05-01", tmp_path / "multirun/2024-05-03", tmp_path / "outputs"],
        tmp_path / "report",
    )
    agg = pd.read_csv(tmp_path / "report/summary.csv", dtype={"length": str})
    row = agg[(agg["train"] == "1-8") & (agg["reader"] == "attention") & (agg["length"] == "9")]
    assert row["n_seeds"].item() == 3  # seeds from both sweeps
    assert row["exact_acc"].item() == pytest.approx(0.8)
    assert set(agg["train"]) == {"1-8", "2,4,6", "1-4"}

    md = (tmp_path / "report/summary.md").read_text()
    assert md.count("## Trained on lengths") == 3  # one table per training range
    assert md.index("lengths 1-4") < md.index("lengths 1-8") < md.index("lengths 2,4,6")

    page = index.read_text()
    assert page.count("data:image/png;base64,") >= 3 + 3 + 2 * (3 + 3 + 1)
    assert "len03_correct_1.png" in page and "len09_failure_1.png" in page
    assert page.count("<details") >= 6
    assert "train_length_set:" in page and "train_lengths:" in page  # configs are shown
    for sweep in ("2024-05-01/08-00-00", "2024-05-03/08-00-00"):
        assert page.count(sweep) >= 2  # runs table + config of every job
    assert "src=" in page and 'src="maps/' not in page  # nothing links outside the file


def test_html_escapes_inserted_text(tmp_path):
    write_run(tmp_path / "r", seed=0, state="failed", error="<script>alert(1)</script>",
              eval_name="x<y>")  # fmt: skip
    page = build_report([tmp_path], tmp_path / "report").read_text()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "x&lt;y&gt;" in page


def test_plots_draw_every_plot_metric_and_leave_out_what_a_reader_lacks(tmp_path, monkeypatch):
    write_run(tmp_path / "a", seed=0)
    write_run(tmp_path / "f", seed=0, reader="fixed")
    figs = []
    monkeypatch.setattr(figures, "png_bytes", lambda fig: figs.append(fig) or b"png")
    build_report([tmp_path], tmp_path / "report")
    accuracy = figs[0]  # one per (training range, eval), then the training curves
    panels = [ax for ax in accuracy.axes if ax.get_visible()]
    written = set(EVAL_HEADER.split(","))  # metrics the hand-made tables hold
    plotted = [m for m in METRICS if m.plot and m.name in written]
    assert len(panels) == len(plotted)
    for ax, m in zip(panels, plotted, strict=True):
        lines = [line.get_label() for line in ax.get_lines()]
        has_fixed = m.name in ("exact_acc", "cer")  # the fixed reader has no attention weights
        assert lines == (["fixed (1 seed)"] if has_fixed else []) + ["attention (1 seed)"]


def test_readers_are_ordered_coloured_and_described_by_the_registry(tmp_path):
    from matplotlib.colors import to_hex

    from attnlab.models import registry

    names = registry.names()
    assert reader_styles.ordered(["zeta", "attention", "alpha", "fixed"]) == [
        "fixed", "attention", "alpha", "zeta"
    ]  # fmt: skip
    colour = reader_styles.colours(["zeta", "attention", "alpha", "fixed"])

    def palette(i: int) -> str:
        return to_hex(reader_styles.PALETTE[i % len(reader_styles.PALETTE)])

    assert colour["fixed"] == palette(names.index("fixed"))
    assert colour["attention"] == palette(names.index("attention"))
    assert (colour["alpha"], colour["zeta"]) == (palette(len(names)), palette(len(names) + 1))
    assert "not registered" in reader_styles.description("zeta")

    write_run(tmp_path / "runs/a", seed=0, maps={3: (1, 1)})
    write_run(tmp_path / "runs/f", seed=0, reader="fixed")
    write_run(tmp_path / "runs/z", seed=0, reader="zeta")  # a plugin not loaded here
    page = build_report([tmp_path / "runs"], tmp_path / "report").read_text()
    assert registry.get("attention").description in page
    assert registry.get("fixed").description in page
    assert "zeta" in page and "not registered" in page
    assert page.count("No maps: no attention weights") == 2  # the fixed reader and zeta


def test_report_package_names_no_reader_and_writes_no_html_in_python():
    package = ROOT / "attnlab/report"
    for path in [*package.glob("*.py"), *package.glob("templates/*.j2")]:
        text = path.read_text()
        assert not re.search(r"[\"'](fixed|attention)[\"']", text), path
        if path.suffix == ".py":
            assert "html.escape" not in text and not re.search(r"\bf[\"']<", text), path


def test_report_files_are_readable_by_everyone_under_umask_022(tmp_path):
    write_run(tmp_path / "runs/a", seed=0, maps={3: (1, 1)})
    old = os.umask(0o022)
    try:
        build_report([tmp_path / "runs"], tmp_path / "report")
    finally:
        os.umask(old)
    entries = list((tmp_path / "report").iterdir())
    assert len(entries) == 6  # index.html, summary.csv, summary.md, two PNGs, tensorboard/
    files = [p for p in (tmp_path / "report").rglob("*") if p.is_file()]
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o644)}


@pytest.mark.slow
def test_check_report_script(tmp_path):
    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("no Chromium binary on PATH (chromium, chromium-browser, google-chrome)")
    write_run(tmp_path / "runs/a", seed=0, acc={9: 0.5}, maps={9: (1, 1)})
    write_run(tmp_path / "runs/b", seed=0, reader="fixed", acc={9: 0.2})
    build_report([tmp_path / "runs"], tmp_path / "report")
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/check_report.sh"), str(tmp_path / "report"), str(shot)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(shot)
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] == 3000 and pixels.shape[1] == 1400
    assert pixels[..., :3].std() > 0.05  # not a blank page


@pytest.mark.slow
def test_check_report_script_without_browser(tmp_path):
    write_run(tmp_path / "runs/a", seed=0)
    build_report([tmp_path / "runs"], tmp_path / "report")
    proc = subprocess.run(
        [
            shutil.which("bash") or "/bin/bash",
            str(ROOT / "scripts/check_report.sh"),
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/nonexistent:/usr/bin/true-only", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 1
    assert "no Chromium found" in proc.stderr
