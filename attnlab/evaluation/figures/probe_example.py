"""The probe's example figure (example.png): a strip, its attention map and the drop of
each step's probability when each glyph is painted over, all on the strip's pixel axis
(attnlab.evaluation.probe writes it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnlab.config import ProbeConfig
from attnlab.io import write_figure


def draw_example(path: Path, examples: dict, cfg: ProbeConfig, meta, stride: int) -> dict:
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
