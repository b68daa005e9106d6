"""``attnlab probe``: does the attended glyph cause the reading?

For the correctly read strips of each probed length (the first ``probe.n`` of a fixed pool),
three interventions (attnlab.evaluation.occlusion, probe_strips and saliency compute,
attnlab.evaluation.probe_tables batches and reads, this module runs and writes):

- occlusion: every glyph of a strip painted over in turn, all variants of a strip (and of
  its neighbours in the batch) in one forward pass with teacher forcing on the reading and
  one free decoding; per step, the glyph with the most attention, the true glyph, a random
  other glyph and none (readers without weights: true, random and none);
- glyph swap: the same strip rendered with one digit replaced, read freely;
- saliency: attention vs gradient x input per column (readers with weights).

Writes ``probe/<name>/`` in the run: occlusion.csv, swap.csv, saliency.csv, summary.csv,
example.png, and probe.json last. Like an evaluation it is built under a hidden name and
renamed into place, so a probe that dies leaves no partial ``probe/<name>``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from attnlab.config import ProbeConfig, RunTaskConfig, seen_lengths
from attnlab.data.strips import StripBatch, StripSynth
from attnlab.evaluation.figures.probe_example import draw_example
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.probe_strips import probe_set
from attnlab.evaluation.probe_summary import summary_table
from attnlab.evaluation.probe_tables import occlusion_table, saliency_table, swap_table
from attnlab.io import csv_text, write_text
from attnlab.io.folders import atomic_dir
from attnlab.models import registry
from attnlab.runs import locate
from attnlab.runs.probedir import PROBE, ProbeDir, ProbeMeta
from attnlab.runs.restore import restore

log = logging.getLogger(__name__)
registry.discover()


def probe_lengths(seen: list[int]) -> list[int]:
    """The middle and the top of the seen lengths, two beyond the top and twice the top."""
    top = max(seen)
    return sorted({seen[len(seen) // 2], top, top + 2, 2 * top})


def probe_run(
    run: Path | str, cfg: ProbeConfig, which: str = "best", device: str = "auto", say=print
) -> Path:
    """Probe a run (or checkpoint) under ``probe/<name>``; the run is locked meanwhile."""
    ProbeConfig.check(cfg)
    RunTaskConfig.check_run(which, device)
    with locate.held(run, which, "probe") as ckpt_path:
        return _probe(ckpt_path, cfg, device, say)


def _probe(ckpt_path: Path, cfg: ProbeConfig, device: str, say) -> Path:
    got = restore(ckpt_path, device)
    ckpt, reader, exp, dev = got.ckpt, got.reader, got.config, got.device
    seen = seen_lengths(exp.data)
    lengths = probe_lengths(seen) if cfg.lengths is None else sorted(set(cfg.lengths))
    name = cfg.name or "synthetic"
    meta = ProbeMeta(
        name=name,
        reader=reader.name,
        seen_lengths=seen,
        lengths=lengths,
        n_per_length=cfg.n,
        pool=cfg.pool,
        checkpoint=str(ckpt_path),
        step=int(ckpt.step),
        has_weights=False,
        seconds=0.0,
        extra={"swaps": cfg.swaps, "n_boot": cfg.n_boot, "seed": cfg.seed},
    )
    synth = StripSynth(exp.data)
    final = atomic_dir(
        locate.output_root(ckpt_path, PROBE) / name,
        lambda work: _write_probe(ProbeDir(work), reader, dev, synth, cfg, meta, say),
    )
    say(f"probe written to {final}")
    return final


def _write_probe(out: ProbeDir, reader, dev, synth: StripSynth, cfg: ProbeConfig, meta, say):
    started = time.perf_counter()
    reader.eval()
    occ, swaps, sal, examples = [], [], [], {}
    for n in meta.lengths:
        ps = probe_set(synth, n, cfg.pool)
        chosen, weights, read = _find_correct(reader, ps.strips, cfg, dev)
        split = "seen" if n in meta.seen_lengths else "unseen"
        say(f"length {n} ({split}): {len(chosen)} of {read} strips read correctly")
        if len(chosen) == 0:
            continue
        strips = ps.strips.select(chosen)
        meta.has_weights = meta.has_weights or weights is not None
        rng = np.random.default_rng([cfg.seed, n])
        keys = {"length": n, "split": split}
        o, examples[n] = occlusion_table(reader, strips, weights, dev, cfg, rng)
        examples[n]["strip"] = int(chosen[examples[n]["strip"]])  # in the pool, as in the CSVs
        occ.append(o.assign(**keys, strip=chosen[o["strip"]]))
        if cfg.swaps:
            s = swap_table(reader, synth, ps, chosen, dev, cfg, rng)
            swaps.append(s.assign(**keys))
        if weights is not None and cfg.saliency:
            s = saliency_table(reader, strips, weights, dev, cfg)
            sal.append(s.assign(**keys, strip=chosen[s["strip"]]))
    frames = [_frame(f, lead) for f, lead in ((occ, _OCC), (swaps, _SWAP), (sal, _SAL))]
    table = summary_table(*frames, meta.lengths, meta.seen_lengths, cfg.n_boot, cfg.seed)
    paths = (out.occlusion, out.swaps, out.saliency, out.summary)
    for frame, path in zip((*frames, table), paths, strict=True):
        write_text(path, csv_text(frame))
    meta.example = draw_example(out.example, examples, cfg, meta, reader.encoder.stride)
    meta.seconds = round(time.perf_counter() - started, 2)
    out.write_meta(meta)
    say(_headline(table, reader.name))
    say(f"probe took {meta.seconds:.1f} s")


def _find_correct(reader, pool: StripBatch, cfg: ProbeConfig, dev):
    """The first ``cfg.n`` strips of the pool read correctly, their weights (None without),
    and how many strips were read to find them (the pool is read a slice at a time)."""
    chosen: list[int] = []
    weights: list[np.ndarray] | None = []
    step = max(2 * cfg.n, 32)
    start = 0
    while start < len(pool) and len(chosen) < cfg.n:
        idx = list(range(start, min(start + step, len(pool))))
        r = read_strips(reader, pool.select(idx), dev, cfg.batch_size)
        for j, ok in enumerate(r.exact([pool.labels[i] for i in idx])):
            if ok and len(chosen) < cfg.n:
                chosen.append(idx[j])
                weights = None if r.weights is None or weights is None else weights + [r.weights[j]]
        start += len(idx)
    return np.array(chosen, dtype=np.int64), weights, start


_OCC = ["length", "split", "strip", "step", "digit", "condition", "glyph"]
_SWAP = ["length", "split", "strip", "position", "old", "new"]
_SAL = ["length", "split", "strip", "step"]


def _frame(parts: list[pd.DataFrame], lead: list[str]) -> pd.DataFrame:
    """The rows of every length, the key columns first (an empty table keeps them)."""
    if not parts:
        return pd.DataFrame(columns=lead)
    frame = pd.concat(parts, ignore_index=True)
    return frame[lead + [c for c in frame.columns if c not in lead]]


def _headline(table: pd.DataFrame, reader: str) -> str:
    lines = [f"{reader} reader: drop of the read digit's probability (mean [95% CI])"]
    for r in table.itertuples(index=False):
        parts = [
            f"{key} {getattr(r, key):.2f} [{getattr(r, key + '_lo'):.2f}, "
            f"{getattr(r, key + '_hi'):.2f}]"
            for key in ("drop_attended", "drop_true", "drop_random")
            if not pd.isna(getattr(r, key))
        ]
        lines.append(f"  length {r.length} ({r.split}, {r.n_strips} strips): " + "; ".join(parts))
    return "\n".join(lines)
