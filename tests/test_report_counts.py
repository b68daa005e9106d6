"""Two small report fixes (issue 51): parameter counts print as integers (not ``245184.0``),
and ``attnlab report`` says in one line when it replaces an earlier report in its folder."""

from __future__ import annotations

import pandas as pd

from attnlab.report.build import build_report
from attnlab.report.cost import COLUMNS, CostView


def test_parameter_counts_print_as_integers():
    """variant_cost returns floats (245184.0); the page and summary.md print 245,184 as
    ``245184``, an uncounted part as ``-``."""
    variants = pd.DataFrame(
        [["1-8", "fixed", 100000.0, 140000.0, 5184.0, 245184.0, 12.18, 8.0]],
        columns=["train", "variant", *COLUMNS],
    )
    variants.loc[1] = ["1-8", "attention", float("nan"), 1.0, 2.0, 3.0, 1.5, 8.0]
    measured = pd.DataFrame({"reader": ["fixed"], "length": [8], "params": [245184.0]})
    view = CostView(variants, measured, [])
    text = "\n".join(view.markdown())
    assert "245184.0" not in text and "245184" in text
    row = next(ln for ln in text.splitlines() if "| fixed " in ln and "12.18" in ln)
    assert [c.strip() for c in row.strip("|").split("|")][2:6] == [
        "100000",
        "140000",
        "5184",
        "245184",
    ]
    att = next(ln for ln in text.splitlines() if "| attention " in ln)
    assert [c.strip() for c in att.strip("|").split("|")][2] == "-"
    page = "".join(view.html().values())
    assert "<td>245184</td>" in page and "245184.0" not in page


def test_a_report_over_an_earlier_one_says_so(trained, tmp_path):
    out = tmp_path / "report"
    said: list[str] = []
    build_report([trained["fixed"]], out, say=said.append)
    assert not [line for line in said if "replaced" in line]  # a new folder: nothing to say
    (out / "my_notes.txt").write_text("mine")
    said.clear()
    build_report([trained["fixed"]], out, say=said.append)
    assert said[0] == f"{out}: replaced the earlier report there (files not its own kept)"
    assert (out / "my_notes.txt").read_text() == "mine"
