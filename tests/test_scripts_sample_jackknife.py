"""scripts/sample_jackknife.py on an evaluation's readings.csv, alone and paired (the
jackknife itself: tests/test_evaluation_shared_samples.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sample_jackknife.py"
spec = importlib.util.spec_from_file_location("sample_jackknife", SCRIPT)
jack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jack)


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
