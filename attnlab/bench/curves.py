"""curves: what each candidate reader reads after a budget of CPU minutes (issue 59: the
own-strips recipe chooses by accuracy per minute, with the plain CRNN as the reference).

For each candidate (a reader, its height and settings, ``CANDIDATES``) on the user's own
strips (``data=folder``: a training folder, a validation folder, a test folder nobody
trains or chooses on):

1. its **pace** is measured alone: one ``attnlab train ... train.minutes=CAL`` run, whose
   budget record gives the steps its minutes held (validations and checkpoints included);
2. for each budget of M minutes it trains ``train.steps`` = the steps M minutes hold at
   that pace (its schedule sized to them: ``optim.schedule=linear`` decays to zero at the
   last step, as ``train.minutes=M`` does when the clock runs out), one thread each;
3. the best checkpoint (on validation) reads the test folder once (``attnlab eval RUN
   --folder TEST``): exact accuracy on the lengths it was trained on and on the others.

Sizing each budget in steps (step 2) makes every figure repeatable bit for bit and lets
``jobs`` trainings share the machine without changing a number: only step 1 is timed, and
it must run on an otherwise idle machine (the figures say which pace they used).
"""

from __future__ import annotations

import csv
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from attnlab.bench.common import run_cli, table
from attnlab.models.readers.crnn import CRNNConfig
from attnlab.runs.resume import hydra_value
from attnlab.tasks.recipe import recipe_keys

# The crnn's own conv stages at 64 px (624,507 parameters against the recipe's 278,187; about
# 400k multiply-adds of 3x3 convolution a pixel column against 115k): the recipe's reader
# before its stages were narrowed, a larger encoder for the curves (scripts/README.md).
WIDE_STAGES = "model.conv_channels=[" + ",".join(map(str, CRNNConfig().conv_channels)) + "]"
# The candidates: the recipe's readers at the lab's heights and between, the recipe's 64-px
# reader with crnn's own wider stages, the lab's reader, and the plain CRNN a tutorial
# teaches (model=plain_crnn: its own one-cycle schedule with a tenth of the steps to warm up,
# the tutorial's).
CANDIDATES: dict[str, tuple[str, ...]] = {
    "plain CRNN (reference)": ("model=plain_crnn", "data.height=32"),
    "ctc 32 px": tuple(recipe_keys(32)),
    "ctc 48 px": ("model=ctc", "data.height=48"),
    "ctc 64 px": ("model=ctc", "data.height=64"),
    "crnn 64 px": tuple(recipe_keys(64)),
    "crnn 64 px, wide stages": (*recipe_keys(64), WIDE_STAGES),
    "attention 32 px": ("model=attention", "data.height=32"),
}
# Candidates that keep their own schedule (not COMMON's linear one), warmed up over this
# share of the budget's steps; the others warm up over optim.warmup_steps.
OWN_SCHEDULE = {"plain CRNN (reference)": 0.1}
# What every training shares: batches of 64 on one thread, the budget's schedule, no
# patience (the budget ends the run), no maps drawn by the test evaluation.
COMMON = (
    "train.batch_size=64",
    "train.threads=1",
    "optim.schedule=linear",
    "train.patience=null",
    "train.progress=plain",
)
STEPS_CEILING = 1_000_000  # train.steps of the timed pace run: its minutes end it


def attnlab(*args: object) -> None:
    run_cli("curves", *args)


def data_keys(train: Path, val: Path) -> list[str]:
    return ["data=folder", f"data.path={hydra_value(train)}", f"data.val_path={hydra_value(val)}"]


def keys_of(name: str, extra: list[str]) -> list[str]:
    """A candidate's keys with COMMON's beside them; its own schedule where it has one."""
    own = CANDIDATES[name]
    mine = name in OWN_SCHEDULE
    shared = [k for k in COMMON if not (mine and k.startswith("optim.schedule="))]
    return [*own, *shared, *extra]


def pace(name: str, data: list[str], extra: list[str], out: Path, minutes: float) -> dict:
    """Steps a minute of ``name``, measured by a ``train.minutes`` run of its own (alone:
    nothing else should run)."""
    run = out / "pace" / slug(name)
    if not (run / "metrics.json").is_file():
        attnlab(
            "train",
            *data,
            *keys_of(name, extra),
            f"train.minutes={minutes}",
            f"train.steps={STEPS_CEILING}",
            f"hydra.run.dir={hydra_value(run)}",
        )
    budget = json.loads((run / "metrics.json").read_text())["budget"]
    per_minute = budget["steps_taken"] / max(budget["minutes_spent"], 1e-9)
    return {"steps_per_minute": round(per_minute, 2), "measured": budget}


def train_and_test(
    name: str, steps: int, data: list[str], extra: list[str], test: Path, out: Path, label: str
) -> dict:
    """``steps`` steps of ``name`` (the budget ``label``), then its test reading."""
    run = out / "runs" / f"{slug(name)}-{label}"
    keys = keys_of(name, extra)
    if name in OWN_SCHEDULE:
        keys.append(f"optim.warmup_steps={max(1, round(OWN_SCHEDULE[name] * steps))}")
    if not (run / "metrics.json").is_file():
        attnlab("train", *data, *keys, f"train.steps={steps}", f"hydra.run.dir={hydra_value(run)}")
    metrics = json.loads((run / "metrics.json").read_text())
    if not (run / "eval" / "curves-test" / "metrics_by_length.csv").is_file():
        attnlab("eval", run, "--folder", test, "eval.name=curves-test", "eval.maps_k=0")
    seen, unseen = split_exact(run / "eval" / "curves-test" / "metrics_by_length.csv")
    return {
        "steps": steps,
        "val_exact": metrics["best"]["exact_acc"],
        "best_step": metrics["best"]["step"],
        "test_seen": seen,
        "test_unseen": unseen,
        "run": str(run),
    }


def split_exact(path: Path) -> tuple[dict | None, dict | None]:
    """Exact accuracy pooled over the seen lengths and over the unseen ones of one
    evaluation's metrics_by_length.csv (its rows per length; not its "all" rows):
    {"correct", "n", "exact"} each (None: no strip)."""
    pooled: dict[str, list[float]] = {"seen": [0.0, 0], "unseen": [0.0, 0]}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if not row["length"].isdigit():
                continue
            n = int(row["n"])
            pooled[row["split"]][0] += float(row["exact_acc"]) * n
            pooled[row["split"]][1] += n
    return tuple(
        None if n == 0 else {"correct": round(c), "n": int(n), "exact": round(c) / n}
        for c, n in (pooled["seen"], pooled["unseen"])
    )  # type: ignore[return-value]


def slug(name: str) -> str:
    """A candidate's name as a folder name: letters, digits and single dashes only."""
    return re.sub(r"[^0-9A-Za-z]+", "-", name).strip("-")


def run(
    train: Path,
    val: Path,
    test: Path,
    out: Path,
    minutes: list[float],
    names: list[str] | None = None,
    calibrate: float = 1.5,
    jobs: int = 1,
    extra: list[str] | None = None,
    paces: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The curves of ``names`` (default: every candidate) at ``minutes``; ``paces``: steps a
    minute already measured (by name), instead of measuring them."""
    names = names or list(CANDIDATES)
    if unknown := sorted(set(names) - set(CANDIDATES)):
        raise SystemExit(f"curves: unknown candidate(s) {unknown}; choose from {list(CANDIDATES)}")
    extra, data = list(extra or []), data_keys(train, val)
    measured = {}
    for name in names:  # one at a time, alone: the only timed part
        if paces and name in paces:
            measured[name] = {"steps_per_minute": paces[name], "measured": "given"}
        else:
            measured[name] = pace(name, data, extra, out, calibrate)
    work = [
        (name, m, max(1, round(m * measured[name]["steps_per_minute"])))
        for name in names
        for m in minutes
    ]

    def one(w: tuple[str, float, int]) -> dict[str, Any]:
        return train_and_test(w[0], w[2], data, extra, test, out, f"{w[1]:g}min")

    if jobs > 1:  # trainings side by side, each its own process
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(one, work))
    else:  # one at a time, from this thread
        done = [one(w) for w in work]
    curves: dict[str, dict[str, Any]] = {n: {"pace": measured[n], "at": {}} for n in names}
    for (name, m, _), result in zip(work, done, strict=True):
        curves[name]["at"][f"{m:g}"] = result
    return {"minutes": minutes, "curves": curves, "train": str(train), "test": str(test)}


def _pct(x: dict | None) -> str:
    return "-" if x is None else f"{100 * x['exact']:.1f}% ({x['correct']}/{x['n']})"


def show(r: dict[str, Any]) -> None:
    print(
        f"curves: exact accuracy after a budget of minutes on one thread (each budget sized in "
        f"steps from the reader's pace measured alone); test strips {r['test']}"
    )
    rows = []
    for name, c in r["curves"].items():
        for m, x in c["at"].items():
            rows.append(
                [
                    name,
                    m,
                    f"{c['pace']['steps_per_minute']:g}",
                    str(x["steps"]),
                    f"{100 * x['val_exact']:.1f}%",
                    _pct(x["test_seen"]),
                    _pct(x["test_unseen"]),
                ]
            )
    header = ["reader", "minutes", "steps/min", "steps", "validation", "test seen", "test unseen"]
    print(table(rows, header))
