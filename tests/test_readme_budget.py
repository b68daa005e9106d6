"""One lab budget: the overrides README.md and scripts/README.md name as "the lab budget" are
the ones scripts/lab_figures.py runs (its ``BUDGETS["lab"]``), so the measured figures and the
commands that measured them cannot drift apart."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# "lab budget" (bold or not), then the first `...` span after it: the overrides, in order
STATED = re.compile(r"lab budget\**\s*\(?`(?P<overrides>[^`]+)`")


def lab_budget() -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "lab_figures_budget", ROOT / "scripts/lab_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BUDGETS["lab"]


def stated_budgets(text: str) -> list[list[str]]:
    return [m["overrides"].split() for m in STATED.finditer(text)]


@pytest.mark.parametrize("readme", ["README.md", "scripts/README.md"])
def test_each_readme_states_the_budget_the_script_runs(readme):
    stated = stated_budgets((ROOT / readme).read_text(encoding="utf-8"))
    assert stated, f"{readme} names no lab budget"
    assert all(s == lab_budget() for s in stated), (readme, stated, lab_budget())


def test_a_different_stated_budget_is_found():
    text = "at the **lab budget** `train.steps=600 eval.n=200` (a fifth ...)"
    assert stated_budgets(text) == [["train.steps=600", "eval.n=200"]] != [lab_budget()]
    assert stated_budgets("the lab budget (`train.steps=500 eval.n=200`; ...)") == [
        ["train.steps=500", "eval.n=200"]
    ]
