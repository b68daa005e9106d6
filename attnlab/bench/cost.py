"""The cost view of a reader by strip length (``attnlab cost``; the chapter's section 8.8):
one row per (reader, length) with parameters by part, forward FLOPs by part (counted, and
the closed form beside them), time per strip and the peak memory of a training step; the
growth table (cost(2L) / cost(L) against the chapter's "doubles / quadruples"); and the
footprint table (one batch against accumulated micro-batches, float32 against bf16).

Counting: ``attnlab.bench.cost_count``; timing and memory: ``attnlab.bench.cost_time``.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from attnlab.bench import cost_count, cost_time
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
    return [_rows(strips, i * size, size) for i in range(accumulate)]


def _rows(strips: Any, start: int, n: int) -> Any:
    from attnlab.data.strips import StripBatch

    sl = slice(start, start + n)
    w = strips.widths[sl]
    return StripBatch(strips.images[sl, :, : int(w.max())], w, strips.labels[sl], strips.spans[sl])


def measure(cfg: DictConfig, c: Any, device: torch.device) -> list[dict[str, Any]]:
    """One row per length of ``c.lengths`` for the reader of ``cfg`` (``c``: the cost
    section)."""
    from attnlab.training.optim import optimiser

    model = build(cfg, device)
    params = cost_count.params_by_part(model)
    opt, _ = optimiser(model, cfg.optim, cfg.train.steps)
    t = cfg.train
    bf16 = bool(t.bf16) if t.bf16 is not None else device.type == "cuda"
    rows = []
    for length in c.lengths:
        row: dict[str, Any] = {"reader": model.name, "length": int(length)}
        row.update({f"params_{p}": v for p, v in params.items()})
        row["params"] = sum(params.values())
        strips = cost_count.strips(cfg, int(length), max(c.strips, max(c.read_batches)))
        row.update(flop_row(model, cost_count.count_strips(model, _rows(strips, 0, c.strips))))
        row["flop_source"] = cost_count.FLOP_SOURCE.get(device.type, "FlopCounterMode")
        for size in c.read_batches:
            s = cost_time.read_seconds(model, strips, int(size), device, c.repeats)
            row[f"read_b{size}_ms"] = 1000 * s
        if c.train:
            micro = train_batches(cfg, int(length), t.batch_size * t.accumulate, t.accumulate)
            step = cost_time.measure_step(model, opt, micro, device, bf16, c.repeats)
            row["train_ms"] = 1000 * step.pop("train_s_per_strip")
            row.update(step)
        row.update({"device": str(device), "threads": torch.get_num_threads()})
        rows.append(row)
    return rows


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


FOOTPRINT = (  # (label, accumulate, bf16): the same effective batch each
    ("one batch, float32", 1, False),
    ("micro-batches (accumulate), float32", 4, False),
    ("one batch, bf16 autocast", 1, True),
)


def footprint(cfg: DictConfig, c: Any, device: torch.device, length: int) -> list[dict[str, Any]]:
    """Step time and peak memory of one training step of ``c.footprint_batch`` strips of
    ``length`` digits: in one batch, as 4 accumulated micro-batches, and under bf16."""
    from attnlab.training.optim import optimiser

    rows = []
    for label, acc, bf16 in FOOTPRINT:
        model = build(cfg, device)
        opt, _ = optimiser(model, cfg.optim, cfg.train.steps)
        micro = train_batches(cfg, length, c.footprint_batch, acc)
        step = cost_time.measure_step(model, opt, micro, device, bf16, c.repeats)
        rows.append(
            {
                "reader": model.name,
                "length": length,
                "setting": label,
                "batch": c.footprint_batch,
                "micro_batch": c.footprint_batch // acc,
                "accumulate": acc,
                "bf16": bf16,
                "step_ms": 1000 * step["train_s_per_strip"] * step["train_strips"],
                "mem_peak_mib": step.get("mem_peak_mib"),
                "mem_reserved_mib": step.get("mem_reserved_mib"),
                "mem_kind": step.get("mem_kind"),
                "device": str(device),
            }
        )
    return rows
