"""scripts/sample_jackknife.py: the error of an exact % over strips that share samples."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sample_jackknife.py"
spec = importlib.util.spec_from_file_location("sample_jackknife", SCRIPT)
jack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jack)


def test_the_jackknife_deletes_each_samples_strips_in_turn():
    """By hand: strips [a], [b], [a b], [c], the third misread. Deleting a leaves 2 of 2
    read, b 2 of 2, c 2 of 3: replicates 1, 1, 2/3, mean 8/9; variance (2/3) * (1/81 + 1/81 +
    4/81) = 4/81, so the error is 2/9."""
    values = {"s1": 1.0, "s2": 1.0, "s3": 0.0, "s4": 1.0}
    members = {"s1": ["a"], "s2": ["b"], "s3": ["a", "b"], "s4": ["c"]}
    mean, se = jack.jackknife(values, members)
    assert mean == 0.75
    assert se == pytest.approx(2 / 9)


def test_strips_that_fail_together_get_a_wider_error_than_independent_ones():
    """One bad sample in 10 of 100 strips against 10 scattered failures: the same 90%, and
    only the first's error grows past the strip count's."""
    members = {f"s{i}": [f"d{i}", f"e{i % 7}"] for i in range(100)}
    scattered = {f"s{i}": float(i % 10 != 0) for i in range(100)}
    for i in range(100):
        members[f"s{i}"].append("bad" if i < 10 else f"f{i}")
    together = {f"s{i}": float(i >= 10) for i in range(100)}
    m1, se_scattered = jack.jackknife(scattered, members)
    m2, se_together = jack.jackknife(together, members)
    assert m1 == m2 == 0.9
    assert se_together > 2 * se_scattered
    assert not math.isnan(se_scattered)


def _files(tmp_path, readings_a, readings_b=None):
    (tmp_path / "samples.csv").write_text(
        "filename,pool,group,samples\nx.png,test,test,1 2\ny.png,test,test,2\nz.png,test,test,3\n"
    )
    paths = []
    for name, rows in (("a.csv", readings_a), ("b.csv", readings_b)):
        if rows is None:
            continue
        body = "".join(f'"{s}",1,"1","1",0.9,"{c}"\n' for s, c in rows)
        (tmp_path / name).write_text(
            '"source","length","truth","reading","confidence","correct"\n' + body
        )
        paths.append(str(tmp_path / name))
    return [str(tmp_path / "samples.csv"), *paths]


def test_one_evaluation_and_a_pair_print_one_line(tmp_path, capsys):
    a = [("x.png", "True"), ("y.png", "False"), ("z.png", "True")]
    b = [("x.png", "True"), ("y.png", "True"), ("z.png", "True")]
    assert jack.main(_files(tmp_path, a)) == 0
    out = capsys.readouterr().out
    assert "exact 66.67% over 3 strips of 3 samples" in out and "counting strips" in out
    assert jack.main(_files(tmp_path, a, b)) == 0
    assert "+33.33 points over 3 strips of 3 samples" in capsys.readouterr().out


def test_readings_of_strips_it_has_no_samples_for_are_one_line_and_status_2(tmp_path, capsys):
    args = _files(tmp_path, [("x.png", "True"), ("w.png", "True")])
    assert jack.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sample_jackknife: {args[1]}: strip w.png is not in samples.csv (1 such)"]
    args = _files(tmp_path, [("x.png", "True")], [("y.png", "True")])
    assert jack.main(args) == 2
    assert "cannot be paired" in capsys.readouterr().err
    assert jack.main([str(tmp_path / "none.csv"), args[1]]) == 2
    assert "none.csv" in capsys.readouterr().err
