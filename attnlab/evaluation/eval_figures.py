"""An evaluation's figures: reliability and stops, and, where the reader has attention
weights, the maps of k correct readings and k failures per map length, the per-head maps,
the summary across lengths and the pace of each step over the strip. The pictures are
drawn by ``attnlab.evaluation.figures``; this module picks what they show."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch
from rapidfuzz.distance import Levenshtein

from attnlab.config import EvalConfig
from attnlab.data.strips import StripBatch
from attnlab.evaluation.figures import maps
from attnlab.evaluation.figures.diagnostics import (
    draw_pace,
    draw_reliability,
    draw_stops,
    pace_tracks,
)
from attnlab.models.base import Reader
from attnlab.runs.evaldir import EvalDir


def default_map_lengths(seen: list[int], lengths: list[int]) -> list[int]:
    """A few seen and unseen lengths: the middle and top of the seen range, then beyond."""
    top = max(seen)
    wanted = [seen[len(seen) // 2], top, top + 2, top + top // 2, 2 * top]
    return sorted({n for n in wanted if n in lengths})


def draw_figures(
    out: EvalDir,
    reader: Reader,
    device: torch.device,
    cfg: EvalConfig,
    seen: list[int],
    records: pd.DataFrame,
    table: pd.DataFrame,
    readings_by_length: dict[int, Any],
    say,
) -> None:
    """Reliability and stops; where the reader has attention weights, the maps and paces
    (``eval.figures=false``: the maps ``eval.maps_k`` asks for only).
    ``readings_by_length``: length -> (strips, their readings), every length evaluated."""
    lengths = list(readings_by_length)
    seen_set = set(seen)
    if cfg.figures:
        draw_reliability(out.reliability, records, seen_set, cfg.ece_bins)
        draw_stops(out.stops, records, seen_set)
    if not any(r.weights is not None for _, r in readings_by_length.values()):
        say(f"{reader.name} reader: it has no attention weights, so no attention maps are drawn")
        return
    map_lengths = default_map_lengths(seen, lengths) if cfg.map_lengths is None else cfg.map_lengths
    stride = reader.encoder.stride
    for line in draw_maps(out, readings_by_length, map_lengths, cfg.maps_k, stride):
        say(line)
    drawn = draw_head_maps(out, reader, device, readings_by_length, map_lengths, cfg.head_maps)
    if drawn:
        say(f"per-head maps: {drawn} strips (maps/heads_*.png)")
    if not cfg.figures:
        return
    maps.draw_attention_summary(out.attention_summary, table, seen)
    paces = {
        n: pace_tracks(r.texts, strips.labels, r.weights)
        for n, (strips, r) in readings_by_length.items()
        if n in _pace_lengths(seen, lengths)
    }
    draw_pace(out.pace, paces, seen_set, reader.name)


def _pace_lengths(seen: list[int], lengths: list[int]) -> list[int]:
    """The pace figure's lengths: the longest seen one and the longest unseen one."""
    unseen = [n for n in lengths if n not in seen]
    top_seen = [n for n in lengths if n in seen]
    return ([max(top_seen)] if top_seen else []) + ([max(unseen)] if unseen else [])


def draw_maps(
    out: EvalDir, readings_by_length, lengths: list[int], k: int, stride: int
) -> list[str]:
    """k correct readings and k failures per length; returns lines saying what was drawn."""
    lines = []
    for n in lengths:
        if n not in readings_by_length:
            lines.append(f"maps: length {n} was not evaluated, skipped")
            continue
        strips, r = readings_by_length[n]
        for kind, chosen in map_picks(strips, r, k):
            for j, i in enumerate(chosen):
                truth, reading = strips.labels[i], r.texts[i]
                maps.draw_attention_map(
                    out.map_path(n, kind, j),
                    strips.images[i, :, : int(strips.widths[i])].numpy(),
                    r.weights[i],
                    stride,
                    truth,
                    reading,
                    float(r.confidence[i]),
                    strips.spans[i, : len(truth)].numpy(),
                    Levenshtein.distance(truth, reading) / max(1, len(truth)),
                )
            if len(chosen) < k:
                lines.append(
                    f"maps: length {n}: only {len(chosen)} {kind} reading(s) of {len(strips)} "
                    f"(fewer than k={k})"
                )
    return lines


def map_picks(strips: StripBatch, r, k: int) -> list[tuple[str, list[int]]]:
    """The strips a length's maps show: the first k correct readings and the first k
    failures, as ("correct" | "failure", strip indices)."""
    exact = r.exact(strips.labels)
    return [
        ("correct", np.flatnonzero(exact)[:k].tolist()),
        ("failure", np.flatnonzero(~exact)[:k].tolist()),
    ]


def draw_head_maps(out: EvalDir, reader, dev, readings_by_length, lengths, k: int) -> int:
    """Per-head maps of the first k correct readings and k failures of each map length, for
    a reader with several attention heads (``Reader.head_weights``); returns how many."""
    drawn = 0
    for n in lengths:
        if n not in readings_by_length or k == 0:
            continue
        strips, r = readings_by_length[n]
        for kind, chosen in map_picks(strips, r, k):
            if not chosen:
                continue
            sub = strips.select(chosen)
            texts = [r.texts[i] for i in chosen]
            with torch.no_grad():
                heads = reader.head_weights(sub.images.to(dev), sub.widths.to(dev), texts)
            if heads is None:
                return drawn
            for j, i in enumerate(chosen):
                cols = int(r.weights[i].shape[-1])
                maps.draw_head_maps(
                    out.head_map_path(n, kind, j),
                    strips.images[i, :, : int(strips.widths[i])].numpy(),
                    {name: w[j, :, :cols].float().cpu().numpy() for name, w in heads.items()},
                    reader.encoder.stride,
                    strips.labels[i],
                    r.texts[i],
                    strips.spans[i, : len(strips.labels[i])].numpy(),
                )
                drawn += 1
    return drawn
