"""attnlab.evaluation.shared_samples: the error of an exact % over strips that share source
samples (a folder's samples.csv, as handwritten_strips.py writes it), the one line
``attnlab eval --folder`` prints about it, its record in eval.json and the report's line."""

from __future__ import annotations

import csv
import json
import math

import pytest
from helpers.images import write_folder

from attnlab.evaluation.shared_samples import RECORD, SharedSamples, jackknife, line, measure


def test_the_jackknife_deletes_each_samples_strips_in_turn():
    """By hand: strips [a], [b], [a b], [c], the third misread. Deleting a leaves 2 of 2
    read, b 2 of 2, c 2 of 3: replicates 1, 1, 2/3, mean 8/9; variance (2/3) * (1/81 + 1/81 +
    4/81) = 4/81, so the error is 2/9."""
    values = {"s1": 1.0, "s2": 1.0, "s3": 0.0, "s4": 1.0}
    members = {"s1": ["a"], "s2": ["b"], "s3": ["a", "b"], "s4": ["c"]}
    mean, se = jackknife(values, members)
    assert mean == 0.75
    assert se == pytest.approx(2 / 9)


def test_strips_that_fail_together_get_a_wider_error_than_independent_ones():
    """One bad sample in 10 of 100 strips against 10 scattered failures: the same 90%, and
    only the first's error grows past twice the other's."""
    members = {f"s{i}": [f"d{i}", f"e{i % 7}", "bad" if i < 10 else f"f{i}"] for i in range(100)}
    scattered = {f"s{i}": float(i % 10 != 0) for i in range(100)}
    together = {f"s{i}": float(i >= 10) for i in range(100)}
    m1, se_scattered = jackknife(scattered, members)
    m2, se_together = jackknife(together, members)
    assert m1 == m2 == 0.9
    assert se_together > 2 * se_scattered
    assert not math.isnan(se_scattered)


def test_a_folder_without_samples_gets_no_line(tmp_path):
    assert measure(tmp_path, {"a.png": True}) is None
    assert measure(None, {"a.png": True}) is None
    assert line(None) is None


def test_a_samples_file_that_cannot_be_read_costs_the_line_not_the_evaluation(tmp_path):
    (tmp_path / "samples.csv").write_bytes(b"filename,samples\n\xff\xfe,1\n")
    assert line(measure(tmp_path, {"a.png": True})).startswith(
        f"{tmp_path / 'samples.csv'} could not be read"
    )
    (tmp_path / "samples.csv").write_text("filename,label\na.png,1\n")  # not the columns
    assert "does not name the samples" in line(measure(tmp_path, {"a.png": True}))
    # one sample in every strip: no replicate left to give an error, said so
    (tmp_path / "samples.csv").write_text("filename,samples\na.png,7\nb.png,7 8\n")
    assert "fewer than two samples" in measure(tmp_path, {"a.png": True, "b.png": False})


def test_the_line_says_too_narrow_only_where_the_samples_say_so(tmp_path):
    """Failures that share a sample: too narrow. Each strip its own sample: the two errors
    are the same figure (the jackknife of a mean is its standard error), nothing said."""
    rows = "".join(f"s{i}.png,{'bad' if i < 5 else i} {i}\n" for i in range(40))
    (tmp_path / "samples.csv").write_text("filename,samples\n" + rows)
    assert "too narrow" in line(measure(tmp_path, {f"s{i}.png": i >= 5 for i in range(40)}))
    rows = "".join(f"s{i}.png,{i}\n" for i in range(40))
    (tmp_path / "samples.csv").write_text("filename,samples\n" + rows)
    said = line(measure(tmp_path, {f"s{i}.png": i % 8 != 0 for i in range(40)}))
    assert "too narrow" not in said and "exact 87.50%" in said


def test_a_record_that_is_not_one_reads_as_none():
    good = SharedSamples("f/samples.csv", 6, 5, 0.5, 0.2, 0.1)
    assert SharedSamples.from_record(json.loads(json.dumps(good.record()))) == good
    assert SharedSamples.from_record(None) is None
    assert SharedSamples.from_record({**good.record(), "strips": "many"}) is None
    assert SharedSamples.from_record({"file": "f"}) is None


def test_eval_of_a_folder_whose_strips_share_samples_prints_the_error_by_sample(
    trained, tmp_path, attnlab_run, copy_run
):
    """The line below the table, the same figures in eval.json, and the report's line."""
    folder = write_folder(tmp_path / "shared", n=6, seed=43)
    names = sorted(p.name for p in folder.glob("*.png"))
    members = {name: [str(i % 3), str(9 + i % 2)] for i, name in enumerate(names)}
    rows = "".join(f"{n},test,test,{' '.join(s)}\n" for n, s in members.items())
    (folder / "samples.csv").write_text("filename,pool,group,samples\n" + rows)
    run = copy_run(trained["attention"])
    res = attnlab_run(
        "eval", run, "--folder", folder, "eval.n_boot=10", "eval.maps_k=0", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stdout.splitlines() if "source samples" in ln]
    readings = next((run / "eval").glob("folder-shared-*/readings.csv"))
    with open(readings, newline="") as f:
        correct = {r["source"]: float(r["correct"] == "True") for r in csv.DictReader(f)}
    mean, se = jackknife(correct, members)
    narrow = (
        "; the intervals above count strips and are too narrow"
        if round(se * 100, 2) > round(_strip_se(correct) * 100, 2)
        else ""
    )
    assert said == [
        f"these 6 strips share 5 source samples ({folder / 'samples.csv'}): exact "
        f"{mean * 100:.2f}%, standard error {se * 100:.2f} points by the samples' jackknife "
        f"against {_strip_se(correct) * 100:.2f} counting strips{narrow} (docs/own-strips.md)"
    ]
    meta = json.loads(next((run / "eval").glob("folder-shared-*/eval.json")).read_text())
    recorded = SharedSamples.from_record(meta["extra"][RECORD])
    assert (recorded.file, recorded.strips, recorded.samples) == (str(folder / "samples.csv"), 6, 5)
    assert (recorded.exact, recorded.se_by_sample, recorded.se_by_strip) == pytest.approx(
        (mean, se, _strip_se(correct))
    )
    report = attnlab_run("report", run, "--out", tmp_path / "report", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert (
        f"its 6 strips share 5 source samples ({folder / 'samples.csv'}), so the exact %'s "
        f"standard error is {se * 100:.2f} points by the samples' jackknife against "
        f"{_strip_se(correct) * 100:.2f} counting strips"
    ) in summary
    assert "share 5 source samples" in (tmp_path / "report" / "index.html").read_text()

    # a samples.csv that does not name every strip read: said, and nothing made up
    (folder / "samples.csv").write_text("filename,pool,group,samples\n" + rows.split("\n", 1)[1])
    res = attnlab_run(
        "eval", run, "--folder", folder, "eval.n_boot=10", "eval.maps_k=0", "eval.name=stale",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert [ln for ln in res.stdout.splitlines() if "samples" in ln] == [
        f"{folder / 'samples.csv'} does not name the samples of every strip read: no error by "
        "sample given"
    ]


def _strip_se(values: dict[str, float]) -> float:
    n, mean = len(values), sum(values.values()) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values.values()) / (n - 1) / n)
