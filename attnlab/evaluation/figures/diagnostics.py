"""Figures of one evaluation beside its tables: calibration (reliability diagram), where the
reader stopped (read minus true length), and the pace of the attention along the strip.

matplotlib's object API (Figure, no pyplot); files through the one atomic writer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnlab.evaluation.analysis import attention_pace, calibration_bins
from attnlab.io import write_figure

SPLIT_COLOURS = {"seen": "tab:green", "unseen": "tab:purple"}


def draw_reliability(path: Path, records: pd.DataFrame, seen: set[int], bins: int) -> None:
    """Accuracy against mean confidence in equal-mass bins, seen and unseen lengths apart;
    a calibrated reader lies on the diagonal."""
    fig = Figure(figsize=(5.2, 5.0), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="calibrated")
    for split, colour in SPLIT_COLOURS.items():
        part = records[records["length"].isin(seen) == (split == "seen")]
        pts = calibration_bins(part["confidence"].to_numpy(), part["correct"].to_numpy(), bins)
        if pts:
            conf, acc, count = map(np.array, zip(*pts, strict=True))
            ax.plot(conf, acc, marker="o", color=colour, label=f"{split} ({int(count.sum())})")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean confidence", ylabel="exact accuracy")
    ax.set_title(f"Reliability ({bins} equal-mass bins)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    write_figure(path, fig)


def draw_stops(path: Path, records: pd.DataFrame, seen: set[int]) -> None:
    """Where the reader stopped: the distribution of (read length - true length) per true
    length; 0 is the right length, negative readings stopped (or skipped) short."""
    lengths = sorted(records["length"].unique())
    diff = records["reading"].str.len() - records["length"]
    lo, hi = int(min(diff.min(), -1)), int(max(diff.max(), 1))
    grid = np.zeros((hi - lo + 1, len(lengths)))
    for j, n in enumerate(lengths):
        d = diff[records["length"] == n]
        for v, c in d.value_counts().items():
            grid[int(v) - lo, j] = c / len(d)
    fig = Figure(figsize=(max(6.0, 0.45 * len(lengths) + 2), 4.2), layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(
        grid,
        origin="lower",
        aspect="auto",
        cmap="Blues",
        vmin=0,
        vmax=1,
        extent=(-0.5, len(lengths) - 0.5, lo - 0.5, hi + 0.5),
    )
    ax.axhline(0, color="tab:red", lw=0.8, alpha=0.6)
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    for tick, n in zip(ax.get_xticklabels(), lengths, strict=True):
        tick.set_color(SPLIT_COLOURS["seen" if n in seen else "unseen"])
    ax.set(xlabel="true length (green: seen, purple: unseen)", ylabel="read - true length")
    ax.set_title("Where the reader stopped (share of strips)")
    fig.colorbar(im, ax=ax, label="share of strips")
    write_figure(path, fig)


def draw_pace(path: Path, paces: dict[int, list[np.ndarray]], seen: set[int], reader: str) -> None:
    """Attention peak position along the strip against the true glyph's position, step by
    step, for a seen and an unseen length: a reader that keeps pace stays on the diagonal;
    one that reaches the end in too few steps runs above it."""
    fig = Figure(figsize=(5.6 * max(1, len(paces)), 4.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, max(1, len(paces))))
    for ax, (n, tracks) in zip(axes, sorted(paces.items()), strict=False):
        for track in tracks:
            ax.plot(track[:, 0], track[:, 1], color="tab:blue", alpha=0.25, lw=1, marker=".")
        ax.plot([0, 1], [0, 1], color="0.5", ls="--", lw=1)
        split = "seen" if n in seen else "unseen"
        ax.set(
            xlim=(0, 1),
            ylim=(0, 1),
            xlabel="true glyph position (step / true length)",
            ylabel="attention peak (column / real columns)",
        )
        ax.set_title(f"length {n} ({split}): {len(tracks)} readings", color=SPLIT_COLOURS[split])
        ax.grid(alpha=0.3)
    fig.suptitle(f"Pace of the alignment, {reader} reader")
    write_figure(path, fig)


def pace_tracks(texts: list[str], labels: list[str], weights: list[np.ndarray], k: int = 40):
    """Up to k (steps, 2) pace tracks of one length's readings (see analysis.attention_pace)."""
    tracks = []
    for text, truth, w in zip(texts[:k], labels[:k], weights[:k], strict=True):
        track = attention_pace(w, len(text), len(truth))
        if len(track):
            tracks.append(track)
    return tracks
