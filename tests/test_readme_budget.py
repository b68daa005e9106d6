"""One lab budget: the overrides docs/lab.md and scripts/README.md name as "the lab budget"
are the ones scripts/lab_figures.py runs (``attnlab.maintain.labcommands.BUDGETS["lab"]``), and
each command of the handout that trains carries that budget, as the script runs it: so the
measured figures and the commands beside them cannot drift apart (a user pasting step 1 once
got the demo's budget, and figures five times off)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers.pages import readme_commands

from attnlab.maintain.labcommands import BUDGETS, ONE_AT_A_TIME, commands, equal_minutes

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "docs" / "lab.md"
# "lab budget" (bold or not), then the first `...` span after it: the overrides, in order
STATED = re.compile(r"lab budget\**\s*\(?`(?P<overrides>[^`]+)`")
TRAINS = (("attnlab", "sweep"), ("attnlab", "train"))
PATHS = ("data.path", "data.val_path")  # the folders the handout names, the script makes


def lab_budget() -> list[str]:
    return BUDGETS["lab"]


def stated_budgets(text: str) -> list[list[str]]:
    return [m["overrides"].split() for m in STATED.finditer(text)]


def training_commands(argvs: list[list[str]]) -> set[frozenset[str]]:
    """Each training command's words, the script's own settings left out (where it writes,
    one job at a time: the same numbers) and the handout's folders by key only."""
    out = set()
    for argv in argvs:
        if tuple(argv[:2]) not in TRAINS:
            continue
        words = [w for w in argv if not w.startswith("hydra") and w not in ONE_AT_A_TIME]
        words = [w.split("=")[0] if w.split("=")[0] in PATHS else w for w in words]
        out.add(frozenset(words + ["train.threads=1"]))
    return out


@pytest.mark.parametrize("page", ["docs/lab.md", "scripts/README.md"])
def test_each_page_states_the_budget_the_script_runs(page):
    stated = stated_budgets((ROOT / page).read_text(encoding="utf-8"))
    assert stated, f"{page} names no lab budget"
    assert all(s == lab_budget() for s in stated), (page, stated, lab_budget())


def test_a_different_stated_budget_is_found():
    text = "at the **lab budget** `train.steps=600 eval.n=200` (a fifth ...)"
    assert stated_budgets(text) == [["train.steps=600", "eval.n=200"]] != [lab_budget()]
    assert stated_budgets("the lab budget (`train.steps=500 eval.n=200`; ...)") == [
        ["train.steps=500", "eval.n=200"]
    ]


def test_the_handouts_training_commands_are_the_scripts_at_the_lab_budget():
    """Steps 1, 5, 6, 7 and 9 (at equal steps and at equal minutes) and the strong-encoder side
    quest: each command that trains is the one lab_figures.py runs for the figures beside it,
    budget and thread count included: the lab budget, or for step 9's second study the same
    budget in minutes (``equal_minutes``: the steps only a ceiling)."""
    doc = [shlex.split(c) for c in readme_commands(LAB.read_text(encoding="utf-8"))]
    ran = [argv for _, _, argv in commands(Path("lab"), lab_budget())]
    assert training_commands(doc) == training_commands(ran)
    assert len(training_commands(doc)) == 7
    timed = [w for w in training_commands(doc) if "tune.minutes" in " ".join(w)]
    assert len(timed) == 1 and {*equal_minutes(lab_budget()), "train.threads=1"} <= timed[0]
    for words in training_commands(doc) - set(timed):
        assert {*lab_budget(), "train.threads=1"} <= words, sorted(words)


def test_a_command_without_the_budget_is_found():
    demo = [["attnlab", "sweep", "lengths", "seed=0"]]
    ran = [argv for _, _, argv in commands(Path("lab"), lab_budget())][:1]
    assert training_commands(demo) != training_commands(ran)


def test_the_cost_step_times_with_one_thread_and_says_so():
    text = LAB.read_text(encoding="utf-8")
    step = text.split("## 8. ", 1)[1].split("\n## 9. ", 1)[0]
    (cost,) = [c for c in readme_commands(step) if c.startswith("attnlab cost 'cost.readers")]
    assert "train.threads=1" in shlex.split(cost)
    assert "**one thread**" in step and "load average" in step  # beside the times


def test_step_9_quotes_the_time_of_its_command_as_written():
    step = LAB.read_text(encoding="utf-8").split("## 9. ", 1)[1]
    tuned, timed = [c for c in readme_commands(step) if c.startswith("attnlab sweep tuned")]
    assert {*lab_budget(), "train.threads=1"} <= set(shlex.split(tuned))
    assert {*equal_minutes(lab_budget()), "train.threads=1"} <= set(shlex.split(timed))
    assert "This command, as written, took 26 min 23 s" in step
