"""The lab walkthrough's figures, regenerated from real runs (README.md, "The lab, step by step").

Runs every command of the walkthrough at one named budget into a folder, one training process
at a time (``hydra/launcher=basic``, ``train.threads=1``), then computes each figure the README
quotes from the files those commands wrote, through attnlab's own API (``attnlab.results``,
``attnlab.compare``) and the probe's ``summary.csv``. The README holds each figure between
markers::

    <!-- lab:comparison -->
    ...
    <!-- /lab -->

    python scripts/lab_figures.py lab/             # run what is missing, print the figures
    python scripts/lab_figures.py lab/ --write     # ... and write them into README.md
    python scripts/lab_figures.py lab/ --check     # exit 1 naming each figure that differs

A step whose outputs are already in the folder is not run again, so ``--check`` on a finished
folder only recomputes. Needs scikit-learn for the last step (``pip install scikit-learn``).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from attnlab.io import atomic_write

# The named budget: a fifth of the default steps (500 of 2,500), 200 test strips per length.
BUDGETS = {"lab": ["train.steps=500", "eval.n=200"], "default": [], "tiny": ["preset=tiny"]}
ONE_AT_A_TIME = ["hydra/launcher=basic", "train.threads=1"]
DONE = "eval/synthetic-greedy/eval.json"  # a sweep job's evaluation, written last
# Step 9 (is the comparison fair?): each reader's study, then its best trial's re-runs.
FAIR_TRIALS, FAIR_SEEDS = 12, 3
FAIR_SPACE = ["optim.lr=interval(0.0005,0.01)", "model.dec_hidden=choice(64,128,256)"]
MARKER = re.compile(r"<!-- lab:(?P<name>[a-z_]+) -->\n(?P<body>.*?)<!-- /lab -->", re.DOTALL)


# ---------------------------------------------------------------------------------------------
# Markers in the README


def read_blocks(text: str) -> dict[str, str]:
    """Each ``<!-- lab:NAME -->`` block's body (without the markers), by name; a name used
    twice, or a marker left open, is an error."""
    blocks: dict[str, str] = {}
    for m in MARKER.finditer(text):
        if m["name"] in blocks:
            raise ValueError(f"lab:{m['name']}: marker used twice")
        if "<!-- lab:" in m["body"]:
            raise ValueError(f"lab:{m['name']}: no <!-- /lab --> before the next marker")
        blocks[m["name"]] = m["body"]
    opened = re.findall(r"<!-- lab:([a-z_]+) -->", text)
    missing = [name for name in opened if name not in blocks]
    if missing:
        raise ValueError(f"lab:{missing[0]}: marker without <!-- /lab -->")
    return blocks


def write_blocks(text: str, figures: dict[str, str]) -> str:
    """``text`` with each named block's body replaced by ``figures[name]`` (ending in a newline);
    blocks not in ``figures`` are kept; a figure without a block is an error."""
    absent = sorted(set(figures) - set(read_blocks(text)))
    if absent:
        raise ValueError(f"no <!-- lab:{absent[0]} --> block in the README")

    def body(m: re.Match) -> str:
        new = figures.get(m["name"])
        new = m["body"] if new is None else new.rstrip("\n") + "\n"
        return f"<!-- lab:{m['name']} -->\n{new}<!-- /lab -->"

    return MARKER.sub(body, text)


def stale(text: str, figures: dict[str, str]) -> list[str]:
    """The names of the figures whose README block differs from the regenerated figure."""
    blocks = read_blocks(text)
    return [
        name
        for name, fig in figures.items()
        if blocks.get(name, "").rstrip("\n") != fig.rstrip("\n")
    ]


# ---------------------------------------------------------------------------------------------
# The walkthrough's commands


def commands(out: Path, budget: list[str]) -> list[tuple[str, Path, list[str]]]:
    """(step, what it leaves, argv) in walkthrough order; a step is skipped when what it
    leaves exists."""
    o = out
    run = [*ONE_AT_A_TIME, *budget]
    hw_train, hw_test = o / "hw_strips_train", o / "hw_strips_test"
    hw = [f"data.path={hw_train}", f"data.val_path={hw_test}", "train.threads=1", *budget]
    strips = [sys.executable, "scripts/handwritten_strips.py"]
    return [
        ("comparison", o / f"compare/1/{DONE}",
         ["attnlab", "sweep", "lengths", "seed=0", f"hydra.sweep.dir={o}/compare", *run]),
        ("comparison", o / "compare_report/index.html",
         ["attnlab", "report", str(o / "compare"), "--out", str(o / "compare_report")]),
        ("probe", o / "compare/1/probe/synthetic/probe.json",
         ["attnlab", "probe", str(o / "compare/1")]),
        ("probe", o / "compare/0/probe/synthetic/probe.json",
         ["attnlab", "probe", str(o / "compare/0")]),
        ("positions", o / f"positions/1/{DONE}",
         ["attnlab", "sweep", "lengths", "model=transformer", "model.pos=sinusoidal,learned",
          "seed=0", f"hydra.sweep.dir={o}/positions", *run]),
        ("positions", o / "positions_report/index.html",
         ["attnlab", "report", str(o / "positions"), "--out", str(o / "positions_report")]),
        ("own", hw_train / "labels.csv",
         [*strips, str(hw_train), "--images", "train", "--lengths", "1-8", "--per-length", "200"]),
        ("own", hw_test / "labels.csv",
         [*strips, str(hw_test), "--images", "test", "--lengths", "1-8", "--per-length", "40",
          "--seed", "1"]),
        ("own", o / "own/metrics.json",
         ["attnlab", "train", "data=folder", *hw, f"hydra.run.dir={o}/own"]),
        ("own", o / "own/eval/held-out-greedy/eval.json", ["attnlab", "eval", str(o / "own")]),
        ("width", o / f"widths/3/{DONE}",
         ["attnlab", "sweep", "lengths", "model=fixed", "model.hidden=16,64", "seed=0,1",
          f"hydra.sweep.dir={o}/widths", *run]),
        ("width", o / "widths_report/index.html",
         ["attnlab", "report", str(o / "widths"), "--out", str(o / "widths_report")]),
        ("cost", o / "cost/growth.csv",
         ["attnlab", "cost", "cost.readers=[fixed,attention,transformer]",
          "cost.lengths=[1,2,4,8,16,32]", f"cost.out={o}/cost", "train.threads=1", *budget]),
        ("fair", o / f"tuned/winners/attention/{FAIR_SEEDS - 1}/{DONE}",
         ["attnlab", "sweep", "tuned", "model=fixed,attention", f"tune.trials={FAIR_TRIALS}",
          f"tune.seeds={FAIR_SEEDS}", *FAIR_SPACE, f"hydra.sweep.dir={o}/tuned", *run]),
        ("fair", o / "tuned_report/index.html",
         ["attnlab", "report", str(o / "tuned"), "--out", str(o / "tuned_report")]),
    ]  # fmt: skip


def run_all(out: Path, budget: list[str], say) -> dict[str, float]:
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


# ---------------------------------------------------------------------------------------------
# Figures (from the files the commands wrote)


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def split_totals(res, variant: str, split: str, eval_name: str | None = None) -> tuple:
    """Seed-mean exact accuracy and CER of a variant's split total."""
    m = res.metrics
    rows = m[(m["variant"] == variant) & (m["split"] == split) & m["total"]]
    if eval_name is not None:
        rows = rows[rows["eval"] == eval_name]
    return rows["exact_acc"].astype(float).mean(), rows["cer"].astype(float).mean()


def at_length(res, variant: str, length: int) -> tuple:
    m = res.metrics
    rows = m[(m["variant"] == variant) & (m["length"] == length)]
    return rows["exact_acc"].astype(float).mean(), rows["cer"].astype(float).mean()


def diff_line(diffs, split: str, key: str = "exact") -> str:
    row = diffs[(diffs["split"] == split) & diffs["total"]].iloc[0]
    lo, hi, d = (100 * float(row[f"{key}_diff{s}"]) for s in ("_lo", "_hi", ""))
    return f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def comparison_figures(out: Path) -> dict[str, str]:
    import attnlab

    res = attnlab.results(out / "compare")
    diffs = attnlab.compare(res, "attention", "fixed")
    rows = ["| reader | seen exact % | seen CER % | unseen exact % | unseen CER % |",
            "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for reader in ("fixed", "attention"):
        (se, sc), (ue, uc) = split_totals(res, reader, "seen"), split_totals(res, reader, "unseen")
        rows.append(f"| {reader} | {pct(se)} | {pct(sc)} | {pct(ue)} | {pct(uc)} |")
    rows.append(
        f"\nattention − fixed, paired over the same strips [95%]: seen exact "
        f"{diff_line(diffs, 'seen')} points, CER {diff_line(diffs, 'seen', 'cer')}; unseen "
        f"exact {diff_line(diffs, 'unseen')}, CER {diff_line(diffs, 'unseen', 'cer')}."
    )
    m = res.metrics
    top = int(m[m["split"] == "seen"]["length"].max())
    lengths = sorted({1, top // 2, top, top + 1, top + 2, 3 * top // 2, 2 * top} - {0})
    by_len = ["| length | " + " | ".join(map(str, lengths)) + " |",
              "| --- |" + " ---: |" * len(lengths)]  # fmt: skip
    for reader in ("fixed", "attention"):
        cells = [at_length(res, reader, n) for n in lengths]
        by_len.append(f"| {reader} exact % | " + " | ".join(pct(e) for e, _ in cells) + " |")
        by_len.append(f"| {reader} CER % | " + " | ".join(pct(c) for _, c in cells) + " |")
    return {"comparison": "\n".join(rows), "lengths": "\n".join(by_len),
            "explorer": explorer_figure(res)}  # fmt: skip


def explorer_figure(res) -> str:
    """At the longest seen length: how often the fixed reader fails where attention reads
    right, and the first such strip with both readings and the fixed reader's failure class
    (recomputed from truth and reading: an older readings.csv's ``mode`` has older words)."""
    from attnlab.evaluation.analysis import failure_mode
    from attnlab.evaluation.metrics import METRIC

    m = res.metrics
    top = int(m[m["split"] == "seen"]["length"].max())
    r = res.readings[res.readings["length"].astype(int) == top]
    fixed = r[r["variant"] == "fixed"].set_index("source")
    att = r[r["variant"] == "attention"].set_index("source").loc[fixed.index]
    wrong = ~fixed["correct"].astype(bool) & att["correct"].astype(bool)
    text = (
        f"At length {top} (the longest seen) the fixed reader got {int(wrong.sum())} of "
        f"{len(fixed)} strips wrong that the attention reader read right"
    )
    if not wrong.any():
        return text + "."
    first = wrong[wrong].index[0]
    f, a = fixed.loc[first], att.loc[first]
    mode = METRIC[failure_mode(f["truth"], f["reading"])].label  # the report's words
    return (
        f"{text}. The first, `{first}`: truth `{f['truth']}`, fixed `{f['reading']}` "
        f"({mode}, confidence {float(f['confidence']):.2f}), attention `{a['reading']}` "
        f"(confidence {float(a['confidence']):.2f})."
    )


def probe_figure(out: Path) -> str:
    import pandas as pd

    import attnlab

    runs = attnlab.results(out / "compare").runs
    lines = ["| reader | split | strips | attended glyph | true glyph | random glyph |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for reader in ("attention", "fixed"):
        (run,) = runs[runs["reader"] == reader]["run"]
        (summary,) = sorted((Path(run) / "probe").glob("*/summary.csv"))
        t = pd.read_csv(summary, dtype={"length": str})
        for row in t[t["length"] == "all"].itertuples(index=False):
            cells = [
                "–" if pd.isna(getattr(row, k)) else f"{getattr(row, k):.2f}"
                for k in ("drop_attended", "drop_true", "drop_random")
            ]
            lines.append(f"| {reader} | {row.split} | {row.n_strips} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sweep_table(res, key: str) -> str:
    """Per variant: seeds, seen and unseen exact (seed mean)."""
    lines = [f"| {key} | seeds | seen exact % | unseen exact % |", "| --- | ---: | ---: | ---: |"]
    for variant in sorted(res.runs["variant"].unique()):
        seeds = res.runs[res.runs["variant"] == variant]["seed"].nunique()
        (se, _), (ue, _) = split_totals(res, variant, "seen"), split_totals(res, variant, "unseen")
        lines.append(f"| {variant.split('=')[-1]} | {seeds} | {pct(se)} | {pct(ue)} |")
    return "\n".join(lines)


def width_figure(out: Path) -> str:
    import attnlab

    res = attnlab.results(out / "widths")
    wide, narrow = "fixed · model.hidden=64", "fixed · model.hidden=16"
    diffs = attnlab.compare(res, wide, narrow)
    return (
        sweep_table(res, "model.hidden")
        + f"\n\n64 − 16, paired strip by strip and seed by seed [95%]: seen exact "
        f"{diff_line(diffs, 'seen')} points, unseen {diff_line(diffs, 'unseen')}."
    )


def positions_figure(out: Path) -> str:
    import attnlab

    res = attnlab.results(out / "positions")
    return sweep_table(res, "model.pos")


def own_figure(out: Path) -> str:
    import attnlab

    res = attnlab.results(out / "own")
    ev = res.metrics["eval"].iloc[0]
    (se, sc) = split_totals(res, res.runs["variant"].iloc[0], "seen", ev)
    n = len(res.readings[res.readings["eval"] == ev])
    return (
        f"Held-out handwriting (`{ev}`: {n} strips, lengths 1-8, of handwritten samples no "
        f"training strip holds): {pct(se)}% exact, CER {pct(sc)}%."
    )


def cost_figure(out: Path) -> str:
    """Lab step 8: what the readers cost by length (attnlab.bench.cost_files.lab_table)."""
    from attnlab.bench.cost_files import lab_table

    return lab_table(out / "cost/cost.csv", out / "cost/growth.csv")


def fair_figure(out: Path) -> str:
    """Each reader's expected best validation objective at 1, N/2 and N trials (unbiased
    estimator, 95% bootstrap band), then the report's lines: where the curves cross and the
    re-run winners' paired difference (attnlab.report.tuned, from the study's files)."""
    from attnlab.report import discover_runs
    from attnlab.report.tuned import tuned_section

    root = out / "tuned"
    section = tuned_section(root, discover_runs([root / "winners"]), {})
    frame, study = section.frame, section.study
    big_n = study.trials
    ns = sorted({1, big_n // 2, big_n} - {0})
    head = " | ".join(f"n = {n}" for n in ns)
    lines = [f"| expected best {study.objective} % [95%], {study.sampler} search | {head} |",
             "| --- |" + " ---: |" * len(ns)]  # fmt: skip
    for reader in study.readers:
        rows = frame[(frame["variant"] == reader) & (frame["estimator"] == "unbiased")]
        rows = rows.set_index("n")
        cells = [f"{pct(rows.loc[n, 'expected'])} [{pct(rows.loc[n, 'lo'])}, "
                 f"{pct(rows.loc[n, 'hi'])}]" for n in ns if n in rows.index]  # fmt: skip
        lines.append(f"| {reader} | " + " | ".join(cells) + " |")
    return (
        "\n".join(lines) + "\n\n" + "\n".join(f"{ln[0].upper()}{ln[1:]}." for ln in section.lines)
    )


FIGURES = (
    "comparison",
    "lengths",
    "explorer",
    "probe",
    "width",
    "positions",
    "own",
    "cost",
    "fair",
)


def figures(out: Path) -> dict[str, str]:
    """Every figure the walkthrough quotes (FIGURES), from the runs under ``out``."""
    figs = {
        **comparison_figures(out),
        "probe": probe_figure(out),
        "width": width_figure(out),
        "positions": positions_figure(out),
        "own": own_figure(out),
        "cost": cost_figure(out),
        "fair": fair_figure(out),
    }
    assert tuple(figs) == FIGURES, tuple(figs)
    return figs


def sync(readme: Path, figs: dict[str, str], write: bool, check: bool) -> int:
    """``--check``: 1 (each stale figure named on stderr) or 0; ``--write``: the figures
    written into ``readme`` whole; otherwise printed."""
    text = readme.read_text(encoding="utf-8")
    if check:
        bad = stale(text, figs)
        for name in bad:
            print(f"lab:{name}: the README's figure differs from the runs'", file=sys.stderr)
        return 1 if bad else 0
    for name, fig in figs.items():
        print(f"<!-- lab:{name} -->\n{fig}\n<!-- /lab -->")
    if write:
        new = write_blocks(text, figs)
        atomic_write(readme, lambda tmp: tmp.write_text(new, encoding="utf-8"))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder for the walkthrough's runs")
    ap.add_argument("--budget", choices=sorted(BUDGETS), default="lab")
    ap.add_argument("--readme", type=Path, default=Path("README.md"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the figures into the README")
    mode.add_argument("--check", action="store_true", help="exit 1 if a README figure differs")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    spent = run_all(args.out, BUDGETS[args.budget], print)
    if spent:
        steps = ", ".join(f"{k} {v:.0f} s" for k, v in spent.items())
        print(f"ran in {time.monotonic() - t0:.0f} s ({steps})")
    return sync(args.readme, figures(args.out), args.write, args.check)


if __name__ == "__main__":
    sys.exit(main())
