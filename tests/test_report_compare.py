"""Variants, seeds and paired differences: hand-made readings checked against a hand
computation, and a real sweep over a model key (and a duplicated seed) through the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.runs import add_readings, write_run

from attnlab.report import ReportError, build_report, discover_runs
from attnlab.report.compare import Side, compare, mcnemar_p
from attnlab.report.same_strips import CompareRefused
from attnlab.report.variants import assign_variants
from attnlab.runs.evaldir import STRIP_PRINTS
from attnlab.runs.rundir import RunDir

# --------------------------------------------------------------------------- hand-made readings


def side(label: str, runs: list[Path]) -> Side:
    infos = discover_runs(runs)
    assign_variants(infos)
    return Side(label, infos)


def test_mcnemar_exact_p_values():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(2, 0) == pytest.approx(0.5)  # 2 * (1/2)^2
    assert mcnemar_p(5, 1) == pytest.approx(2 * (1 + 6) / 64)
    assert mcnemar_p(1, 5) == mcnemar_p(5, 1)
    assert mcnemar_p(3, 3) == 1.0


def test_paired_difference_matches_a_hand_computation(tmp_path):
    # Two seeds of A and of B on the same 4 strips of lengths 1 and 2 (seen 1-1: 2 is unseen).
    a0 = write_run(tmp_path / "a0", seed=0, train=(1, 1), lengths=range(1, 3))
    a1 = write_run(tmp_path / "a1", seed=1, train=(1, 1), lengths=range(1, 3))
    b0 = write_run(tmp_path / "b0", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 3))
    b1 = write_run(tmp_path / "b1", seed=1, reader="fixed", train=(1, 1), lengths=range(1, 3))
    add_readings(a0, {1: [1, 1, 1, 0], 2: [1, 1, 0, 0]})
    add_readings(b0, {1: [1, 0, 0, 0], 2: [1, 0, 1, 0]})
    add_readings(a1, {1: [1, 1, 1, 1], 2: [1, 0, 0, 0]})
    add_readings(b1, {1: [1, 1, 0, 1], 2: [0, 0, 0, 0]})
    rows = compare("1", "synthetic-greedy", [1], side("A", [a0, a1]), side("B", [b0, b1]))
    by = {(r["length"], r["split"]): r for r in rows.to_dict("records")}

    one = by[(1, "seen")]
    # seed 0: 3/4 - 1/4; seed 1: 4/4 - 3/4; mean of the two
    assert one["exact_a"] == pytest.approx((0.75 + 1.0) / 2)
    assert one["exact_b"] == pytest.approx((0.25 + 0.75) / 2)
    assert one["exact_diff"] == pytest.approx(((0.75 - 0.25) + (1.0 - 0.75)) / 2)
    # CER: one edit per wrong strip of one character
    assert one["cer_diff"] == pytest.approx(((0.25 - 0.75) + (0.0 - 0.25)) / 2)
    # McNemar over both seeds: A right & B wrong = 2 + 1, the reverse = 0
    assert (one["mcnemar_b"], one["mcnemar_c"]) == (3, 0)
    assert one["mcnemar_p"] == pytest.approx(2 * 0.5**3)
    assert one["n_pairs"] == 2 and one["n_strips"] == 4 and one["pairing"] == "by seed 0,1"
    assert one["exact_diff_lo"] <= one["exact_diff"] <= one["exact_diff_hi"]

    two = by[(2, "unseen")]
    # seed 0: strips of two characters, A has 2 wrong (2 edits / 8 chars), B 2 wrong
    assert two["exact_diff"] == pytest.approx(((0.5 - 0.5) + (0.25 - 0.0)) / 2)
    assert two["cer_a"] == pytest.approx((2 / 8 + 3 / 8) / 2)
    assert (two["mcnemar_b"], two["mcnemar_c"]) == (2, 1)

    seen_total = by[("all", "seen")]  # seen is length 1 only: the same as its row
    assert seen_total["exact_diff"] == pytest.approx(one["exact_diff"])
    unseen_total = by[("all", "unseen")]
    assert unseen_total["exact_diff"] == pytest.approx(two["exact_diff"])


def test_bootstrap_interval_is_reproducible_and_tight_for_identical_readers(tmp_path):
    marks = {1: list(np.random.default_rng(0).integers(0, 2, 50))}
    a = write_run(tmp_path / "a", seed=0, train=(1, 1), lengths=range(1, 2))
    b = write_run(tmp_path / "b", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 2))
    add_readings(a, marks)
    add_readings(b, marks)
    first = compare("1", "synthetic-greedy", [1], side("A", [a]), side("B", [b]))
    again = compare("1", "synthetic-greedy", [1], side("A", [a]), side("B", [b]))
    pd.testing.assert_frame_equal(first, again)
    row = first.iloc[0]
    # Paired: the same readings give a difference of exactly 0 in every resample.
    assert row["exact_diff"] == row["exact_diff_lo"] == row["exact_diff_hi"] == 0
    assert row["mcnemar_p"] == 1.0


@pytest.mark.parametrize("fault", ["fingerprint", "truth"])
def test_pairing_of_evaluations_of_other_strips_is_refused(tmp_path, fault):
    a = write_run(tmp_path / "a", seed=0, train=(1, 1), lengths=range(1, 3))
    b = write_run(tmp_path / "b", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 3))
    add_readings(a, {1: [1, 0], 2: [1, 1]})
    if fault == "fingerprint":  # e.g. another data.eval_seed: the strips differ at length 2
        add_readings(b, {1: [1, 0], 2: [1, 1]}, prints={2: "other"})
    else:  # equal fingerprints, but the readings name other truths
        add_readings(b, {1: [1, 0], 2: [1, 1]})
        readings = RunDir(b).eval_dir("synthetic-greedy").readings
        frame = pd.read_csv(readings, dtype=str, keep_default_na=False)
        frame.loc[frame["length"] == "2", "truth"] = "12"
        frame.to_csv(readings, index=False)
    with pytest.raises(CompareRefused) as err:
        compare("1", "synthetic-greedy", [1], side("A", [a]), side("B", [b]))
    assert "refusing to pair" in str(err.value) and "\n" not in str(err.value)
    # The report: a default comparison that cannot be paired is listed, not computed ...
    build_report([tmp_path], tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "not compared:" in summary and "refusing to pair" in summary
    assert not (tmp_path / "report" / "comparisons.csv").exists()
    # ... and one asked for is a user error.
    with pytest.raises(ReportError, match="refusing to pair"):
        build_report([tmp_path], tmp_path / "report2", ("attention", "fixed"))


def test_an_evaluation_without_fingerprints_is_not_paired(tmp_path):
    a = write_run(tmp_path / "a", seed=0, train=(1, 1), lengths=range(1, 2))
    b = write_run(tmp_path / "b", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 2))
    add_readings(a, {1: [1, 0]})
    add_readings(b, {1: [1, 1]})
    meta = RunDir(b).eval_dir("synthetic-greedy").meta_file
    data = json.loads(meta.read_text())
    del data["extra"][STRIP_PRINTS]
    meta.write_text(json.dumps(data))
    with pytest.raises(CompareRefused, match="no strip fingerprints"):
        compare("1", "synthetic-greedy", [1], side("A", [a]), side("B", [b]))


def test_default_report_compares_the_baseline_with_every_other_reader(tmp_path):
    a = write_run(tmp_path / "a", seed=0, train=(1, 1), lengths=range(1, 3))
    b = write_run(tmp_path / "b", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 3))
    add_readings(a, {1: [1, 1], 2: [1, 0]})
    add_readings(b, {1: [1, 0], 2: [0, 0]})
    build_report([tmp_path], tmp_path / "report")
    rows = pd.read_csv(tmp_path / "report" / "comparisons.csv")
    assert set(zip(rows["a"], rows["b"], strict=True)) == {("attention", "fixed")}
    total = rows[(rows["length"] == "all") & (rows["split"] == "seen")].iloc[0]
    assert total["exact_diff"] == pytest.approx(0.5)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Paired differences" in page and "McNemar" in page


# --------------------------------------------------------------------------- variants on disk


def test_variants_are_configs_and_seeds_are_distinct_seeds(tmp_path):
    for i, (hidden, seed) in enumerate([(16, 0), (64, 0), (16, 1), (64, 1), (64, 1)]):
        run = write_run(tmp_path / f"r{i}", seed=seed, acc={3: 0.1 * (i + 1)})
        cfg = yaml.safe_load(RunDir(run).config.read_text())
        cfg["model"]["hidden"] = hidden
        cfg["train"]["device"] = "cpu" if i % 2 else "cuda"  # neutral: never a variant
        RunDir(run).config.write_text(yaml.safe_dump(cfg))
    build_report([tmp_path], tmp_path / "report")
    agg = pd.read_csv(tmp_path / "report" / "summary.csv")
    three = agg[agg["length"] == "3"].set_index("variant")
    assert sorted(three.index) == ["attention · model.hidden=16", "attention · model.hidden=64"]
    assert three["n_seeds"].tolist() == [2, 2]
    assert three.loc["attention · model.hidden=16", "exact_acc"] == pytest.approx((0.1 + 0.3) / 2)
    # r4 repeats r3's config and seed: counted once, as r3
    assert three.loc["attention · model.hidden=64", "exact_acc"] == pytest.approx((0.2 + 0.4) / 2)
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "duplicate: same config and seed 1" in summary and "r4" in summary


# --------------------------------------------------------------------------- real sweeps

SWEEP = [
    "preset=tiny", "readers=fixed", "model.hidden=8,16", "seed=0,1", "train.threads=1",
    "train.progress=plain", "train.objective=seen_exact",
]  # fmt: skip


@pytest.fixture(scope="module")
def width_sweep(tmp_path_factory, attnlab_run):
    """The sweep in this process, one job after the other (hydra/launcher=basic): its
    launcher is not what is tested here (test_tasks_sweep.py runs the default one), and the
    jobs' imports and worker processes cost more than their trainings."""
    cwd = tmp_path_factory.mktemp("widths")
    sweep = cwd / "sweep"
    result = attnlab_run(
        "sweep", "lengths", *SWEEP, "hydra/launcher=basic", f"hydra.sweep.dir={sweep}", cwd=cwd
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    report = attnlab_run("report", sweep, "--out", cwd / "report", cwd=cwd)
    assert report.returncode == 0, report.stderr
    return result, sweep, cwd / "report"


def _jobs(sweep: Path) -> dict[tuple[int, int], Path]:
    out = {}
    for cfg in sweep.glob("*/.hydra/config.yaml"):
        c = yaml.safe_load(cfg.read_text())
        out[(c["model"]["hidden"], c["seed"])] = cfg.parent.parent
    return out


def test_sweep_over_a_model_key_reports_two_variants_of_two_seeds(width_sweep):
    result, sweep, report = width_sweep
    assert "train 1-3 · fixed · model.hidden=8: 2 seeds (0, 1)" in result.stdout
    assert "train 1-3 · fixed · model.hidden=16: 2 seeds (0, 1)" in result.stdout
    agg = pd.read_csv(report / "summary.csv", dtype={"length": str})
    assert sorted(set(agg["variant"])) == ["fixed · model.hidden=16", "fixed · model.hidden=8"]
    assert set(agg["n_seeds"]) == {2}
    jobs = _jobs(sweep)
    for hidden in (8, 16):
        own = [
            pd.read_csv(jobs[(hidden, s)] / "eval/synthetic-greedy/metrics_by_length.csv",
                        dtype={"length": str})
            for s in (0, 1)
        ]  # fmt: skip
        mine = agg[agg["variant"] == f"fixed · model.hidden={hidden}"]
        for row in mine.to_dict("records"):
            values = [
                float(
                    t[(t["length"] == row["length"]) & (t["split"] == row["split"])]["cer"].iloc[0]
                )
                for t in own
            ]
            assert row["cer"] == pytest.approx(np.mean(values)), row
            assert row["cer_lo"] == pytest.approx(min(values))
    summary = (report / "summary.md").read_text()
    assert "fixed · model.hidden=8: 2 seeds" in summary
    assert "fixed · model.hidden=16 exact %" in summary


def test_sweep_jobs_return_and_record_the_objective(width_sweep):
    _, sweep, _ = width_sweep
    for job in _jobs(sweep).values():
        got = json.loads((job / "objective.json").read_text())
        table = pd.read_csv(job / "eval/synthetic-greedy/metrics_by_length.csv", dtype=str)
        seen = table[(table["length"] == "all") & (table["split"] == "seen")]
        assert got == {
            "name": "seen_exact",
            "value": pytest.approx(float(seen["exact_acc"].iloc[0])),
            "direction": "maximize",
        }


def test_a_swept_number_gets_its_own_plot(width_sweep):
    _, _, report = width_sweep
    plots = sorted(p.name for p in report.glob("swept_*.png"))
    assert plots == ["swept_model_hidden_synthetic_greedy.png"]
    assert "Exact accuracy against model.hidden" in (report / "index.html").read_text()


def test_compare_any_two_variants(width_sweep, attnlab_run, tmp_path):
    _, sweep, _ = width_sweep
    a, b = "fixed · model.hidden=16", "fixed · model.hidden=8"
    res = attnlab_run("report", sweep, "--out", tmp_path / "r", "--compare", a, b, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = pd.read_csv(tmp_path / "r" / "comparisons.csv", dtype={"length": str})
    assert set(rows["a"]) == {a} and set(rows["b"]) == {b}
    assert set(rows["n_pairs"]) == {2} and set(rows["pairing"]) == {"by seed 0,1"}
    agg = pd.read_csv(tmp_path / "r" / "summary.csv", dtype={"length": str}).set_index(
        ["variant", "length", "split"]
    )
    for row in rows.to_dict("records"):
        key = (row["length"], row["split"])
        assert row["exact_a"] == pytest.approx(agg.loc[(a, *key), "exact_acc"])
        assert row["exact_b"] == pytest.approx(agg.loc[(b, *key), "exact_acc"])
        assert row["exact_diff"] == pytest.approx(row["exact_a"] - row["exact_b"])
    bad = attnlab_run(
        "report", sweep, "--out", tmp_path / "x", "--compare", a, "nope", cwd=tmp_path
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "no such variant" in bad.stderr
    assert not (tmp_path / "x").exists()


def test_one_config_and_one_seed_run_twice_count_once(trained, copy_run, attnlab_run, tmp_path):
    first = copy_run(trained["attention"], "runs/first")
    again = tmp_path / "runs" / "again"
    res = attnlab_run(
        "train", "preset=tiny", "train.progress=plain", "model=attention",
        f"hydra.run.dir={again}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    for run in (first, again):
        assert attnlab_run("eval", run, "eval.maps_k=0", cwd=tmp_path).returncode == 0
    res = attnlab_run("report", tmp_path / "runs", "--out", tmp_path / "report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    agg = pd.read_csv(tmp_path / "report" / "summary.csv")
    assert set(agg["n_seeds"]) == {1} and set(agg["variant"]) == {"attention"}
    first_table = pd.read_csv(first / "eval/synthetic-greedy/metrics_by_length.csv")
    assert agg["exact_acc"].tolist() == pytest.approx(first_table["exact_acc"].tolist())
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "duplicate: same config and seed 0" in summary and str(first) in summary


def test_train_objective_is_checked_and_returned(attnlab_run, tmp_path):
    bad = attnlab_run("train", "preset=tiny", "train.objective=nope", cwd=tmp_path)
    assert bad.returncode == 2 and "train.objective='nope'" in bad.stderr
    assert bad.stderr.count("\n") == 1
    evals = attnlab_run("train", "preset=tiny", "train.objective=seen_exact", cwd=tmp_path)
    assert evals.returncode == 2 and "attnlab sweep lengths" in evals.stderr
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").rglob("*.pt"))


def test_a_new_report_drops_an_old_reports_files_but_keeps_the_users(tmp_path):
    a = write_run(tmp_path / "runs/a", seed=0, train=(1, 1), lengths=range(1, 2))
    b = write_run(tmp_path / "runs/b", seed=0, reader="fixed", train=(1, 1), lengths=range(1, 2))
    add_readings(a, {1: [1, 0]})
    add_readings(b, {1: [1, 1]})
    out = tmp_path / "report"
    build_report([tmp_path / "runs"], out)
    assert (out / "comparisons.csv").is_file()
    (out / "my notes.txt").write_text("keep me")
    import shutil

    shutil.rmtree(b)  # the next report has one reader: nothing to compare
    build_report([tmp_path / "runs"], out)
    assert not (out / "comparisons.csv").exists()  # not the old report's, carried over
    assert (out / "my notes.txt").read_text() == "keep me"
