"""``attnlab probe``: does the attended glyph cause the reading?

For the correctly read strips of each probed length (the first ``probe.n`` of a fixed pool),
three interventions (``attnlab.evaluation.interventions`` computes, this module batches and writes):

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
import torch

from attnlab.config import ProbeConfig, RunTaskConfig, seen_lengths
from attnlab.data.strips import StripBatch, StripSynth
from attnlab.errors import UserError
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.interventions import (
    attended_glyph,
    column_saliency,
    occlusion_rows,
    occlusion_variants,
    paper_level,
    probe_set,
    random_glyph,
    rerender,
    spearman,
    summary_table,
)
from attnlab.io import atomic_dir, csv_text, write_figure, write_text
from attnlab.models import registry
from attnlab.runs import checkpoint
from attnlab.runs.probedir import PROBE, ProbeDir, ProbeMeta

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
    with checkpoint.held(run, which, "probe") as ckpt_path:
        return _probe(ckpt_path, cfg, device, say)


def _probe(ckpt_path: Path, cfg: ProbeConfig, device: str, say) -> Path:
    got = checkpoint.restore(ckpt_path, device)
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
        checkpoint.output_root(ckpt_path, PROBE) / name,
        lambda work: _write_probe(ProbeDir(work), reader, dev, synth, cfg, meta, say),
    )
    say(f"probe written to {final}")
    return final


def _chunks(lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive strip indices whose summed sizes stay within ``budget`` (at least one)."""
    out: list[list[int]] = []
    for i, size in enumerate(lengths):
        if out and sum(lengths[j] for j in out[-1]) + size <= budget:
            out[-1].append(i)
        else:
            out.append([i])
    return out


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
    meta.example = _draw_example(out.example, examples, cfg, meta, reader.encoder.stride)
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


def _digit_probs(reader, images, widths, texts) -> np.ndarray:
    try:
        with torch.no_grad():
            return reader.digit_probs(images, widths, texts).float().cpu().numpy()
    except NotImplementedError as err:
        raise UserError(
            f"{reader.name} reader: it gives no teacher-forced digit probabilities "
            f"(Reader.digit_probs), which the occlusion probe needs"
        ) from err


def occlusion_table(reader, strips: StripBatch, weights, dev, cfg: ProbeConfig, rng):
    """occlusion.csv rows of these strips, and the first strip's drops for the figure."""
    stride = reader.encoder.stride
    paper = paper_level(strips.images, strips.widths, strips.spans)
    n = len(strips.labels[0])
    rows, example = [], None
    for chunk in _chunks([n + 1] * len(strips), cfg.batch_size):
        sub = strips.select(chunk)
        p_read = _digit_probs(reader, sub.images.to(dev), sub.widths.to(dev), sub.labels)
        variants = torch.cat(
            [
                occlusion_variants(sub.images[j], sub.spans[j], float(paper[i]))
                for j, i in enumerate(chunk)
            ]
        )
        widths = sub.widths.repeat_interleave(n + 1).to(dev)
        texts = [t for t in sub.labels for _ in range(n + 1)]
        p_var = _digit_probs(reader, variants.to(dev), widths, texts)
        readings = reader.read(variants.to(dev), widths).texts
        for j, i in enumerate(chunk):
            label, spans = sub.labels[j], sub.spans[j].numpy()
            none = [(-1, -1, False)] * n
            peaks = (
                none
                if weights is None
                else [attended_glyph(weights[i][t], spans, stride) for t in range(n)]
            )
            glyphs = {"true": list(range(n))}
            if weights is not None:
                glyphs = {"attended": [g for g, _, _ in peaks], **glyphs}
            glyphs["random"] = [random_glyph(n, t, peaks[t][0], rng) for t in range(n)]
            glyphs["none"] = []
            part = slice(j * (n + 1), (j + 1) * (n + 1))
            found = occlusion_rows(label, p_read[j], p_var[part], readings[part], glyphs)
            for r in found:
                g, c, on = peaks[r["step"]]
                r.update(strip=i, attended=g, peak_column=c, peak_on_glyph=on)
            rows += found
            if example is None:
                drops = p_read[j][None, :n] - p_var[part][1:, :n]  # (glyph, step)
                example = {
                    "strip": i,
                    "image": sub.images[j, :, : int(sub.widths[j])].numpy(),
                    "spans": spans,
                    "label": label,
                    "weights": None if weights is None else weights[i],
                    "drops": drops.T,  # (step, glyph)
                    "attended": [g for g, _, _ in peaks] if weights is not None else None,
                }
    return pd.DataFrame(rows), example


def swap_table(reader, synth, ps, chosen: np.ndarray, dev, cfg: ProbeConfig, rng) -> pd.DataFrame:
    """swap.csv rows: each chosen strip rendered with one digit replaced, ``swaps`` times
    (each time at another position), read freely."""
    n = ps.digits.shape[1]
    positions = np.stack([rng.permutation(n) for _ in chosen])  # (C, n)
    rows = []
    for k in range(min(cfg.swaps, n)):
        digits = ps.digits.clone()
        pos = positions[:, k]
        rows_t, pos_t = torch.from_numpy(chosen), torch.from_numpy(pos)
        old = digits[rows_t, pos_t].numpy()
        k_chars = len(synth.charset)  # another character of the charset, never the same
        new = (old + rng.integers(1, k_chars, size=len(chosen))) % k_chars
        digits[rows_t, pos_t] = torch.from_numpy(new)
        swapped = rerender(synth, ps, digits).select(chosen)
        readings = read_strips(reader, swapped, dev, cfg.batch_size, keep_weights=False).texts
        for j, i in enumerate(chosen):
            label, reading, p = ps.strips.labels[i], readings[j], int(pos[j])
            changed = {t for t, (a, b) in enumerate(zip(label, reading, strict=False)) if a != b}
            rows.append(
                {
                    "strip": int(i),
                    "position": p,
                    "old": int(old[j]),
                    "new": int(new[j]),
                    "label": label,
                    "swapped_label": swapped.labels[j],
                    "reading": reading,
                    "only_step": len(reading) == len(label) and changed == {p},
                    "reads_new": reading == swapped.labels[j],
                }
            )
    return pd.DataFrame(rows)


def saliency_table(reader, strips: StripBatch, weights, dev, cfg: ProbeConfig) -> pd.DataFrame:
    """saliency.csv rows: per digit step, Spearman's correlation of the attention weights and
    the gradient x input saliency over the strip's columns."""
    stride = reader.encoder.stride
    paper = paper_level(strips.images, strips.widths, strips.spans)
    n = len(strips.labels[0])
    rows = []
    for chunk in _chunks([n] * len(strips), cfg.batch_size):
        sub = strips.select(chunk)
        sal = column_saliency(
            reader, sub.images.to(dev), sub.widths.to(dev), sub.labels, paper[chunk], stride
        )
        for j, i in enumerate(chunk):
            for t in range(n):
                w, s = weights[i][t, : sal[j].shape[1]], sal[j][t]
                rows.append(
                    {
                        "strip": i,
                        "step": t,
                        "spearman": spearman(w, s),
                        "peak_attention": int(np.argmax(w)),
                        "peak_saliency": int(np.argmax(s)),
                    }
                )
    return pd.DataFrame(rows)


def _draw_example(path: Path, examples: dict, cfg: ProbeConfig, meta, stride: int) -> dict:
    """example.png: a strip, its attention map and the drop of each step's probability when
    each glyph is painted over (all on the strip's pixel axis); returns which strip it is."""
    from matplotlib.figure import Figure

    found = [n for n in meta.lengths if examples.get(n) is not None]
    if not found:
        return {}
    seen = [n for n in found if n in meta.seen_lengths]
    n = cfg.example_length if cfg.example_length in found else max(seen or found)
    ex = examples[n]
    image, spans, label = ex["image"], ex["spans"], ex["label"]
    w = image.shape[1]
    panels = 3 if ex["weights"] is not None else 2
    fig = Figure(figsize=(max(6.0, w / 28), 1.3 + 1.2 * n / 4 * (panels - 1)), layout="constrained")
    axes = fig.subplots(panels, 1, sharex=True, height_ratios=[1] + [max(1, n / 4)] * (panels - 1))
    axes[0].imshow(
        image, cmap="gray", vmin=0, vmax=1, aspect="auto", extent=(0, w, image.shape[0], 0)
    )
    for g, (a, b) in enumerate(spans):
        axes[0].axvspan(a, b, ymin=0.92, ymax=1.0, color=f"C{g % 10}", alpha=0.8)
    axes[0].set_title(f"{meta.reader} reader, length {n}: reads {label}", fontsize=9)
    axes[0].set_yticks([])
    steps = np.arange(n)
    if ex["weights"] is not None:
        wts = ex["weights"][:n]
        axes[1].imshow(
            wts,
            aspect="auto",
            cmap="viridis",
            interpolation="nearest",
            extent=(0, wts.shape[1] * stride, n - 0.5, -0.5),
        )
        axes[1].set_ylabel("step (attention)", fontsize=8)
    grid = np.full((n, w), np.nan)
    for g, (a, b) in enumerate(spans):
        grid[:, a:b] = ex["drops"][:, g][:, None]
    im = axes[-1].imshow(
        grid,
        aspect="auto",
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        interpolation="nearest",
        extent=(0, w, n - 0.5, -0.5),
    )
    centres = spans.mean(1)
    axes[-1].plot(centres[steps], steps, "+", color="gold", ms=7, label="true glyph")
    if ex["attended"] is not None:
        axes[-1].plot(
            centres[ex["attended"]], steps, "o", mfc="none", mec="w", ms=7, label="attended glyph"
        )
    axes[-1].set_ylabel("step (drop)", fontsize=8)
    axes[-1].set_xlabel("pixel column; each glyph painted over in turn", fontsize=8)
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.colorbar(im, ax=axes[-1], label="drop in p(read digit)", shrink=0.9)
    for ax in axes[1:]:
        ax.set_yticks(steps, [f"{t}:{label[t]}" for t in steps], fontsize=7)
    write_figure(path, fig, dpi=100)
    return {"length": n, "strip": ex["strip"]}


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
