"""The lab handout's commands (docs/lab.md), run for real to regenerate its figures.

``commands`` lists every command of the handout at one named budget (``BUDGETS``), one
training process at a time; ``run_all`` runs those whose outputs are missing.
``scripts/lab_figures.py`` is the entry point; attnlab.maintain.labfigures computes the
figures from the files these commands write."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The named budget: a fifth of the default steps (500 of 2,500), 200 test strips per length.
BUDGETS = {"lab": ["train.steps=500", "eval.n=200"], "default": [], "tiny": ["preset=tiny"]}
ONE_AT_A_TIME = ["hydra/launcher=basic", "train.threads=1"]
DONE = "eval/synthetic-greedy/eval.json"  # a sweep job's evaluation, written last
# Step 9 (is the comparison fair?): each reader's study, then its best trial's re-runs.
FAIR_TRIALS, FAIR_SEEDS = 12, 3
FAIR_SPACE = ["optim.lr=interval(0.0005,0.01)", "model.dec_hidden=choice(64,128,256)"]
# Step 9 again at equal minutes (tune.minutes): every trial and re-run gets the wall time the
# attention reader at the defaults trains the budget's steps in on one thread (PACE steps a
# minute, measured on the 2-core machine: docs/lab.md), the budget's steps raised to a
# ceiling that no trial reaches, so a reader with cheaper steps takes more of them.
PACE = 400
CEILING = 100_000
STRIPS_SCRIPT = "scripts/handwritten_strips.py"  # run from the repository's root


def commands(out: Path, budget: list[str]) -> list[tuple[str, Path, list[str]]]:
    """(step, what it leaves, argv) in handout order; a step is skipped when what it leaves
    exists."""
    o, q = out, shlex.quote
    run = " ".join([*ONE_AT_A_TIME, *budget])
    hw_train, hw_test = o / "hw_strips_train", o / "hw_strips_test"
    hw = f"data.path={q(str(hw_train))} data.val_path={q(str(hw_test))} train.threads=1"
    hw += "".join(f" {b}" for b in budget)
    strips = f"{q(sys.executable)} {STRIPS_SCRIPT}"
    fair = f"tune.trials={FAIR_TRIALS} tune.seeds={FAIR_SEEDS} " + " ".join(map(q, FAIR_SPACE))
    timed = " ".join([*ONE_AT_A_TIME, *equal_minutes(budget)])

    def report(name: str) -> str:
        return f"attnlab report {q(str(o / name))} --out {q(str(o / (name + '_report')))}"

    steps = [
        ("comparison", f"compare/1/{DONE}",
         f"attnlab sweep lengths seed=0 hydra.sweep.dir={q(str(o / 'compare'))} {run}"),
        ("comparison", "compare_report/index.html", report("compare")),
        ("probe", "compare/1/probe/synthetic/probe.json",
         f"attnlab probe {q(str(o / 'compare/1'))}"),
        ("probe", "compare/0/probe/synthetic/probe.json",
         f"attnlab probe {q(str(o / 'compare/0'))}"),
        ("positions", f"positions/1/{DONE}",
         "attnlab sweep lengths model=transformer model.pos=sinusoidal,learned seed=0 "
         f"hydra.sweep.dir={q(str(o / 'positions'))} {run}"),
        ("positions", "positions_report/index.html", report("positions")),
        ("own", "hw_strips_train/labels.csv",
         f"{strips} {q(str(hw_train))} --images train --lengths 1-8 --per-length 200"),
        ("own", "hw_strips_test/labels.csv",
         f"{strips} {q(str(hw_test))} --images test --lengths 1-8 --per-length 40 --seed 1"),
        ("own", "own/metrics.json",
         f"attnlab train model=attention data=folder {hw} hydra.run.dir={q(str(o / 'own'))}"),
        ("own", "own/eval/held-out-greedy/eval.json", f"attnlab eval {q(str(o / 'own'))}"),
        ("width", f"widths/3/{DONE}",
         "attnlab sweep lengths model=fixed model.hidden=16,64 seed=0,1 "
         f"hydra.sweep.dir={q(str(o / 'widths'))} {run}"),
        ("width", "widths_report/index.html", report("widths")),
        ("cost", "cost/growth.csv",
         "attnlab cost 'cost.readers=[fixed,attention,transformer]' "
         f"'cost.lengths=[1,2,4,8,16,32]' cost.out={q(str(o / 'cost'))} train.threads=1 "
         + " ".join(budget)),
        ("fair", f"tuned/winners/attention/{FAIR_SEEDS - 1}/{DONE}",
         f"attnlab sweep tuned model=fixed,attention {fair} "
         f"hydra.sweep.dir={q(str(o / 'tuned'))} {run}"),
        ("fair", "tuned_report/index.html", report("tuned")),
        ("fair_minutes", f"tuned_minutes/winners/attention/{FAIR_SEEDS - 1}/{DONE}",
         f"attnlab sweep tuned model=fixed,attention {fair} "
         f"hydra.sweep.dir={q(str(o / 'tuned_minutes'))} {timed}"),
        ("fair_minutes", "tuned_minutes_report/index.html", report("tuned_minutes")),
        ("strong", f"strong/1/{DONE}",
         "attnlab sweep lengths encoder=resnet seed=0 "
         f"hydra.sweep.dir={q(str(o / 'strong'))} {run}"),
        ("strong", "strong_report/index.html", report("strong")),
    ]  # fmt: skip
    return [(step, o / leaves, shlex.split(line)) for step, leaves, line in steps]


def equal_minutes(budget: list[str]) -> list[str]:
    """``budget`` as a budget in minutes: ``tune.minutes`` the time its steps take the
    attention reader at ``PACE``, its ``train.steps`` the ``CEILING``."""
    from attnlab.tasks.compose import compose

    steps = compose(["model=attention", *budget]).train.steps
    rest = [b for b in budget if not b.startswith("train.steps=")]
    return [*rest, f"tune.minutes={steps / PACE:g}", f"train.steps={CEILING}"]


def run_all(out: Path, budget: list[str], say: Callable[[str], None]) -> dict[str, float]:
    """Run each missing step; seconds per step name."""
    spent: dict[str, float] = {}
    bin_dir = Path(sys.executable).parent
    for step, leaves, argv in commands(out, budget):
        if leaves.exists():
            continue
        if argv[0] == "attnlab":
            argv = [str(bin_dir / "attnlab"), *argv[1:]]
        say(f"[{step}] {shlex.join(argv)}")
        t0 = time.monotonic()
        subprocess.run(argv, check=True)
        spent[step] = spent.get(step, 0.0) + time.monotonic() - t0
    return spent
