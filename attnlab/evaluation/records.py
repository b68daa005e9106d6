"""One row per strip read: what the per-length table, ``readings.csv`` and the failure
listing are built from. Pure pandas/numpy over readings; nothing here runs a reader.
"""

from __future__ import annotations

import pandas as pd

from attnlab.data.strips import StripBatch
from attnlab.evaluation import metrics
from attnlab.evaluation.analysis import failure_mode
from attnlab.evaluation.inference import Readings

# readings.csv: the per-strip results of an evaluation, in the order the strips were read.
READINGS_COLUMNS = [
    "source",
    "length",
    "truth",
    "reading",
    "confidence",
    "correct",
    "sub",
    "ins",
    "del",
    "mode",
    "oracle_reading",
]


def records_for(
    strips: StripBatch,
    readings: Readings,
    stride: int,
    sources: list[str],
    known_spans: bool = True,
    oracle: Readings | None = None,
    attention: bool = True,
) -> pd.DataFrame:
    """One row per strip: truth, reading, confidence, edit operations, failure mode, the
    oracle-length reading when there is one, and the attention statistics (alignment hits
    on correct readings, entropy) when the reader has weights. ``attention`` False: its
    weights are not an attention (``Reader.ATTENTION``): no attention entropy (NaN)."""
    rows = []
    for i, (truth, reading) in enumerate(zip(strips.labels, readings.texts, strict=True)):
        hits = steps = 0
        entropy = float("nan")
        if readings.weights is not None:
            w = readings.weights[i]
            if attention and len(reading):
                entropy = metrics.attention_entropy(w, len(reading))
            if known_spans and reading == truth and len(truth):
                cols = metrics.spans_to_columns(strips.spans[i, : len(truth)].numpy(), stride)
                hits, steps = metrics.alignment_hits(w, cols)
        sub, ins, dele = metrics.edit_ops(truth, reading)
        rows.append(
            {
                "source": sources[i],
                "length": len(truth),
                "truth": truth,
                "reading": reading,
                "confidence": float(readings.confidence[i]),
                "correct": reading == truth,
                "sub": sub,
                "ins": ins,
                "del": dele,
                "mode": failure_mode(truth, reading),
                "oracle_reading": None if oracle is None else oracle.texts[i],
                "align_hits": hits,
                "align_steps": steps,
                "entropy": entropy,
            }
        )
    return pd.DataFrame(rows)


def readings_table(records: pd.DataFrame) -> pd.DataFrame:
    """The readings.csv view of the records (strings kept as strings: "007" stays "007")."""
    return records[READINGS_COLUMNS]


def confident_failures(records: pd.DataFrame, k: int = 10) -> list[str]:
    """The k most confident wrong readings, as lines for the terminal."""
    wrong = records[~records["correct"]].sort_values("confidence", ascending=False).head(k)
    if wrong.empty:
        return ["no failures"]
    width = max(len(str(s)) for s in wrong["source"])
    lines = [f"{'source':<{width}}  {'truth':<16} {'reading':<16} conf   mode"]
    for r in wrong.itertuples(index=False):
        lines.append(
            f"{r.source:<{width}}  {r.truth:<16} {r.reading or '(empty)':<16} "
            f"{r.confidence:.3f}  {r.mode}"
        )
    return lines
