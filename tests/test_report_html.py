"""attnlab.report's pages and files on hand-made run directories: the HTML (escaped, every
section), the plots each reader gets, its colours and names from the registry, file modes,
and scripts/check_report.sh in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers.runs import EVAL_HEADER, write_run, write_sweep

from attnlab.evaluation.metrics import METRICS
from attnlab.report import (
    build_report,
    figures,
    reader_styles,
)

ROOT = Path(__file__).resolve().parents[1]


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
