"""Sentences generated from the aggregated numbers (never fixed text): how each reader fails
beyond the seen lengths, what oracle-length decoding recovers, how calibrated it is."""

from __future__ import annotations

import math

import pandas as pd

from attnlab.evaluation.analysis import FAILURE_MODES
from attnlab.evaluation.metrics import METRIC, TOTAL
from attnlab.report.aggregate import TrainGroup
from attnlab.report.variants import ordered_variants


def _total(rows: pd.DataFrame, split: str) -> pd.Series | None:
    part = rows[(rows["length"] == TOTAL) & (rows["split"] == split)]
    return None if part.empty else part.iloc[0]


def _pct(x: float) -> str:
    return METRIC["exact_acc"].fmt(x)


def findings(group: TrainGroup) -> list[str]:
    """One line per (evaluation, variant): its failures beyond the seen range and its
    calibration, from the seed-mean totals of the summary."""
    lines = []
    for name in group.evals:
        rows = group.agg[group.agg["eval"] == name]
        for variant in ordered_variants(rows["variant"]):
            mine = rows[rows["variant"] == variant]
            parts = [_unseen(mine), _oracle(mine), _calibration(mine)]
            text = "; ".join(p for p in parts if p)
            if text:
                lines.append(f"{variant} ({name}): {text}.")
    return lines


def _unseen(rows: pd.DataFrame) -> str:
    row = _total(rows, "unseen")
    if row is None or any(pd.isna(row.get(m)) for m in FAILURE_MODES):
        return ""
    failed = 1.0 - float(row["exact_acc"])
    if failed <= 0:
        return "beyond the seen lengths it reads every strip"
    shares = {m: float(row[m]) for m in FAILURE_MODES}
    top = max(shares, key=shares.get)
    rest = ", ".join(f"{METRIC[m].label} {_pct(shares[m])}%" for m in FAILURE_MODES if m != top)
    return (
        f"beyond the seen lengths {_pct(failed)}% of strips fail, most by "
        f"{METRIC[top].label} ({_pct(shares[top])}% of strips; {rest})"
    )


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
