"""The report's explorer: explore.json from `attnlab eval`, the data embedded in index.html,
and the page driven in a real Chromium (Debian's ``chromium``, through Playwright).

One module fixture evaluates copies of the session's two tiny trained runs (fixed and
attention, conftest's ``trained``) and builds their report: a two-reader preset=tiny sweep
without training twice. The numbers mean nothing; the tests check what is kept and shown.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from attnlab.config import EvalConfig
from attnlab.evaluation import explore
from attnlab.evaluation.evaluate import evaluate_run
from attnlab.report import build_report
from attnlab.report.explorer import script_json
from attnlab.runs.rundir import RunDir

EVAL = "synthetic-greedy"
DATA = re.compile(r'<script type="application/json" id="explorer-data">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def explored(trained, tmp_path_factory) -> dict[str, Path]:
    """``{"fixed": RUN, "attention": RUN, "report": index.html}``: both runs evaluated with
    their own (preset=tiny) eval config, then reported together."""
    root = tmp_path_factory.mktemp("explored")
    out: dict[str, Path] = {}
    for kind, run in trained.items():
        dest = Path(shutil.copytree(run, root / "runs" / kind))
        cfg = OmegaConf.merge(
            OmegaConf.structured(EvalConfig), OmegaConf.load(RunDir(dest).config).eval
        )
        evaluate_run(dest, cfg, say=lambda *_: None)
        out[kind] = dest
    out["report"] = build_report([root / "runs"], root / "report")
    return out


def embedded(index: Path) -> dict:
    match = DATA.search(index.read_text(encoding="utf-8"))
    assert match, "no explorer data in the page"
    return json.loads(match.group(1))


def readings_csv(run: Path) -> pd.DataFrame:
    return pd.read_csv(
        RunDir(run).eval_dir(EVAL).readings, dtype={"truth": str, "reading": str}
    ).fillna({"reading": ""})


# --- explore.json ---------------------------------------------------------------------------


def test_explore_file_keeps_the_first_strips_of_each_length(explored):
    for kind in ("fixed", "attention"):
        ev = RunDir(explored[kind]).eval_dir(EVAL)
        doc = explore.read(ev.explore)
        n, cfg_n = doc["explore_n"], EvalConfig().explore_n
        assert n == cfg_n and doc["reader"] == kind
        lengths = json.loads(ev.meta_file.read_text())["lengths"]
        per_length = min(n, 24)  # preset=tiny reads 24 strips per length
        assert [(s["length"], s["index"]) for s in doc["strips"]] == [
            (length, i) for length in lengths for i in range(per_length)
        ]
        assert doc["has_weights"] is (kind == "attention")
        for s in doc["strips"]:
            assert len(s["spans"]) == len(s["truth"]) == s["length"]
            assert all(0 <= a < b <= s["width"] for a, b in s["spans"])
    # the same strips for both readers: same truth, same pixels
    a, f = (
        explore.read(RunDir(explored[k]).eval_dir(EVAL).explore) for k in explored if k != "report"
    )
    assert [s["digest"] for s in a["strips"]] == [s["digest"] for s in f["strips"]]


def test_explore_file_agrees_with_readings_csv(explored):
    for kind in ("fixed", "attention"):
        doc = explore.read(RunDir(explored[kind]).eval_dir(EVAL).explore)
        rows = readings_csv(explored[kind]).set_index("source")
        for s in doc["strips"]:
            row = rows.loc[s["source"]]
            assert (s["truth"], s["reading"]) == (row["truth"], row["reading"])
            assert s["confidence"] == pytest.approx(row["confidence"], rel=1e-12)
            # per-step confidences: each read digit, then EOS; greedy: their product
            assert len(s["steps"]) == len(s["reading"]) + 1
            assert math.prod(s["steps"]) == pytest.approx(s["confidence"], rel=2e-3, abs=1e-6)
            if kind == "fixed":
                assert s["weights"] is None
                continue
            w = explore.decode_rows(s["weights"], s["weight_steps"], s["columns"])
            assert w.shape == (len(s["reading"]) + 1, s["columns"])
            np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-12)  # over the real columns
            assert s["columns"] == math.ceil(s["width"] / doc["stride"])


def test_quantised_rows_sum_to_one_and_stay_close():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.full(37, 0.3), size=9)
    q = explore.quantise_rows(w)
    assert q.dtype == np.uint8 and (q.sum(1) == explore.WEIGHT_SCALE).all()
    assert np.abs(q / explore.WEIGHT_SCALE - w).max() <= 1 / explore.WEIGHT_SCALE
    text = explore.encode_rows(w)
    np.testing.assert_allclose(explore.decode_rows(text, 9, 37).sum(1), 1.0)


def test_explore_n_zero_writes_no_file(explored, tmp_path):
    run = Path(shutil.copytree(explored["fixed"], tmp_path / "run"))
    cfg = OmegaConf.merge(OmegaConf.structured(EvalConfig), OmegaConf.load(RunDir(run).config).eval)
    cfg.explore_n, cfg.lengths, cfg.name = 0, [1, 2], "no-explore"
    evaluate_run(run, cfg, say=lambda *_: None)
    assert not RunDir(run).eval_dir("no-explore").explore.exists()


# --- the data the page embeds ---------------------------------------------------------------


def test_embedded_data_matches_readings_csv(explored):
    data = embedded(explored["report"])
    (group,) = data["trains"]
    (ev,) = group["evals"]
    assert group["train"] == "1-3" and ev["eval"] == EVAL and ev["left_out"] == 0
    assert [v["reader"] for v in ev["views"]] == ["fixed", "attention"]
    assert [v["has_weights"] for v in ev["views"]] == [False, True]
    csv = {
        v["reader"]: readings_csv(explored[v["reader"]]).set_index("source") for v in ev["views"]
    }
    assert [entry["length"] for entry in ev["lengths"]] == list(range(1, 7))
    checked = 0
    for entry in ev["lengths"]:
        assert entry["split"] == ("seen" if entry["length"] <= 3 else "unseen")
        for strip in entry["strips"]:
            image = data["images"][strip["image"]]
            assert len(image["spans"]) == len(strip["truth"])
            for view, read in zip(ev["views"], strip["reads"], strict=True):
                row = csv[view["reader"]].loc[strip["source"]]
                assert row["truth"] == strip["truth"]
                assert read["reading"] == row["reading"]
                assert read["confidence"] == pytest.approx(row["confidence"], rel=1e-12)
                assert len(read["steps"]) == len(read["reading"]) + 1
                if view["has_weights"]:
                    w = explore.decode_rows(read["weights"], read["weight_steps"], read["columns"])
                    np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-12)
                else:
                    assert read["weights"] is None
                checked += 1
    assert checked == 2 * 6 * min(EvalConfig().explore_n, 24)  # preset=tiny: 24 per length


def test_embedded_json_cannot_close_its_script():
    text = script_json({"source": "</script><script>alert(1)</script><!--", "x": "a&b"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["source"] == "</script><script>alert(1)</script><!--"


def test_strings_from_files_reach_the_page_as_text(explored, tmp_path):
    run = Path(shutil.copytree(explored["attention"], tmp_path / "runs" / "a"))
    path = RunDir(run).eval_dir(EVAL).explore
    doc = json.loads(path.read_text())
    doc["strips"][0]["source"] = "</script><script>alert(1)</script>"
    path.write_text(json.dumps(doc))
    page = build_report([tmp_path / "runs"], tmp_path / "report").read_text()
    assert "<script>alert(1)" not in page
    data = embedded(tmp_path / "report" / "index.html")
    assert (
        data["trains"][0]["evals"][0]["lengths"][0]["strips"][0]["source"]
        == doc["strips"][0]["source"]
    )


def test_a_report_without_explore_files_says_so(explored, tmp_path):
    run = Path(shutil.copytree(explored["fixed"], tmp_path / "runs" / "f"))
    RunDir(run).eval_dir(EVAL).explore.unlink()
    said = []
    page = build_report([tmp_path / "runs"], tmp_path / "report", say=said.append).read_text()
    assert "No explorer data" in page and 'id="explorer-data"' not in page
    assert [line for line in said if "left out" in line] == [
        'report: section "Explorer" left out: no evaluation that counts has an explore.json '
        "(attnlab eval writes one with eval.explore_n > 0)"
    ]
    assert "Section “Explorer” left out" in page
    assert 'id="omitted"' not in explored["report"].read_text()  # every section drawn


# --- the page in a real browser -------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    pytest.skip("no Chromium on PATH (chromium, chromium-browser, google-chrome): "
                "apt-get install -y chromium")  # fmt: skip
    raise AssertionError  # unreachable


@pytest.fixture(scope="module")
def browser():
    binary = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        yield b
        b.close()


def _expected_count(strips: list[dict], how: str) -> int:
    count = 0
    for s in strips:
        wrong = [r["reading"] != s["truth"] for r in s["reads"] if r is not None]
        count += {
            "all": True,
            "any-wrong": any(wrong),
            "all-wrong": bool(wrong) and all(wrong),
            "correct": bool(wrong) and not any(wrong),
        }[how]
    return count


def test_explorer_in_chromium(browser, explored):
    index = explored["report"]
    data = embedded(index)
    ev = data["trains"][0]["evals"][0]
    att = [v["reader"] for v in ev["views"]].index("attention")
    # a strip whose attention reading has two steps with different rows (so Next step must
    # redraw the band): found in the data, then chosen in the page as a user would
    pick = None
    for li, entry in enumerate(ev["lengths"]):
        for si, strip in enumerate(entry["strips"]):
            read = strip["reads"][att]
            w = explore.decode_rows(read["weights"], read["weight_steps"], read["columns"])
            if len(w) >= 2 and not np.array_equal(w[0], w[1]):
                pick = (li, si, strip, w)
                break
        if pick:
            break
    assert pick, "no attention reading with two different steps"
    li, si, strip, w = pick

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(index.resolve().as_uri(), wait_until="load")
    page.select_option("#ex-length", index=li)
    page.select_option("#ex-strips", value=str(si))

    views = page.locator(".ex-view")
    assert views.count() == 2
    assert [views.nth(i).get_attribute("data-reader") for i in range(2)] == ["fixed", "attention"]
    shown = {views.nth(i).get_attribute("data-strip") for i in range(2)}
    assert shown == {f"{strip['length']}:{strip['index']}"}  # both readers, the same strip
    assert {views.nth(i).get_attribute("data-truth") for i in range(2)} == {strip["truth"]}
    fixed = page.locator('.ex-view[data-reader="fixed"]')
    assert "has no attention to show" in fixed.inner_text()
    assert fixed.locator(".ex-band rect[data-col]").count() == 0

    band = page.locator('.ex-view[data-reader="attention"] .ex-band')

    def drawn() -> list[float]:
        cells = band.locator("rect[data-col]")
        return [float(cells.nth(i).get_attribute("fill-opacity")) for i in range(cells.count())]

    def step() -> str:
        return page.locator("#ex-step").inner_text()

    total = max(len(r["reading"]) + 1 for r in strip["reads"])
    assert step() == f"step 1 of {total}"
    before = drawn()
    np.testing.assert_allclose(before, (w[0] / w[0].max())[w[0] > 0], atol=2e-3)
    page.get_by_role("button", name="Next step").click()
    assert step() == f"step 2 of {total}"
    after = drawn()
    assert after != before
    np.testing.assert_allclose(after, (w[1] / w[1].max())[w[1] > 0], atol=2e-3)
    assert band.get_attribute("data-peak") == str(int(np.argmax(w[1])))
    assert fixed.locator(".ex-reading").inner_text() != ""  # moved together: same step label
    page.keyboard.press("ArrowLeft")
    assert step() == f"step 1 of {total}" and drawn() == before
    page.keyboard.press("ArrowRight")
    assert step() == f"step 2 of {total}"
    page.get_by_role("button", name="Previous step").click()
    assert step() == f"step 1 of {total}"
    assert page.locator("#ex-matrix .ex-mrow").count() == len(w)  # the matrix, one row a step

    # filters change the list of strips, to the counts the data gives
    strips = ev["lengths"][li]["strips"]
    counts = {}
    for how in ("all", "any-wrong", "all-wrong", "correct"):
        page.select_option("#ex-filter", value=how)
        counts[how] = page.locator("#ex-strips option").count()
        assert counts[how] == _expected_count(strips, how), how
    assert counts["all"] == len(strips)
    assert len(set(counts.values())) > 1  # some filter changed the list
    page.select_option("#ex-filter", value="all")
    page.select_option("#ex-sort", value="conf-desc")
    conf = [s["reads"][att]["confidence"] for s in strips]
    first = int(page.locator("#ex-strips option").first.get_attribute("value"))
    assert conf[first] == max(conf)

    assert errors == []
    assert requests == [index.resolve().as_uri()]  # the page itself, nothing else
    page.close()


def _wrong_right(strips: list[dict], a: int, b: int) -> list[int]:
    """Indices of the strips view ``a`` reads wrong and view ``b`` reads right."""
    return [
        i
        for i, s in enumerate(strips)
        if s["reads"][a] is not None
        and s["reads"][b] is not None
        and s["reads"][a]["reading"] != s["truth"]
        and s["reads"][b]["reading"] == s["truth"]
    ]


def test_explorer_a_wrong_b_right_filter_and_a_new_list_selects_its_first(browser, explored):
    """ "A wrong, B right" for every ordered pair of views (named by their labels, whatever
    the readers), to the counts the data gives; changing the filter or the order selects the
    first strip of the new list; the confidence orders say which end comes first."""
    index = explored["report"]
    ev = embedded(index)["trains"][0]["evals"][0]
    labels = [v["label"] for v in ev["views"]]
    pairs = [(a, b) for a in range(len(labels)) for b in range(len(labels)) if a != b]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(index.resolve().as_uri(), wait_until="load")

    def listed() -> list[int]:
        opts = page.locator("#ex-strips option")
        return [int(opts.nth(i).get_attribute("value")) for i in range(opts.count())]

    def selected() -> int:
        return int(page.locator("#ex-strips").input_value())

    orders = page.locator("#ex-sort option").all_inner_texts()
    assert any("lowest first" in o for o in orders) and any("highest first" in o for o in orders)
    filters = page.locator("#ex-filter option").all_inner_texts()
    for a, b in pairs:  # views in registry order: "fixed wrong, attention right" first
        assert f"{labels[a]} wrong, {labels[b]} right" in filters
    assert filters.index(f"{labels[0]} wrong, {labels[1]} right") < filters.index(
        f"{labels[1]} wrong, {labels[0]} right"
    )
    found = None
    for li, entry in enumerate(ev["lengths"]):
        page.select_option("#ex-length", index=li)
        for a, b in pairs:
            page.select_option("#ex-filter", label=f"{labels[a]} wrong, {labels[b]} right")
            want = _wrong_right(entry["strips"], a, b)
            assert listed() == want, (entry["length"], labels[a], labels[b])
            if want:
                assert selected() == want[0]  # the new list's first strip
                found = found or (li, a, b)
    assert found, "no strip one reader reads and the other fails: the filter was never shown"

    # a strip chosen further down, then a new filter or order: the new list's first strip
    li = found[0]
    page.select_option("#ex-length", index=li)
    strips = ev["lengths"][li]["strips"]
    for how, order in (("any-wrong", "index"), ("all", "conf-asc"), ("all", "conf-desc")):
        page.select_option("#ex-filter", value="all")
        page.select_option("#ex-sort", value="index")
        page.select_option("#ex-strips", value=str(len(strips) - 1))
        assert selected() == len(strips) - 1
        page.select_option("#ex-filter", value=how)
        page.select_option("#ex-sort", value=order)
        shown = listed()
        assert shown and selected() == shown[0], (how, order)
        title = page.locator("#ex-strip-title").inner_text()
        assert title.startswith(f"Strip #{strips[shown[0]]['index']} ")
    focus = int(page.locator("#ex-focus").input_value())
    conf = [s["reads"][focus]["confidence"] for s in strips]
    page.select_option("#ex-sort", value="conf-asc")
    assert conf[selected()] == min(conf)  # "lowest first": the least confident first
    assert errors == []
    page.close()
