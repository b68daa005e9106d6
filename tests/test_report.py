"""attnlab.report on hand-made run directories: discovery, seed aggregation, files written."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.runs import write_run, write_sweep

from attnlab import report
from attnlab.evaluation.metrics import METRICS
from attnlab.report import (
    ReportError,
    aggregate,
    build_report,
    discover_runs,
)
from attnlab.report.cost import COLUMNS as COST_COLUMNS
from attnlab.runs.rundir import RunDir


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
    assert list(agg.columns) == [*report.AGG_COLUMNS, *COST_COLUMNS]  # + each variant's cost
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
