"""The cost view of a reader by strip length (``attnlab cost``; the chapter's section 8.8):
one row per (reader, length) with parameters by part, forward FLOPs by part (counted, and
the closed form beside them), time per strip and the peak memory of a training step; the
growth table (cost(2L) / cost(L) against the chapter's "doubles / quadruples"); and the
footprint table (one batch against accumulated micro-batches, float32 against bf16).

Here: a row's counts (``flop_row``), the growth table and the strips measured. Counting:
``cost_count``; timing and memory: ``cost_time``; the parameter-matched control:
``cost_match``; the command that measures and writes it all: attnlab.tasks.cost_run.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from attnlab.evaluation import cost_count
from attnlab.models import costs

KINDS = tuple(costs.GROWTH)  # strip, column, step, pair
TIMES = ("read_b1_ms", "read_b64_ms", "train_ms")  # per strip


def build(cfg: DictConfig, device: torch.device):
    """The reader ``cfg`` describes (seeded; its weights do not change what it costs)."""
    from attnlab.models import registry

    torch.manual_seed(cfg.seed)
    return registry.build(cfg.model, cfg.data.height, cfg.data.charset).to(device)


def flop_row(model: Any, counted: list[dict[str, Any]]) -> dict[str, Any]:
    """FLOPs per strip by part and by kind of term (the mean over the counted strips), the
    closed form's total and its largest relative error over the terms."""
    n = len(counted)
    row: dict[str, Any] = {
        "columns": sum(c["columns"] for c in counted) / n,
        "steps": sum(c["steps"] for c in counted) / n,
    }
    parts: dict[str, float] = {}
    for c in counted:
        for part, v in cost_count.by_part(model, c["own"]).items():
            parts[part] = parts.get(part, 0) + v / n
    row.update({f"flops_{p}": v for p, v in parts.items()})
    row["flops"] = sum(c["total"] for c in counted) / n
    row["flops_decoder_per_step"] = parts.get("decoder", 0) / row["steps"]
    if any(c["terms"] is None for c in counted):
        row["formula_flops"] = row["formula_max_error"] = None
        row.update({f"flops_per_{k}": None for k in KINDS})
        return row
    kinds, formula, worst = dict.fromkeys(KINDS, 0.0), 0.0, 0.0
    for c in counted:
        got = cost_count.term_counted(c["terms"], c["own"])
        for term, g in zip(c["terms"], got, strict=True):
            kinds[term.growth] += g / n
            formula += term.flops / n
            worst = max(worst, abs(g - term.flops) / max(term.flops, 1))
    row.update({f"flops_per_{k}": v for k, v in kinds.items()})
    row["formula_flops"], row["formula_max_error"] = formula, worst
    return row


def train_batches(cfg: DictConfig, length: int, batch: int, accumulate: int) -> list[Any]:
    """``accumulate`` micro-batches that together hold the same ``batch`` strips of
    ``length`` digits (drawn once: the same strips however they are split)."""
    strips = cost_count.strips(cfg, length, batch)
    size = batch // accumulate
    return [strip_slice(strips, i * size, size) for i in range(accumulate)]


def strip_slice(strips: Any, start: int, n: int) -> Any:
    from attnlab.data.strips import StripBatch

    sl = slice(start, start + n)
    w = strips.widths[sl]
    return StripBatch(strips.images[sl, :, : int(w.max())], w, strips.labels[sl], strips.spans[sl])


def growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """cost(2L) / cost(L) for every reader and every L whose double was measured: FLOPs by
    part and by kind of term (with the chapter's prediction: 2 per column or per step, 4 per
    pair), and the measured times (beside the FLOP ratio they would follow)."""
    out = []
    by = {(r["reader"], r["length"]): r for r in rows}
    for (reader, length), r in by.items():
        d = by.get((reader, 2 * length))
        if d is None:
            continue
        quantities = [k for k in r if k.startswith("flops") or k in TIMES or k.startswith("read_")]
        for q in quantities:
            a, b = r.get(q), d.get(q)
            if a is None or b is None or not a:
                continue
            kind = q.removeprefix("flops_per_")
            predicted = costs.GROWTH.get(kind) if q.startswith("flops_per_") else None
            out.append(
                {
                    "reader": reader,
                    "length": length,
                    "to_length": 2 * length,
                    "quantity": q,
                    "ratio": b / a,
                    "chapter": predicted,
                    "flops_ratio": d["flops"] / r["flops"],
                }
            )
    return out
