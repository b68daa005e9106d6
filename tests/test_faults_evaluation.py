"""Faults in evaluations and their report (issue #24): nothing lost, nothing silent.

The three silent wrong results first (a second folder evaluation replacing the first, a
broken table counted as a seed, another reader's checkpoint counted as this run's), each
end to end through the CLI and the report; then the one-line refusals. Each "nothing lost"
test compares checksums of the whole run directory before and after (``checksums``).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.runs import checksums, evaluated_copies, lost, one_line_error, unchanged


def export(attnlab_run, folder: Path, n: int, cwd: Path, *extra: str) -> None:
    res = attnlab_run("data", "export", folder, "--n", n, "--lengths", "2-3", *extra, cwd=cwd)
    assert res.returncode == 0, res.stderr


def report(attnlab_run, tmp_path: Path, *paths: Path):
    out = tmp_path / "report"
    res = attnlab_run("report", *paths, "--out", out, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return out, pd.read_csv(out / "summary.csv"), (out / "summary.md").read_text()


# --- [1] a second folder evaluation does not replace the first --------------------------------


def test_two_folders_of_one_name_get_two_evaluations_and_both_reach_the_report(
    trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    a, b = tmp_path / "a" / "strips", tmp_path / "b" / "strips"
    export(attnlab_run, a, 6, tmp_path)
    export(attnlab_run, b, 2, tmp_path, "--seed", "1")
    assert attnlab_run("eval", run, "--folder", a, "eval.maps_k=0", cwd=tmp_path).returncode == 0
    before = checksums(run)
    res = attnlab_run("eval", run, "--folder", b, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert lost(before, checksums(run)) == []  # the first evaluation is all there
    names = sorted(p.name for p in (run / "eval").iterdir())
    assert len(names) == 2 and all(n.startswith("folder-strips-") for n in names), names
    counts = {}
    for name in names:
        table = pd.read_csv(run / "eval" / name / "metrics_by_length.csv", dtype={"length": str})
        counts[name] = int(table[table.length != "all"].n.sum())
    assert sorted(counts.values()) == [2, 6]
    _, summary, _ = report(attnlab_run, tmp_path, run)
    assert sorted(set(summary["eval"])) == names

    # The same folder again replaces its own evaluation; a name given twice for other data
    # is refused in one line, and nothing is lost.
    assert attnlab_run("eval", run, "--folder", a, "eval.maps_k=0", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in (run / "eval").iterdir()) == names
    before = checksums(run)
    of_a = next(n for n, c in counts.items() if c == 6)  # the name a's evaluation got
    res = attnlab_run(
        "eval", run, "--folder", b, f"eval.name={of_a}", "eval.maps_k=0", cwd=tmp_path
    )
    assert res.returncode == 2, res.stdout[-2000:]
    one_line_error(res, "exists and read folder")
    unchanged(run, before)


# --- [2] a broken table is not counted as a seed -----------------------------------------------


@pytest.fixture(scope="module")
def evaluated(trained, tmp_path_factory, attnlab_run) -> dict[str, Path]:
    """Both tiny runs copied and evaluated once (eval.n=4)."""
    return evaluated_copies(trained, tmp_path_factory.mktemp("evaluated"), attnlab_run)


@pytest.mark.parametrize("bad", ["NaN", "abc", "inf", ""])
def test_a_run_whose_table_has_a_bad_cell_is_listed_and_counted_nowhere(
    bad, evaluated, attnlab_run, tmp_path
):
    runs = tmp_path / "runs"
    for seed, kind in enumerate(("s0", "s1")):  # two seeds of the attention reader
        dest = runs / kind
        shutil.copytree(evaluated["attention"], dest, ignore=shutil.ignore_patterns(".lock"))
        cfg = dest / ".hydra" / "config.yaml"
        cfg.write_text(cfg.read_text().replace("seed: 0", f"seed: {seed}", 1))
    table = runs / "s1" / "eval" / "synthetic-greedy" / "metrics_by_length.csv"
    lines = table.read_text().splitlines()
    cells = lines[2].split(",")
    cells[next(csv.reader(lines[:1])).index("exact_acc")] = bad  # the header is quoted
    lines[2] = ",".join(cells)
    table.write_text("\n".join(lines) + "\n")
    before = checksums(runs)

    _, summary, md = report(attnlab_run, tmp_path, runs)
    assert set(summary["n_seeds"]) == {1}  # the broken run is no seed of anything
    assert "line 3, column exact_acc" in md and "left out of every aggregate" in md
    unchanged(runs, before)


def test_a_sound_table_with_unmeasured_metrics_still_counts(evaluated, attnlab_run, tmp_path):
    # The fixed reader has no attention weights: its align cells are empty, not broken.
    _, summary, md = report(attnlab_run, tmp_path, evaluated["fixed"])
    assert set(summary["n_seeds"]) == {1} and "left out" not in md


# --- [3] another reader's checkpoint is refused, and never counted -----------------------------


def test_another_readers_checkpoint_in_a_run_is_refused_and_not_reported(
    trained, evaluated, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    shutil.copy(trained["fixed"] / "checkpoints" / "best.pt", run / "checkpoints" / "best.pt")
    before = checksums(run)
    res = attnlab_run("eval", run, "eval.n=4", "eval.maps_k=0", cwd=tmp_path)
    one_line_error(res, "fixed", "attention", "refused")
    res = attnlab_run("probe", run, "probe.n=2", "probe.pool=4", cwd=tmp_path)
    one_line_error(res, "fixed", "attention")
    res = attnlab_run("read", run / "eval.png", "--run", run, cwd=tmp_path)
    one_line_error(res, "fixed", "attention")
    unchanged(run, before)

    # Such an evaluation already on disk (made before this check existed) counts nowhere.
    shutil.copytree(evaluated["fixed"] / "eval", run / "eval")
    out, summary, md = report(attnlab_run, tmp_path, run, evaluated["fixed"])
    assert set(summary["reader"]) == {"fixed"} and set(summary["n_seeds"]) == {1}
    assert "differs from config 'attention'" in md and "left out of every aggregate" in md


def test_a_checkpoint_trained_with_other_data_than_its_run_is_refused(
    trained, copy_run, attnlab_run, tmp_path
):
    run = copy_run(trained["attention"])
    cfg = run / ".hydra" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("height: 32", "height: 48", 1))
    before = checksums(run)
    one_line_error(attnlab_run("eval", run, "eval.n=4", cwd=tmp_path), "data.height")
    unchanged(run, before)
