"""The report as a new user meets it (issue #36): paired differences within whatever readers
are there, --compare by the printed label or a short form, objectives and the best run,
short swept numbers, a colour per variant and legends off the curves, one seed without an
interval, and the explorer opening on a disagreement and showing where the reader looks.

Runs are written by hand in the formats train.py and evaluate.py write (tests/helpers/runs.py),
reports are real builds; the explorer is driven in a real Chromium when there is one.
"""

from __future__ import annotations

import colorsys
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.runs import add_readings, one_line_error, write_run
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

from attnlab.evaluation import explore
from attnlab.report import build_report, discover_runs
from attnlab.report.aggregate import aggregate, train_groups
from attnlab.report.choose import resolve
from attnlab.report.discover import ReportError
from attnlab.report.explorer import explorer_data
from attnlab.report.figures import accuracy_figure, training_figure
from attnlab.report.reader_styles import colours
from attnlab.report.same_strips import CompareRefused
from attnlab.report.short_numbers import short_forms
from attnlab.report.swept import draw, lines_of, points
from attnlab.report.variants import assign_variants, summary_lines
from attnlab.runs.rundir import RunDir

EVAL = "synthetic-greedy"


def run_with(path: Path, seed: int, reader: str = "fixed", readings=None, **keys) -> Path:
    """A hand-made run whose config has ``keys`` (dotted: value) set; with `readings`
    ({length: [1, 0, ...]}) a readings.csv and strip fingerprints for paired differences."""
    write_run(path, seed=seed, reader=reader, acc={n: 0.5 + 0.1 * seed for n in range(1, 17)})
    config = RunDir(path).config
    data = yaml.safe_load(config.read_text())
    for key, value in keys.items():
        *parents, leaf = key.split(".")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    if readings is not None:
        add_readings(path, readings)
    return path


def two_widths(root: Path) -> Path:
    """Two fixed variants (model.hidden 16 and 64), two seeds each, read on the same strips."""
    for hidden in (16, 64):
        for seed in (0, 1):
            marks = {3: [1, 0, 1, 1, seed], 9: [0, 1, 0, hidden // 64, 1]}
            run_with(root / f"h{hidden}_s{seed}", seed, readings=marks, **{"model.hidden": hidden})
    return root


# --- 1. paired differences without the attention reader -------------------------------------


def test_two_variants_of_one_reader_are_paired_without_the_baseline(tmp_path):
    said = []
    build_report([two_widths(tmp_path / "runs")], tmp_path / "r", say=said.append)
    rows = pd.read_csv(tmp_path / "r" / "comparisons.csv", dtype={"length": str})
    assert set(zip(rows["a"], rows["b"], strict=True)) == {
        ("fixed · model.hidden=64", "fixed · model.hidden=16")
    }
    total = rows[(rows["length"] == "all") & (rows["split"] == "unseen")].iloc[0]
    # length 9 (unseen): hidden=64 reads strip 3 right in both seeds, hidden=16 in neither
    assert total["exact_diff"] == pytest.approx(1 / 5)
    # something was paired: nothing to say (but the sections these hand-made runs lack)
    assert [line for line in said if " left out: " not in line] == []


def test_nothing_to_pair_is_said_in_one_line(tmp_path):
    run_with(tmp_path / "runs" / "one", 0, readings={3: [1, 0]})
    said = []
    build_report([tmp_path / "runs"], tmp_path / "r", say=said.append)
    said = [line for line in said if " left out: " not in line]  # sections it lacks
    assert said == [
        "no paired differences: train 1-8, eval synthetic-greedy: only fixed was evaluated "
        "here: nothing to pair it with (paired differences need two readers, or two variants "
        "of one reader, read on the same strips)"
    ]
    note = said[0].replace("no paired differences: ", "- not compared: ")
    assert note in (tmp_path / "r" / "summary.md").read_text()
    assert (
        "only fixed was evaluated here: nothing to pair"
        in (tmp_path / "r" / "index.html").read_text()
    )


# --- 2. --compare by the label as printed, or a short form -----------------------------------


def test_compare_takes_the_printed_label_and_short_forms(tmp_path, attnlab_run):
    runs = two_widths(tmp_path / "runs")
    labels = ["fixed · model.hidden=16", "fixed · model.hidden=64"]
    printed = summary_lines(discover_runs([runs]))  # what the sweep prints
    assert printed[1].strip().startswith("train 1-8 · fixed · model.hidden=64: 2 seeds")
    assert resolve(printed[1], labels) == labels[1]  # the whole line, seeds and all
    assert resolve("train 1-8 · fixed · model.hidden=64", labels) == labels[1]
    assert resolve("model.hidden=16", labels) == labels[0]
    assert resolve("fixed model.hidden=16", labels) == labels[0]
    with pytest.raises(
        CompareRefused, match=re.escape("could mean 2 variants: " + "; ".join(labels))
    ):
        resolve("fixed", labels)
    with pytest.raises(CompareRefused, match="no such variant"):
        resolve("model.hidden=32", labels)
    out = tmp_path / "r"
    build_report([runs], out, ("model.hidden=16", "train 1-8 · fixed · model.hidden=64"))
    rows = pd.read_csv(out / "comparisons.csv")
    assert set(rows["a"]) == {labels[0]} and set(rows["b"]) == {labels[1]}
    with pytest.raises(ReportError):
        build_report([runs], tmp_path / "x", ("train 2-5 · fixed · model.hidden=16", "fixed"))
    res = attnlab_run("report", runs, "--out", tmp_path / "y", "--compare", "fixed",
                      "model.hidden=16", cwd=tmp_path)  # fmt: skip
    one_line_error(res, "could mean 2 variants", *labels)


# --- 3. objectives, the best run, short numbers ----------------------------------------------

LRS = (0.0012345678901234, 0.0031622776601683794, 0.00012345678901234)


def optuna_like(root: Path) -> Path:
    """A study's folder: three jobs of the attention reader at 16-digit learning rates, each
    with the objective it returned (val_exact, maximize); the second one is best."""
    sweep = root / "study"
    sweep.mkdir(parents=True)
    (sweep / "optimization_results.yaml").write_text("name: optuna\n")
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    for job, (lr, value) in enumerate(zip(LRS, (0.5, 0.9, 0.7), strict=True)):
        run = run_with(sweep / str(job), 0, reader="attention", **{"train.lr": lr})
        RunDir(run).write_objective("val_exact", value, "maximize")
    return sweep


def test_objective_values_and_the_best_run_are_shown(tmp_path):
    sweep = optuna_like(tmp_path / "multirun")
    other = tmp_path / "multirun" / "cer"
    (other).mkdir()
    (other / "multirun.yaml").write_text("hydra: {}\n")
    for job, value in enumerate((0.2, 0.1)):
        run = run_with(other / str(job), job, reader="fixed")
        RunDir(run).write_objective("val_cer", value, "minimize")
    said = []
    build_report([tmp_path / "multirun"], tmp_path / "r", say=said.append)
    best = [line for line in said if line.startswith("best of")]
    assert best == [
        f"best of 2 run(s) by val_cer (minimize), sweep {other}: 0.1, fixed, seed 1, "
        f"run {other / '1'}",
        f"best of 3 run(s) by val_exact (maximize), sweep {sweep}: 0.9, "
        f"attention · train.lr=0.00316, seed 0, run {sweep / '1'}",
    ]
    page = (tmp_path / "r" / "index.html").read_text()
    rows = re.findall(r"<tr><td class=\"nowrap\"><code>(.*?)</code>.*?</tr>", page, re.S)
    marked = [r for r in re.findall(r"<tr>.*?</tr>", page, re.S) if "★ best" in r]
    assert len(rows) == 5 and len(marked) == 2
    assert str(sweep / "1") in marked[1] and "val_exact 0.9" in marked[1]
    assert "val_exact 0.5" in page and "val_exact 0.7" in page
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "## Best runs by objective" in md and str(sweep / "1") in md
    variants = set(pd.read_csv(tmp_path / "r" / "summary.csv")["variant"])
    assert {"attention · train.lr=0.00123", "attention · train.lr=0.000123"} < variants


def test_swept_numbers_are_short_on_the_axis_and_kept_apart(tmp_path):
    assert short_forms(["0.0012345678901234", "0.0012349", "64", "fixed"]) == {
        "0.0012345678901234": "0.0012346", "0.0012349": "0.0012349", "64": "64", "fixed": "fixed"
    }  # fmt: skip
    runs = discover_runs([optuna_like(tmp_path)])
    agg = aggregate(runs)
    lines = lines_of(points(agg, runs), "train.lr")
    fig = draw("train.lr", EVAL, lines, colours(["attention"]))
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["0.000123", "0.00123", "0.00316"]


# --- 4. plots: legends off the curves, a colour per variant ----------------------------------


def five_widths(root: Path) -> list:
    for hidden in (8, 16, 32, 64, 128):
        run_with(root / f"h{hidden}", 0, reader="attention", **{"model.hidden": hidden})
    run_with(root / "fixed", 0)
    runs = discover_runs([root])
    assign_variants(runs)
    return train_groups(runs, aggregate(runs))


def _legend_clear(fig) -> None:
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in (a for a in fig.axes if a.get_visible()):
            assert not box.overlaps(ax.get_window_extent(renderer)), "a legend covers a plot"


def _hue(colour) -> float:
    return colorsys.rgb_to_hls(*to_rgb(colour))[0]


def test_plots_give_each_variant_a_colour_of_its_reader_and_keep_legends_off(tmp_path):
    (group,) = five_widths(tmp_path)
    palette = colours(["attention", "fixed"])
    for fig in (accuracy_figure(group, EVAL, palette), training_figure(group, palette)):
        _legend_clear(fig)
        drawn = {to_rgb(line.get_color()) for line in fig.axes[0].get_lines()}
        attention = [c for c in drawn if abs(_hue(c) - _hue(palette["attention"])) < 0.1]
        assert len(attention) == 5, drawn  # five variants, five colours, one family
        assert to_rgb(palette["fixed"]) in drawn  # a reader with one variant keeps its colour


# --- 6. one seed: no interval ----------------------------------------------------------------


def test_one_seed_prints_no_interval(tmp_path):
    write_run(tmp_path / "runs" / "a", seed=0, reader="fixed", acc={4: 0.083})
    build_report([tmp_path / "runs"], tmp_path / "r")
    md = (tmp_path / "r" / "summary.md").read_text()
    page = (tmp_path / "r" / "index.html").read_text()
    assert "8.3" in md and "[8.3, 8.3]" not in md and "[8.3, 8.3]" not in page
    assert "fixed: 1 seed, no interval (one seed)" in md
    agg = pd.read_csv(tmp_path / "r" / "summary.csv")
    assert agg["exact_lo"].isna().all() and set(agg["interval"]) == {"none"}
    write_run(tmp_path / "runs" / "b", seed=1, reader="fixed", acc={4: 0.1})
    build_report([tmp_path / "runs"], tmp_path / "r")
    assert "9.2 [8.3, 10.0]" in (tmp_path / "r" / "summary.md").read_text()  # two seeds: one


# --- 5. the explorer ------------------------------------------------------------------------

HEIGHT, STRIDE, WIDTH = 8, 4, 30  # 8 encoder columns cover 32 px: the last overhangs by 2


def _strip(length: int, index: int, reading: str, weights: bool) -> dict:
    """One explore.json strip of `length` glyphs 8 px wide from x=2; truth '1', '12', ...;
    at step 0 the attention peaks over glyph 2 (columns 3-4: a skipped first glyph)."""
    truth = "123456789"[:length]
    image = np.ones((HEIGHT, WIDTH))
    image[2:6, 2 : 2 + 8 * length : 3] = 0.0
    steps = len(reading) + 1
    rows = np.full((steps, 8), 0.01)
    rows[0, 3], rows[0, 4] = 0.6, 0.4
    rows[1:, 7] = 1.0  # later steps: the last column, which overhangs the strip
    rows /= rows.sum(axis=1, keepdims=True)
    return {
        "length": length, "index": index, "source": f"test-len{length:02d}#{index}",
        "truth": truth, "reading": reading, "confidence": 0.8, "steps": [0.9] * steps,
        "width": WIDTH, "spans": [[2 + 8 * g, 10 + 8 * g] for g in range(length)],
        "digest": explore.strip_digest(image, truth), "image": explore.png_base64(image),
        "columns": 8 if weights else None, "weight_steps": steps if weights else None,
        "weights": explore.encode_rows(rows) if weights else None,
    }  # fmt: skip


def explored(root: Path) -> Path:
    """A fixed and an attention run trained on 1-3 with explore.json files over lengths 1-3
    (seen) and 4 (unseen): they disagree on strip 1 of length 1 and strip 2 of length 3."""
    for reader in ("fixed", "attention"):
        run = write_run(root / reader, seed=0, reader=reader, train=(1, 3), lengths=range(1, 5))
        strips = []
        for length in (1, 2, 3, 4):
            truth = "123456789"[:length]
            for index in range(3):
                wrong = reader == "fixed" and (length, index) in ((1, 1), (3, 2))
                reading = ("9" + truth[1:]) if wrong else truth
                strips.append(_strip(length, index, reading, reader == "attention"))
        doc = {"version": explore.VERSION, "reader": reader, "stride": STRIDE, "height": HEIGHT,
               "explore_n": 3, "has_weights": reader == "attention", "strips": strips}  # fmt: skip
        explore.write(RunDir(run).eval_dir(EVAL).explore, doc)
    return root


def test_explorer_opens_at_the_longest_seen_length_on_a_disagreement(tmp_path):
    data, notes = explorer_data(discover_runs([explored(tmp_path / "runs")]))
    assert notes == []
    ev = data["trains"][0]["evals"][0]
    assert [entry["length"] for entry in ev["lengths"]] == [1, 2, 3, 4]
    assert ev["start"] == {"length": 2, "strip": 2}  # length 3, strip #2


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    pytest.skip("no Chromium on PATH: apt-get install -y chromium")
    raise AssertionError  # unreachable


def test_explorer_shows_where_the_reader_looks_within_the_strip(tmp_path):
    binary = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    index = build_report([explored(tmp_path / "runs")], tmp_path / "r")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(index.resolve().as_uri(), wait_until="load")
        assert page.locator("#ex-length").input_value() == "2"  # length 3 (seen), opened on
        assert page.locator("#ex-strips").input_value() == "2"  # the strip they disagree on
        view = page.locator('.ex-view[data-reader="attention"]')
        look, true = view.locator("rect.ex-look"), view.locator("rect.ex-true")
        # step 1: the reader looks at glyph 2 (pixels 12-20), the step's true glyph is glyph 1
        assert (look.get_attribute("data-from"), look.get_attribute("data-to")) == ("12", "20")
        assert (true.get_attribute("x"), true.get_attribute("width")) == ("2", "8")
        where = view.locator(".ex-where").inner_text()
        assert where == "looks at glyph 2 (2) · true glyph of this step: glyph 1 (1) (not the same)"
        assert "solid box: where this reader looks" in view.locator(".ex-key").inner_text()
        page.get_by_role("button", name="Next step").click()
        cells = view.locator(".ex-band rect[data-col]")
        ends = [
            float(cells.nth(i).get_attribute("x")) + float(cells.nth(i).get_attribute("width"))
            for i in range(cells.count())
        ]
        assert cells.count() == 8 and max(ends) == WIDTH  # the last cell ends with the strip
        fixed = page.locator('.ex-view[data-reader="fixed"]')
        assert (
            fixed.locator("rect.ex-look").count() == 0
            and fixed.locator("rect.ex-true").count() == 1
        )
        browser.close()
    assert errors == []
