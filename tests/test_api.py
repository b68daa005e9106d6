"""The Python API (attnlab.load, results, compare), text columns written as quoted text, the
report's TensorBoard HParams sessions and the README's "From Python" block, all on one tiny
two-variant sweep (attention and fixed, seed 0, a few tens of seconds) and its report."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

import attnlab
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.report import build_report

EVAL = "synthetic-greedy"


@pytest.fixture(scope="module")
def swept(tmp_path_factory, tiny_sweep) -> dict[str, Path]:
    """The sweep (conftest's ``tiny_sweep``), its jobs by reader and its report."""
    cwd = tmp_path_factory.mktemp("api")
    res, sweep = tiny_sweep
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = {}
    for job in sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file()):
        jobs[pd.read_json(job / "metrics.json", typ="series")["reader"]] = job
    build_report([sweep], cwd / "report")
    return {"sweep": sweep, "report": cwd / "report", **jobs}


def test_import_stays_torch_free():
    code = (
        "import sys, attnlab; attnlab.UserError; "
        "assert 'torch' not in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_results_are_the_report_numbers(swept):
    res = attnlab.results(swept["sweep"])
    assert sorted(res.runs["variant"]) == ["attention", "fixed"]
    assert set(res.runs["status"]) == {"complete"} and set(res.runs["problems"]) == {""}
    assert set(res.runs["seed"]) == {0} and set(res.runs["threads"]) == {1}
    summary = pd.read_csv(swept["report"] / "summary.csv", dtype={"length": str})
    pd.testing.assert_frame_equal(as_written(res.summary), summary, check_dtype=False)
    # one row per run x evaluation x length, and the seen and unseen totals
    job = swept["attention"]
    table = pd.read_csv(job / "eval" / EVAL / "metrics_by_length.csv", dtype={"length": str})
    assert len(res.metrics) == 2 * len(table) and list(table["length"][-2:]) == ["all", "all"]
    rows = res.metrics[res.metrics["run"] == str(job)]
    assert list(as_written(rows)["length"]) == list(table["length"])
    np.testing.assert_allclose(rows["exact_acc"], table["exact_acc"])
    np.testing.assert_allclose(rows["cer"], table["cer"])


def as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """An API frame as its CSV file holds it: ``length`` text, "all" on the split totals."""
    assert str(frame["length"].dtype) == "Int64" and frame["total"].dtype == bool
    assert frame.loc[frame["total"], "length"].isna().all()
    assert frame.loc[~frame["total"], "length"].notna().all()
    length = frame["length"].astype(str).where(~frame["total"], "all")
    return frame.assign(length=length).drop(columns="total")


def test_frames_hold_fractions_and_integer_lengths_the_tables_print_points(swept):
    """The units the docstrings and the README state: rates are fractions in [0, 1] where
    summary.md prints percent and comparisons points (x 100); ``length`` is an integer column
    with the totals marked by ``total`` and ``split``, as the lab figures script reads it."""
    res = attnlab.results(swept["sweep"])
    for frame in (res.metrics, res.summary):
        assert frame["exact_acc"].between(0, 1).all() and frame["cer"].ge(0).all()
        assert set(frame.loc[frame["total"], "split"]) == {"seen", "unseen"}
        assert all(isinstance(n, int) for n in frame["length"].dropna().tolist())
    total = res.summary[(res.summary["variant"] == "fixed") & res.summary["total"]]
    seen = total[total["split"] == "seen"].iloc[0]
    md = (swept["report"] / "summary.md").read_text(encoding="utf-8")
    assert f"{100 * seen['exact_acc']:.1f}" in md  # summary.md: percent of the same number
    diffs = attnlab.compare(res, "attention", "fixed")
    row = diffs[diffs["total"] & (diffs["split"] == "seen")].iloc[0]
    page = (swept["report"] / "index.html").read_text(encoding="utf-8")
    assert f"{100 * row['exact_diff']:+.1f}" in page  # the page: percentage points
    lab = lab_figures()  # the README's figures read the frames through these
    exact, cer = lab.split_totals(res, "fixed", "seen")
    assert (exact, cer) == (seen["exact_acc"], seen["cer"])
    top = int(res.summary.loc[res.summary["split"] == "seen", "length"].max())
    at = res.metrics[(res.metrics["variant"] == "fixed") & (res.metrics["length"] == top)]
    assert lab.at_length(res, "fixed", top) == (at["exact_acc"].mean(), at["cer"].mean())
    assert lab.diff_line(diffs, "seen").startswith(f"{100 * row['exact_diff']:+.1f} [")
    assert f"At length {top} (the longest seen)" in lab.explorer_figure(res)


def lab_figures():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "lab_figures.py"
    spec = importlib.util.spec_from_file_location("lab_figures_api", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_is_comparisons_csv(swept):
    rows = attnlab.compare(attnlab.results(swept["sweep"]), "attention", "fixed")
    written = pd.read_csv(swept["report"] / "comparisons.csv", dtype={"length": str})
    lengths = pd.read_csv(swept["fixed"] / "eval" / EVAL / "metrics_by_length.csv")
    assert len(rows) == len(written) == len(lengths)
    pd.testing.assert_frame_equal(as_written(rows), written, check_dtype=False)
    with pytest.raises(attnlab.UserError, match=r"^compare\(res, a, b\): .nope.: no such variant"):
        attnlab.compare(attnlab.results(swept["sweep"]), "nope", "fixed")


def test_text_columns_stay_text(swept, tmp_path):
    """A reader that honours quotes (csv's QUOTE_NONNUMERIC) gets every truth and reading as
    text; unquoted they would be numbers ("0026" -> 26.0)."""
    path = swept["fixed"] / "eval" / EVAL / "readings.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, quoting=csv.QUOTE_NONNUMERIC))
    assert all(isinstance(r["truth"], str) and isinstance(r["reading"], str) for r in rows)
    res = attnlab.results(swept["fixed"])
    assert list(res.readings["truth"]) == [r["truth"] for r in rows]
    assert list(res.readings["reading"]) == [r["reading"] for r in rows]
    batch = StripSynth(attnlab.load(swept["fixed"]).config.data).sample(
        torch.tensor([4, 4]), torch.Generator().manual_seed(0)
    )
    batch.labels = ["0026", "0100"]  # the images need not match to test the file
    # labels.csv is an exchange format: plain "name,label" lines (a shell's tr ',' '\t' makes
    # it a list file), quoted only where a value needs it; csv and attnlab read text.
    with open(export_folder(batch, tmp_path) / "labels.csv", newline="") as f:
        assert next(f) == "filename,label\n"  # the header as it always was
        lines = f.read().splitlines()
    assert [line.split(",")[1] for line in lines] == ["0026", "0100"]
    assert [r[1] for r in csv.reader(lines)] == ["0026", "0100"]


def test_hparams_one_session_per_run(swept):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    summary = pd.read_csv(swept["report"] / "summary.csv", dtype={"length": str})
    sessions = sorted(p for p in (swept["report"] / "tensorboard").iterdir() if p.is_dir())
    assert len(sessions) == 2
    seen = {}
    for folder in sessions:
        acc = EventAccumulator(str(folder))
        acc.Reload()
        data = plugin_data_pb2.HParamsPluginData.FromString(
            acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
        )
        params = data.session_start_info.hparams
        reader = params["reader"].string_value
        assert params["seed"].number_value == 0 and params["train"].string_value == "1-3"
        seen[reader] = folder.name
        end = plugin_data_pb2.HParamsPluginData.FromString(
            acc.PluginTagToContent("hparams")["_hparams_/session_end_info"]
        )
        assert end.session_end_info.status == api_pb2.STATUS_SUCCESS  # status "complete"
        for row in summary[summary["variant"] == reader].itertuples():
            if row.length == "all":
                tags = {f"{EVAL}/{row.split}/exact_acc": row.exact_acc}
                tags[f"{EVAL}/{row.split}/cer"] = row.cer
            else:
                tags = {f"{EVAL}/exact_acc/len{int(row.length):02d}": row.exact_acc}
            for tag, value in tags.items():
                (event,) = acc.Scalars(tag)
                assert event.value == pytest.approx(value, abs=1e-6), tag
    assert sorted(seen) == ["attention", "fixed"]


def read_cli(attnlab_cli, run: Path, files: list[Path]) -> list[str]:
    res = attnlab_cli("read", *files, "--run", run, cwd=files[0].parent)
    assert res.returncode == 0, res.stderr
    texts = [line.split()[1] for line in res.stdout.splitlines()[1 : len(files) + 1]]
    return ["" if t == "(empty)" else t for t in texts]


def test_read_paths_images_and_arrays_as_the_cli(swept, attnlab_cli, tmp_path):
    reader = attnlab.load(swept["attention"])
    assert reader.charset == "0123456789" and reader.run == swept["attention"]
    batch = StripSynth(reader.config.data).sample(
        torch.tensor([1, 2, 3, 5]), torch.Generator().manual_seed(3)
    )
    folder = export_folder(batch, tmp_path / "strips")
    files = sorted(folder.glob("*.png"))
    want = read_cli(attnlab_cli, swept["attention"], files)
    grey = [np.asarray(Image.open(p)) for p in files]  # (H, W) uint8
    kinds = {
        "paths": files,
        "pil": [Image.open(p) for p in files],
        "uint8": grey,
        "rgb": [np.repeat(g[:, :, None], 3, axis=2) for g in grey],
        "float": [g.astype(np.float32) / 255 for g in grey],
        "uint16": [g.astype(np.uint16) * 257 for g in grey],
    }
    for kind, images in kinds.items():
        got = reader.read(images)
        assert [r.text for r in got] == want, kind
    first = reader.read(files[0])[0]
    assert first.source == str(files[0]) and 0.0 < first.confidence <= 1.0
    assert first.step_confidences.shape == (len(first.text) + 1,)
    assert first.attention.shape[0] == len(first.text) + 1
    with pytest.raises(attnlab.UserError, match=r"^<image 0>: an array of shape \(2, 3, 5\)"):
        reader.read(np.zeros((2, 3, 5)))
    with pytest.raises(attnlab.UserError, match="^no such run directory or checkpoint: nope"):
        attnlab.load("nope")


def readme_block() -> str:
    text = (Path(__file__).parent.parent / "README.md").read_text()
    section = re.split(r"\n#+ From Python\n", text, maxsplit=1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_block_runs(swept, monkeypatch, capsys):
    """The block as written; only its ``run =`` and ``sweep =`` lines point at the test's."""
    code = readme_block()
    code = re.sub(r"^run = .*$", f"run = {str(swept['attention'])!r}", code, flags=re.M)
    code = re.sub(r"^sweep = .*$", f"sweep = {str(swept['sweep'])!r}", code, flags=re.M)
    exec(compile(code, "README.md", "exec"), {})
    assert "exact_diff" in capsys.readouterr().out
