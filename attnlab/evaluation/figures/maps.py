"""Attention-map pictures: where each output step looked on the strip, and a per-length summary.

Figures are built on matplotlib's object API (Figure + Agg canvas), never pyplot, so no
global backend is switched and nothing needs a display. Files are written whole or not at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import blended_transform_factory

from attnlab.io import write_figure

_SPAN_COLOUR = "tab:orange"
_WRONG_COLOUR = "tab:red"
_MAX_WIDTH_IN = 16.0
_MIN_WIDTH_IN = 6.0


def _row_labels(truth: str, reading: str, n_rows: int) -> list[tuple[str, bool]]:
    """(label, is_wrong) per shown weight row: read digit, `read/true` where they differ, EOS."""
    labels = []
    for i in range(n_rows):
        if i < len(reading):
            r = reading[i]
            t = truth[i] if i < len(truth) else "-"
            labels.append((r, False) if r == t else (f"{r}/{t}", True))
        else:
            # EOS step; early EOS (reading shorter than truth) is itself an error
            labels.append(("EOS", len(reading) != len(truth)))
    return labels


def draw_attention_map(
    path: Path,
    image: np.ndarray,
    weights: np.ndarray,
    stride: int,
    truth: str | None,
    reading: str,
    confidence: float,
    spans: np.ndarray | None,
    cer: float,
) -> None:
    """Strip on top, weights of each output step below, both on the strip's pixel x-axis.

    image (H, W) in [0, 1], 1 = paper. weights (S, T): rows = output steps (reading digits
    then EOS), column c = encoder column covering pixels [c*stride, (c+1)*stride).
    spans (L, 2): pixel [start, end) of each TRUE glyph; drawn as bands on the strip and as
    outlines where step i should look if it reads glyph i.
    truth None (a user's image): no truth is known; the reading is shown with no spans.
    """
    known = truth is not None
    truth = reading if truth is None else truth
    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 2:
        raise ValueError(f"draw_attention_map: image must be (H, W), got {image.shape}")
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2:
        raise ValueError(f"draw_attention_map: weights must be (S, T), got {weights.shape}")
    spans = np.asarray(np.zeros((0, 2)) if spans is None else spans, dtype=np.int64)
    spans = spans.reshape(-1, 2)
    n_rows = min(len(reading) + 1, weights.shape[0])
    x_max = max(image.shape[1], weights.shape[1] * stride)

    width_in = float(np.clip(2.5 + x_max / 28.0, _MIN_WIDTH_IN, _MAX_WIDTH_IN))
    img_in = 1.3
    w_in = max(1.0, 0.32 * max(n_rows, 1))
    fig = Figure(figsize=(width_in, img_in + w_in + 1.1), layout="constrained")
    gs = fig.add_gridspec(2, 2, height_ratios=[img_in, w_in], width_ratios=[1.0, 0.015])
    ax_img = fig.add_subplot(gs[0, 0])
    ax_w = fig.add_subplot(gs[1, 0], sharex=ax_img)
    cax = fig.add_subplot(gs[1, 1])
    fig.add_subplot(gs[0, 1]).set_axis_off()
    _draw_strip(ax_img, image, spans, truth)
    im = _draw_weights(ax_w, weights[:n_rows], stride, spans, truth, reading, x_max)
    fig.colorbar(im, cax=cax, label="weight")
    correct = reading == truth
    fig.suptitle(
        _verdict(truth if known else None, reading, confidence, cer),
        color="black" if correct else _WRONG_COLOUR,
        fontsize=11,
    )
    write_figure(path, fig)


def _draw_strip(ax: Any, image: np.ndarray, spans: np.ndarray, truth: str) -> None:
    """The strip (x and y in pixels, aspect auto so long strips keep a readable height),
    each true glyph's span as a band with its digit above."""
    h, w = image.shape
    ax.imshow(
        image,
        cmap="gray",
        vmin=0.0,
        vmax=1.0,
        extent=(0, w, h, 0),
        aspect="auto",
        interpolation="nearest",
    )
    top = blended_transform_factory(ax.transData, ax.transAxes)
    for i, (a, b) in enumerate(spans):
        ax.axvspan(a, b, color=_SPAN_COLOUR, alpha=0.1, lw=0)
        ax.axvline(a, color=_SPAN_COLOUR, lw=0.8, alpha=0.7)
        ax.axvline(b, color=_SPAN_COLOUR, lw=0.8, alpha=0.7)
        digit = truth[i] if i < len(truth) else "?"
        ax.text(
            (a + b) / 2,
            1.02,
            digit,
            transform=top,
            ha="center",
            va="bottom",
            fontsize=10,
            color=_SPAN_COLOUR,
            fontweight="bold",
        )
    ax.set_yticks([])
    ax.set_ylabel("strip")
    ax.tick_params(labelbottom=False)


def _draw_weights(
    ax: Any,
    shown: np.ndarray,
    stride: int,
    spans: np.ndarray,
    truth: str,
    reading: str,
    x_max: int,
) -> Any:
    """The weights (n_rows, T): column c spans pixels [c*stride, (c+1)*stride), row i centred
    on y = i; where step i should look (glyph i's span) outlined, wrong rows in red. Returns
    the image, for the colour bar."""
    n_rows, t = shown.shape
    im = ax.imshow(
        shown if n_rows else np.zeros((1, max(t, 1))),
        cmap="Blues",
        vmin=0.0,
        vmax=1.0,
        aspect="auto",
        interpolation="nearest",
        extent=(0, t * stride, max(n_rows, 1) - 0.5, -0.5),
    )
    for i, (a, b) in enumerate(spans[:n_rows]):
        ax.add_patch(
            Rectangle((a, i - 0.5), b - a, 1.0, fill=False, edgecolor=_SPAN_COLOUR, lw=1.3)
        )
    for a, b in spans:
        ax.axvline(a, color=_SPAN_COLOUR, lw=0.5, alpha=0.35)
        ax.axvline(b, color=_SPAN_COLOUR, lw=0.5, alpha=0.35)
    labels = _row_labels(truth, reading, n_rows)
    ax.set_yticks(range(n_rows), [lab for lab, _ in labels])
    for tick, (_, wrong) in zip(ax.get_yticklabels(), labels, strict=True):
        if wrong:
            tick.set_color(_WRONG_COLOUR)
            tick.set_fontweight("bold")
    ax.set_ylim(max(n_rows, 1) - 0.5, -0.5)
    ax.set_xlim(0, x_max)
    ax.set_xlabel(f"pixel column (encoder column = {stride} px)")
    ax.set_ylabel("output step (read)")
    return im


def _verdict(truth: str | None, reading: str, confidence: float, cer: float) -> str:
    """The map's title: truth, reading, verdict, CER and confidence (truth None: a user's
    image, the reading and its confidence only)."""
    cer_txt = "n/a" if cer is None or math.isnan(cer) else f"{100 * cer:.1f}%"
    conf_txt = "n/a" if confidence is None or math.isnan(confidence) else f"{confidence:.2f}"
    if truth is None:
        return f"read {reading or '(empty)'} | conf {conf_txt}"
    return (
        f"truth {truth or '(empty)'} | read {reading or '(empty)'} | "
        f"{'correct' if reading == truth else 'wrong'} | CER {cer_txt} | conf {conf_txt}"
    )


def draw_head_maps(
    path: Path,
    image: np.ndarray,
    heads: dict[str, np.ndarray],
    stride: int,
    truth: str | None,
    reading: str,
    spans: np.ndarray | None,
) -> None:
    """One panel per attention head ("layer i head j"; layers down, heads across), each the
    weights (S, T) of every output step of ``reading`` over the strip's pixel x-axis, with
    the strip above every column of panels and the true glyph spans outlined, as in
    ``draw_attention_map``."""
    names = list(heads)
    if not names:
        raise ValueError("draw_head_maps: no heads to draw")
    per_layer: dict[str, list[str]] = {}  # "layer i" -> its heads, in the reader's order
    for name in names:
        per_layer.setdefault(name.split(" head ")[0], []).append(name)
    layers = list(per_layer)
    cols = max(len(v) for v in per_layer.values())
    image = np.asarray(image, dtype=np.float64)
    h, w = image.shape
    spans = np.zeros((0, 2)) if spans is None else np.asarray(spans).reshape(-1, 2)
    n_rows = len(reading) + 1
    t = next(iter(heads.values())).shape[-1]
    x_max = max(w, t * stride)
    labels = _row_labels(reading if truth is None else truth, reading, n_rows)
    panel_w = float(np.clip(1.5 + x_max / 40.0, 3.0, 7.0))
    panel_h = max(0.9, 0.22 * n_rows)
    fig = Figure(
        figsize=(panel_w * cols + 0.8, 0.7 + panel_h * len(layers) + 0.9), layout="constrained"
    )
    gs = fig.add_gridspec(1 + len(layers), cols, height_ratios=[0.7] + [panel_h] * len(layers))
    for j in range(cols):
        ax = fig.add_subplot(gs[0, j])
        ax.imshow(image, cmap="gray", vmin=0, vmax=1, extent=(0, w, h, 0), aspect="auto")
        for a, b in spans:
            ax.axvspan(a, b, color=_SPAN_COLOUR, alpha=0.12, lw=0)
        ax.set_xlim(0, x_max)
        ax.set_xticks([])
        ax.set_yticks([])
    im = None
    for i, layer in enumerate(layers):
        for j, name in enumerate(per_layer[layer]):
            ax = fig.add_subplot(gs[1 + i, j])
            weights = np.asarray(heads[name], dtype=np.float64)[:n_rows]
            im = ax.imshow(
                weights,
                cmap="Blues",
                vmin=0,
                vmax=1,
                aspect="auto",
                interpolation="nearest",
                extent=(0, t * stride, n_rows - 0.5, -0.5),
            )
            for k, (a, b) in enumerate(spans[:n_rows]):
                ax.add_patch(
                    Rectangle((a, k - 0.5), b - a, 1.0, fill=False, edgecolor=_SPAN_COLOUR, lw=1)
                )
            ax.set_xlim(0, x_max)
            ax.set_title(name, fontsize=9)
            ax.set_yticks(range(n_rows), [lab for lab, _ in labels], fontsize=7)
            for tick, (_, wrong) in zip(ax.get_yticklabels(), labels, strict=True):
                if wrong:
                    tick.set_color(_WRONG_COLOUR)
            ax.tick_params(axis="x", labelsize=7)
    fig.colorbar(im, ax=fig.axes, shrink=0.6, label="weight")
    verdict = f"read {reading or '(empty)'}"
    if truth is not None:
        verdict = f"truth {truth} | {verdict} | {'correct' if truth == reading else 'wrong'}"
    fig.suptitle(f"cross-attention of every head: {verdict}", fontsize=11)
    write_figure(path, fig)


def _runs(values: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous runs [(first, last), ...] of a set of integers."""
    out: list[tuple[int, int]] = []
    for v in sorted(set(int(x) for x in values)):
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def draw_attention_summary(path: Path, table: pd.DataFrame, seen: list[int]) -> None:
    """Entropy and alignment by string length (per-length rows of per_length_table).

    Lower entropy = sharper attention; alignment = share of digit steps of correct readings
    whose most-weighted column lies on their glyph. The seen length range is shaded.
    """
    rows = table[table["length"] != "all"].copy()
    rows["length"] = rows["length"].astype(int)
    rows = rows.sort_values("length")
    x = rows["length"].to_numpy()
    ent = rows["entropy"].astype(float).to_numpy()
    align = rows["align"].astype(float).to_numpy()

    fig = Figure(figsize=(7.5, 5.5), layout="constrained")
    ax_e, ax_a = fig.subplots(2, 1, sharex=True)
    for ax, y, ylabel in (
        (ax_e, ent, "mean attention entropy (nats)"),
        (ax_a, 100 * align, "alignment (% steps on glyph)"),
    ):
        for k, (a, b) in enumerate(_runs(seen)):
            ax.axvspan(
                a - 0.5,
                b + 0.5,
                color="tab:green",
                alpha=0.12,
                lw=0,
                label="seen" if k == 0 else None,
            )
        if np.isfinite(y).any():
            ax.plot(x, y, marker="o", color="tab:blue")
        else:
            ax.text(
                0.5,
                0.5,
                "no attention weights",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="grey",
            )
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    trans = blended_transform_factory(ax_e.transData, ax_e.transAxes)
    for a, b in _runs(seen):
        ax_e.text(
            (a + b) / 2,
            0.97,
            "seen",
            transform=trans,
            ha="center",
            va="top",
            color="tab:green",
            fontsize=9,
        )
    ax_a.set_ylim(-2, 102)
    ax_a.set_xlabel("string length (digits)")
    if len(x):
        ax_a.set_xticks(x)
    fig.suptitle("Attention by string length: sharpness (entropy) and alignment")
    write_figure(path, fig)
