"""The report's cost view: every variant's parameters by part and forward MFLOP per strip
in summary.csv, summary.md and the page, and a run's ``attnlab cost RUN`` table read as any
other table."""

from __future__ import annotations

import pandas as pd

from attnlab.evaluation.cost_count import variant_cost
from attnlab.tasks.compose import compose


def test_report_shows_each_variants_cost_and_a_runs_cost_table(
    tiny_sweep, copy_run, tmp_path, attnlab_run
):
    _, sweep = tiny_sweep  # evaluated jobs of both lab readers: 0 fixed, 1 attention
    fixed, att = copy_run(sweep / "0", "fix"), copy_run(sweep / "1", "att")
    res = attnlab_run(
        "cost", str(att), "train.threads=1", "cost.lengths=[2,4]", "cost.strips=1",
        "cost.repeats=1", "cost.read_batches=[1,2]", "cost.footprint_batch=0", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (att / "cost" / "cost.csv").is_file()
    out = tmp_path / "report"
    res = attnlab_run("report", str(att), str(fixed), "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    summary = pd.read_csv(out / "summary.csv", dtype={"reader": str, "length": str})
    for col in ["params_encoder", "params_decoder", "params_output", "params", "mflop"]:
        assert summary[col].notna().all(), col
    by_reader = summary.groupby("reader")[["params", "mflop", "cost_length"]].first()
    # the numbers are the configs' own: the same as counting the run's config here
    cfg = compose(["model=attention", "preset=tiny"])
    length = int(by_reader.loc["attention", "cost_length"])
    assert length == 3  # preset=tiny trains on lengths 1-3
    want = variant_cost(cfg, length)
    assert by_reader.loc["attention", "params"] == want["params"]
    assert abs(by_reader.loc["attention", "mflop"] - want["mflop"]) < 1e-9
    assert by_reader.loc["attention", "params"] != by_reader.loc["fixed", "params"]
    text = (out / "summary.md").read_text()
    assert "## What each variant costs" in text and "## Measured cost by length" in text
    page = (out / "index.html").read_text()
    assert 'id="cost"' in page and "Measured cost by length" in page
