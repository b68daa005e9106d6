"""Calibration of one training range: what a user who rejects low-confidence readings gets
(each evaluation's thresholds.csv, averaged over seeds) and the reliability diagrams."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from attnlab.evaluation.metrics import METRIC
from attnlab.report.aggregate import TrainGroup
from attnlab.report.gallery import Image
from attnlab.report.variants import ordered_variants
from attnlab.runs.rundir import RunDir


@dataclass
class ReaderCalibration:
    variant: str  # a variant label (the reader's name when nothing else is swept)
    eval: str
    rows: list[dict[str, str]]  # threshold, kept %, exact % of kept (seed means), seeds
    diagrams: list[Image] = field(default_factory=list)  # reliability.png of each seed's run


def calibration(group: TrainGroup) -> list[ReaderCalibration]:
    """Per variant and evaluation that counts: the threshold table and reliability diagrams."""
    out = []
    runs = [r for r in group.runs if r.evals]
    for variant in ordered_variants(r.variant or r.reader_name for r in runs):
        mine = [r for r in runs if (r.variant or r.reader_name) == variant]
        for name in sorted({e for r in mine for e in r.evals}):
            frames, diagrams = [], []
            for run in (r for r in mine if name in r.evals):
                ev = RunDir(run.path).eval_dir(name)
                if ev.thresholds.is_file():
                    try:
                        frames.append(pd.read_csv(ev.thresholds))
                    except (OSError, ValueError):
                        continue  # an unreadable table is left out; the eval itself counts
                if ev.reliability.is_file():
                    diagrams.append(
                        Image(f"{run.path.name}/{ev.reliability.name}", ev.reliability.read_bytes())
                    )
            if frames:
                out.append(ReaderCalibration(variant, name, _rows(frames), diagrams))
    return out


def _rows(frames: list[pd.DataFrame]) -> list[dict[str, str]]:
    pct = METRIC["exact_acc"]
    table = pd.concat(frames).groupby("threshold", sort=True)
    mean = table[["kept", "exact_acc_kept"]].mean()
    return [
        {
            "threshold": f"{t:g}",
            "kept": pct.fmt(r["kept"]),
            "exact_kept": pct.fmt(r["exact_acc_kept"]),
            "seeds": str(len(frames)),
        }
        for t, r in mean.iterrows()
    ]


SECTION = "Calibration"


def left_out(groups: list[TrainGroup], drawn: bool) -> str | None:
    """Why there is no calibration section though runs were evaluated: none of their
    evaluations has a readable thresholds.csv (an evaluation written by an older attnlab)."""
    if drawn or not any(r.evals for g in groups for r in g.runs):
        return None
    return "no evaluation has a readable thresholds.csv: run attnlab eval on the runs again"
