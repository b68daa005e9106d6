"""Readings -> per-length metrics and attention maps.

``read_strips`` is the one evaluation step every reader shares (batched, no gradients,
strips of similar width batched together); ``evaluate_run`` turns a trained run into
``eval/<name>/metrics_by_length.csv`` and ``.md``, ``eval.json`` and attention maps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import hydra
import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig
from rapidfuzz.distance import Levenshtein

from attnlab import checkpoint, maps, metrics
from attnlab.config import EvalConfig, Reader, seen_lengths, span
from attnlab.data.folder import read_folder
from attnlab.data.strips import StripBatch, StripSynth, fixed_set
from attnlab.errors import reports_user_errors
from attnlab.io import atomic_write, write_json, write_text
from attnlab.models.readers import BaseReader, decode
from attnlab.runtime import resolve_device

log = logging.getLogger(__name__)


@dataclass
class StripReadings:
    """The readings of a StripBatch, in its order."""

    texts: list[str]
    confidence: np.ndarray  # (N,)
    weights: list[np.ndarray] | None  # per strip (steps, columns), steps = reading + EOS

    def exact(self, labels: list[str]) -> np.ndarray:
        return np.array([r == t for r, t in zip(self.texts, labels, strict=True)])


@torch.no_grad()
def read_strips(
    reader: BaseReader,
    strips: StripBatch,
    device: torch.device,
    batch_size: int = 256,
    beam: int = 1,
    keep_weights: bool = True,
) -> StripReadings:
    """Decode every strip; batches hold strips of similar width (sorted by width)."""
    reader.eval()
    order = torch.argsort(strips.widths, stable=True)
    n = len(strips)
    texts: list[str] = [""] * n
    conf = np.zeros(n, dtype=np.float64)
    weights: list[np.ndarray | None] = [None] * n
    has_weights = reader.kind is Reader.attention and keep_weights
    for start in range(0, n, batch_size):
        idx = order[start : start + batch_size]
        sub = strips.select(idx)
        memory = reader.encode(sub.images.to(device), sub.widths.to(device))
        out = decode(reader, memory, beam)
        c = out.confidence.float().cpu().numpy()
        w = out.weights.cpu().numpy() if (has_weights and out.weights is not None) else None
        cols = memory.lengths.cpu().numpy()
        for j, i in enumerate(idx.tolist()):
            texts[i] = out.texts[j]
            conf[i] = c[j]
            if w is not None:
                steps = min(len(out.texts[j]) + 1, w.shape[1])
                weights[i] = w[j, :steps, : cols[j]]
    return StripReadings(texts, conf, weights if has_weights else None)  # type: ignore[arg-type]


def quick_scores(labels: list[str], texts: list[str]) -> tuple[float, float]:
    """Exact-string accuracy and corpus CER (edit distance / reference characters)."""
    exact = float(np.mean([t == r for t, r in zip(labels, texts, strict=True)]))
    dist = sum(Levenshtein.distance(t, r) for t, r in zip(labels, texts, strict=True))
    return exact, dist / max(1, sum(len(t) for t in labels))


def records_for(
    strips: StripBatch, readings: StripReadings, stride: int, known_spans: bool = True
) -> pd.DataFrame:
    """One row per strip: what per_length_table needs."""
    rows = []
    for i, (truth, reading) in enumerate(zip(strips.labels, readings.texts, strict=True)):
        hits = steps = 0
        entropy = float("nan")
        if readings.weights is not None:
            w = readings.weights[i]
            entropy = metrics.attention_entropy(w, len(reading)) if len(reading) else np.nan
            if known_spans and reading == truth and len(truth):
                cols = metrics.spans_to_columns(strips.spans[i, : len(truth)].numpy(), stride)
                hits, steps = metrics.alignment_hits(w, cols)
        rows.append(
            {
                "length": len(truth),
                "truth": truth,
                "reading": reading,
                "confidence": float(readings.confidence[i]),
                "align_hits": hits,
                "align_steps": steps,
                "entropy": entropy,
            }
        )
    return pd.DataFrame(rows)


def default_lengths(seen: list[int]) -> list[int]:
    return list(range(1, 2 * max(seen) + 1))


def default_map_lengths(seen: list[int], lengths: list[int]) -> list[int]:
    """A few seen and unseen lengths: the middle and top of the seen range, then beyond."""
    top = max(seen)
    wanted = [seen[len(seen) // 2], top, top + 2, top + top // 2, 2 * top]
    return sorted({n for n in wanted if n in lengths})


def output_dir(ckpt_path: Path) -> Path:
    """Evaluations go into the run directory of a checkpoint (``<run>/eval``)."""
    if ckpt_path.parent.name == "checkpoints":
        return ckpt_path.parent.parent / "eval"
    return ckpt_path.parent / f"{ckpt_path.stem}_eval"


def evaluate_run(
    run: Path | str,
    cfg: EvalConfig,
    which: str = "best",
    device: str = "auto",
    say=print,
) -> Path:
    """Evaluate a run (or checkpoint): tables, maps and eval.json under ``eval/<name>``."""
    ckpt_path = checkpoint.resolve(run, which)
    ckpt = checkpoint.load(ckpt_path)
    reader, exp = checkpoint.restore_reader(ckpt, ckpt_path)
    dev = resolve_device(device)
    reader.to(dev)
    seen = seen_lengths(exp.data)
    stride = reader.encoder.stride
    decoding = "greedy" if cfg.beam <= 1 else f"beam{cfg.beam}"

    if cfg.folder:
        strips, _ = read_folder(cfg.folder, exp.data.height)
        source = "folder"
        name = cfg.name or f"folder-{Path(cfg.folder).resolve().name}-{decoding}"
        sets = {n: strips.select(idx) for n, idx in _by_length(strips).items()}
    else:
        source = "synthetic"
        name = cfg.name or f"synthetic-{decoding}"
        lengths = default_lengths(seen) if cfg.lengths is None else _range(cfg.lengths)
        synth = StripSynth(exp.data)
        sets = {n: fixed_set(synth, "test", n, cfg.n) for n in lengths}
    out = output_dir(ckpt_path) / name

    frames, readings_by_length = [], {}
    for n, strips in sets.items():
        r = read_strips(reader, strips, dev, cfg.batch_size, cfg.beam)
        readings_by_length[n] = (strips, r)
        frames.append(records_for(strips, r, stride, known_spans=source == "synthetic"))
    records = pd.concat(frames, ignore_index=True)
    table = metrics.per_length_table(records, seen, n_boot=cfg.n_boot, seed=0)

    title = f"{reader.kind.value} reader, {source} strips, {decoding} ({ckpt_path})"
    write_text(out / "metrics_by_length.md", metrics.table_markdown(table, title) + "\n")
    _write_csv(out / "metrics_by_length.csv", table)
    say(metrics.table_markdown(table, title))

    if reader.kind is Reader.attention:
        map_lengths = (
            default_map_lengths(seen, list(sets)) if cfg.map_lengths is None else cfg.map_lengths
        )
        for line in draw_maps(out / "maps", readings_by_length, map_lengths, cfg.maps_k, stride):
            say(line)
        maps.draw_attention_summary(out / "attention_summary.png", table, seen)
    else:
        say("fixed-context reader: it has no attention weights, so no attention maps are drawn")

    write_json(
        out / "eval.json",
        {
            "name": name,
            "source": source,
            "folder": str(cfg.folder) if cfg.folder else None,
            "decoding": decoding,
            "reader": reader.kind.value,
            "seen_lengths": seen,
            "lengths": sorted(sets),
            "n_per_length": None if cfg.folder else cfg.n,
            "checkpoint": str(ckpt_path),
            "step": int(ckpt.get("step", 0)),
        },
    )
    say(f"evaluation written to {out}")
    return out


def draw_maps(out: Path, readings_by_length, lengths: list[int], k: int, stride: int) -> list[str]:
    """k correct readings and k failures per length; returns lines saying what was drawn."""
    lines = []
    for n in lengths:
        if n not in readings_by_length:
            lines.append(f"maps: length {n} was not evaluated, skipped")
            continue
        strips, r = readings_by_length[n]
        exact = r.exact(strips.labels)
        for kind, pick in (("correct", np.flatnonzero(exact)), ("failure", np.flatnonzero(~exact))):
            chosen = pick[:k]
            for j, i in enumerate(chosen.tolist()):
                truth, reading = strips.labels[i], r.texts[i]
                maps.draw_attention_map(
                    out / f"len{n:02d}_{kind}_{j}.png",
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
                    f"maps: length {n}: only {len(chosen)} {kind} reading(s) of {len(exact)} "
                    f"(fewer than k={k})"
                )
    return lines


def _by_length(strips: StripBatch) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(strips.labels):
        groups.setdefault(len(label), []).append(i)
    return dict(sorted(groups.items()))


def _range(pair) -> list[int]:
    lo, hi = span(pair, "eval.lengths")
    return list(range(lo, hi + 1))


def _write_csv(path: Path, table: pd.DataFrame) -> None:
    atomic_write(path, lambda p: table.to_csv(p, index=False))


@hydra.main(version_base="1.3", config_path="pkg://attnlab.conf", config_name="evaluate")
@reports_user_errors
def main(cfg: DictConfig) -> None:
    """``attnlab eval RUN``: evaluate a run directory or checkpoint."""
    evaluate_run(cfg.run, cfg.eval, cfg.checkpoint, cfg.device)
