"""Sentences generated from the aggregated numbers (never fixed text): how each reader fails
beyond the seen lengths, what oracle-length decoding recovers, how calibrated it is, and how
wide the error of an exact % really is where the strips share source samples."""

from __future__ import annotations

import math

import pandas as pd

from attnlab.evaluation.analysis import FAILURE_LEGEND, FAILURE_MODES
from attnlab.evaluation.metrics import METRIC, TOTAL
from attnlab.evaluation.shared_samples import RECORD, SharedSamples
from attnlab.report.aggregate import TrainGroup
from attnlab.report.variants import ordered_variants


def _total(rows: pd.DataFrame, split: str) -> pd.Series | None:
    part = rows[(rows["length"] == TOTAL) & (rows["split"] == split)]
    return None if part.empty else part.iloc[0]


def _pct(x: float) -> str:
    return METRIC["exact_acc"].fmt(x)


def findings(group: TrainGroup) -> list[str]:
    """One line per (evaluation, variant): its failures beyond the seen range and its
    calibration, from the seed-mean totals of the summary; then, when a line names failure
    classes, the legend of those classes (``failure_legend``)."""
    lines, classed = [], False
    for name in group.evals:
        rows = group.agg[group.agg["eval"] == name]
        for variant in ordered_variants(rows["variant"]):
            mine = rows[rows["variant"] == variant]
            unseen = _unseen(mine)
            classed |= unseen.startswith(FAILED)
            parts = [unseen, _oracle(mine), _calibration(mine), _shared(group, name, variant)]
            text = "; ".join(p for p in parts if p)
            if text:
                lines.append(f"{variant} ({name}): {text}.")
    return [*lines, failure_legend()] if classed else lines


FAILED = "beyond the seen lengths"


def failure_legend() -> str:
    """The failure classes in words, in the order they are tried (analysis.failure_mode)."""
    said = "; ".join(f"{METRIC[m].label}: {FAILURE_LEGEND[m]}" for m in FAILURE_MODES)
    return f"Failure classes (each failed strip in the first that applies): {said}."


def _unseen(rows: pd.DataFrame) -> str:
    """How the unseen strips failed, each class's share of all unseen strips, largest first:
    the lab's question "how do they fail beyond the seen lengths?" in the classes' words."""
    row = _total(rows, "unseen")
    if row is None or any(pd.isna(row.get(m)) for m in FAILURE_MODES):
        return ""
    failed = 1.0 - float(row["exact_acc"])
    if failed <= 0:
        return f"{FAILED} it reads every strip"
    shares = sorted(((float(row[m]), m) for m in FAILURE_MODES), key=lambda x: -x[0])
    said = ", ".join(f"{_pct(share)}% {METRIC[m].label}" for share, m in shares)
    return f"{FAILED} {_pct(failed)}% of strips fail: {said}"


def _oracle(rows: pd.DataFrame) -> str:
    row = _total(rows, "unseen")
    if row is None or pd.isna(row.get("exact_oracle")):
        return ""
    gain = float(row["exact_oracle"]) - float(row["exact_acc"])
    verdict = (
        "the stopping decision explains little of it"
        if gain < 0.05
        else "stopping at the right length recovers part of it"
    )
    return (
        f"with the true length given (oracle) it reads {_pct(row['exact_oracle'])}% exact "
        f"against {_pct(row['exact_acc'])}% free: {verdict}"
    )


def _calibration(rows: pd.DataFrame) -> str:
    seen, unseen = _total(rows, "seen"), _total(rows, "unseen")
    values = [
        (split, float(r["ece"]))
        for split, r in (("seen", seen), ("unseen", unseen))
        if r is not None and not math.isnan(float(r.get("ece", math.nan)))
    ]
    if not values:
        return ""
    return "calibration error (ECE) " + ", ".join(f"{v:.3f} {s}" for s, v in values)


def _shared(group: TrainGroup, name: str, variant: str) -> str:
    """Where the evaluation's strips share source samples (eval.json's record, written by
    attnlab eval from the folder's samples.csv): each seed's standard error by sample beside
    the one counting strips, which every interval of the report uses."""
    measured = [
        (run.seed, SharedSamples.from_record((run.eval_meta[name].extra or {}).get(RECORD)))
        for run in group.runs
        if run.variant == variant and name in run.eval_meta
    ]
    measured = [(seed, m) for seed, m in measured if m is not None]
    if not measured:
        return ""
    first = measured[0][1]
    each = ", ".join(
        f"{m.se_by_sample * 100:.2f} points by the samples' jackknife against "
        f"{m.se_by_strip * 100:.2f} counting strips" + ("" if seed is None else f" (seed {seed})")
        for seed, m in measured
    )
    wider = any(m.too_narrow for _, m in measured)
    narrow = ": the intervals count strips and are too narrow" if wider else ""
    return (
        f"its {first.strips} strips share {first.samples} source samples ({first.file}), "
        f"so the exact %'s standard error is {each}{narrow}"
    )
