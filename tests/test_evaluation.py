"""`attnlab eval` and `attnlab read` end to end on a tiny trained run."""

import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image


def export(attnlab_run, folder: Path, n: int, lengths: str) -> None:
    res = attnlab_run("data", "export", folder, "--n", n, "--lengths", lengths, cwd=folder.parent)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def runs(trained, tmp_path_factory) -> dict[str, Path]:
    """Copies of the session's trained runs: these tests write eval/ into them."""
    import shutil

    root = tmp_path_factory.mktemp("eval_runs")
    return {k: Path(shutil.copytree(v, root / k)) for k, v in trained.items()}


def test_eval_writes_per_length_tables_and_maps(runs, tmp_path, attnlab_run):
    run = runs["attention"]
    args = ["eval.n=30", "eval.maps_k=2", "eval.map_lengths=[2,5]", "eval.figures=true"]
    res = attnlab_run("eval", run, *args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = run / "eval" / "synthetic-greedy"
    table = pd.read_csv(out / "metrics_by_length.csv", dtype={"length": str})
    per_length = table[table.length != "all"]
    assert per_length.length.astype(int).tolist() == [1, 2, 3, 4, 5, 6]  # 1 .. 2 x longest seen
    assert per_length.split.tolist() == ["seen"] * 3 + ["unseen"] * 3
    assert per_length.n.tolist() == [30] * 6
    totals = table[table.length == "all"].set_index("split")
    assert totals.loc["seen", "n"] == 90 and totals.loc["unseen", "n"] == 90
    assert ((table.exact_lo <= table.exact_acc) & (table.exact_acc <= table.exact_hi)).all()
    assert (out / "metrics_by_length.md").read_text().count("|") > 20
    meta = json.loads((out / "eval.json").read_text())
    assert meta["reader"] == "attention" and meta["seen_lengths"] == [1, 2, 3]
    # k correct and k failures per map length, or a statement that there are fewer.
    for n in (2, 5):
        for kind in ("correct", "failure"):
            drawn = sorted((out / "maps").glob(f"len{n:02d}_{kind}_*.png"))
            row = per_length[per_length.length == str(n)].iloc[0]
            available = (
                round(row.exact_acc * 30) if kind == "correct" else 30 - round(row.exact_acc * 30)
            )
            assert len(drawn) == min(2, available)
            if available < 2:
                assert f"length {n}: only {available} {kind}" in res.stdout
            for png in drawn:
                with Image.open(png) as im:
                    assert im.width > 200 and im.height > 100
    assert (out / "attention_summary.png").stat().st_size > 1000
    assert "seen total" in res.stdout
    # readings.csv: one row per strip, agreeing with the table's counts.
    readings = pd.read_csv(out / "readings.csv", dtype={"truth": str, "reading": str})
    assert len(readings) == 180 and readings.groupby("length").size().tolist() == [30] * 6
    for row in per_length.to_dict("records"):
        mine = readings[readings["length"] == int(row["length"])]
        assert mine["correct"].sum() == round(row["exact_acc"] * row["n"])
        assert mine["del"].sum() == row["del"] and mine["sub"].sum() == row["sub"]
    assert "most confident failures" in res.stdout
    for name in ("reliability.png", "stops.png", "pace.png", "thresholds.csv"):
        assert (out / name).stat().st_size > 50, name


def test_eval_figures_false_draws_the_maps_asked_and_no_summary_figure(runs, tmp_path, attnlab_run):
    """``eval.figures=false`` (preset=tiny's): every table and reading, the maps
    ``eval.maps_k`` asks for, and none of the four summary figures."""
    run = runs["attention"]
    args = ["eval.n=6", "eval.maps_k=1", "eval.map_lengths=[2]", "eval.figures=false"]
    res = attnlab_run("eval", run, *args, "eval.name=plain", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = run / "eval" / "plain"
    assert list((out / "maps").glob("len02_*.png"))
    for name in ("metrics_by_length.csv", "readings.csv", "thresholds.csv", "eval.json"):
        assert (out / name).is_file(), name
    drawn = {"reliability.png", "stops.png", "pace.png", "attention_summary.png"}
    assert not drawn & {p.name for p in out.iterdir()}


def test_eval_of_a_fixed_reader_says_there_are_no_maps(runs, tmp_path, attnlab_run):
    res = attnlab_run("eval", runs["fixed"], "eval.n=10", "--beam", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = runs["fixed"] / "eval" / "synthetic-beam2"
    assert (out / "metrics_by_length.csv").is_file()
    assert not (out / "maps").exists()
    assert "no attention maps" in res.stdout


def test_eval_on_an_exported_folder(runs, tmp_path, attnlab_run):
    folder = tmp_path / "strips"
    export(attnlab_run, folder, 12, "2-4")
    res = attnlab_run("eval", runs["attention"], "--folder", folder, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (out,) = (runs["attention"] / "eval").glob("folder-strips-*-greedy")
    table = pd.read_csv(out / "metrics_by_length.csv", dtype={"length": str})
    assert table[table.length != "all"].n.sum() == 12


def test_read_prints_readings_and_draws_maps_and_names_bad_images(runs, tmp_path, attnlab_run):
    folder = tmp_path / "strips"
    export(attnlab_run, folder, 3, "2-3")
    images = sorted(folder.glob("*.png"))
    bad = tmp_path / "broken.png"
    bad.write_text("not an image")
    # A colour image of another height is read too.
    with Image.open(images[0]) as im:
        im.convert("RGB").resize((im.width * 2, im.height * 2)).save(tmp_path / "big.jpg")
    maps = tmp_path / "maps"
    res = attnlab_run(
        "read", *images, bad, tmp_path / "big.jpg", "--run", runs["attention"],
        "--attention", maps, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2  # one image could not be read
    assert "broken.png" in res.stderr and "not a readable image" in res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert lines[0].split() == ["file", "reading", "confidence"]
    assert len([ln for ln in lines if ln.startswith(str(tmp_path))]) == 4
    assert len(list(maps.glob("*.png"))) == 4


def test_bad_label_files_name_file_and_line(tmp_path, runs, attnlab_run):
    folder = tmp_path / "strips"
    export(attnlab_run, folder, 3, "2-2")
    labels = folder / "labels.csv"
    rows = labels.read_text().splitlines()
    labels.write_text("\n".join([rows[0], rows[1], rows[2].split(",")[0] + ",12a", rows[3]]) + "\n")
    res = attnlab_run("eval", runs["attention"], "--folder", folder, "eval.maps_k=0", cwd=tmp_path)
    assert res.returncode == 2
    assert f"{labels}:3:" in res.stderr and "12a" in res.stderr
