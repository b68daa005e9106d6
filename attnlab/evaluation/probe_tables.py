"""The probe's strips read under each intervention (``attnlab probe``): the rows of
occlusion.csv, swap.csv and saliency.csv for the correctly read strips of one length, the
reader run in batches of ``probe.batch_size`` (all variants of a strip, and of its
neighbours in the batch, in one forward pass). What each intervention computes:
attnlab.evaluation.occlusion, attnlab.evaluation.probe_strips (the glyph swap's strips),
attnlab.evaluation.saliency.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from attnlab.config import ProbeConfig
from attnlab.data.strips import StripBatch
from attnlab.errors import UserError
from attnlab.evaluation.inference import read_strips
from attnlab.evaluation.occlusion import (
    attended_glyph,
    occlusion_rows,
    occlusion_variants,
    paper_level,
    random_glyph,
)
from attnlab.evaluation.probe_strips import rerender
from attnlab.evaluation.saliency import column_saliency, spearman


def _chunks(lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive strip indices whose summed sizes stay within ``budget`` (at least one)."""
    out: list[list[int]] = []
    for i, size in enumerate(lengths):
        if out and sum(lengths[j] for j in out[-1]) + size <= budget:
            out[-1].append(i)
        else:
            out.append([i])
    return out


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
