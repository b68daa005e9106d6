"""Matplotlib figures of one training range, as PNG bytes (object API, never pyplot).

A figure function takes a `TrainGroup` and the report's reader colours and returns `Plot`s;
``@plot("kind")`` registers it, and the page shows its plots in the template block that
loops over ``group.plots.<kind>``. Adding a plot is one such function plus one such block.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from attnlab.evaluation.metrics import METRICS, TOTAL, Metric
from attnlab.report.aggregate import TrainGroup, band_columns, band_words, seeds_text
from attnlab.report.budgets import has_seconds
from attnlab.report.variants import ordered_variants, styles, variant_colours

SEEN_SHADE = {"color": "0.85", "alpha": 0.6}


@dataclass(frozen=True)
class Plot:
    file: str  # PNG file name in the report folder
    title: str  # caption and alt text
    png: bytes


PlotFunction = Callable[[TrainGroup, Mapping[str, str]], list[Plot]]
PLOTS: dict[str, PlotFunction] = {}  # kind -> figure function, in page order


def plot(kind: str) -> Callable[[PlotFunction], PlotFunction]:
    """Register a figure function under `kind` (its files are named ``<kind>_...png``)."""

    def register(fn: PlotFunction) -> PlotFunction:
        PLOTS[kind] = fn
        return fn

    return register


def draw_plots(group: TrainGroup, colours: Mapping[str, str]) -> dict[str, list[Plot]]:
    """Every registered figure of `group`: kind -> its plots (none when it has no data)."""
    return {kind: fn(group, colours) for kind, fn in PLOTS.items()}


def file_name(kind: str, *parts: str) -> str:
    slugs = (re.sub(r"[^A-Za-z0-9]+", "_", p).strip("_") or "x" for p in parts)
    return "_".join([kind, *slugs]) + ".png"


def tight_layout(fig: Figure) -> None:
    """``fig.tight_layout()``, quietly. Where labels leave it no room (a study's many swept
    values) matplotlib keeps the layout as drawn and says so in a UserWarning, which would
    reach stderr on a report that succeeded; the PNG is cropped to its ink either way."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


# --------------------------------------------------------------------------- metrics by length


def _blocks(lengths: list[int], seen: set[int]) -> list[tuple[bool, int, int]]:
    """Contiguous (is_seen, first, last) blocks of the plotted lengths."""
    out: list[tuple[bool, int, int]] = []
    for length in lengths:
        s = length in seen
        if out and out[-1][0] == s and out[-1][2] == length - 1:
            out[-1] = (s, out[-1][1], length)
        else:
            out.append((s, length, length))
    return out


def _mark_seen(ax: Axes, lengths: list[int], seen: set[int]) -> None:
    """Shade the seen lengths and label the seen/unseen blocks along the top."""
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for is_seen, first, last in _blocks(lengths, seen):
        if is_seen:
            ax.axvspan(first - 0.5, last + 0.5, lw=0, zorder=0, **SEEN_SHADE)
        narrow = last == first and len(lengths) > 8
        if is_seen or not narrow:  # a narrow unseen gap is clear from the shading
            ax.text(
                (first + last) / 2,
                0.985,
                "seen" if is_seen else "unseen",
                transform=trans,
                ha="center",
                va="top",
                fontsize=7 if narrow else 9,
                color="0.3",
                style="italic",
            )


def _metric_panel(
    ax: Axes, rows: pd.DataFrame, metric: Metric, colours: Mapping[str, str], seen: set[int]
) -> None:
    """One metric against length, a line and band per variant that has it: the reader's
    colour, the variant's line style and marker."""
    lo, hi = band_columns(metric)
    scale = 100.0 if metric.unit == "%" else 1.0
    lengths = sorted(rows["length"].unique())
    _mark_seen(ax, lengths, seen)
    style = styles(rows["variant"])
    shade = variant_colours(rows["variant"], colours)
    for variant in ordered_variants(rows["variant"]):
        part = rows[rows["variant"] == variant].dropna(subset=[metric.name]).sort_values("length")
        if part.empty:  # a metric this reader lacks is left out, not drawn as zero
            continue
        colour = shade[variant]
        label = f"{variant} ({seeds_text(list(part['n_seeds']))})"
        line, marker = style[variant]
        ax.plot(
            part["length"],
            scale * part[metric.name],
            ls=line,
            marker=marker,
            ms=4,
            color=colour,
            label=label,
        )
        band = part.dropna(subset=[lo, hi])
        ax.fill_between(
            band["length"], scale * band[lo], scale * band[hi], color=colour, alpha=0.2, lw=0
        )
    unit = f" ({metric.unit})" if metric.unit else ""
    title = metric.label[:1].upper() + metric.label[1:]
    ax.set(xlabel="string length (digits)", ylabel=f"{metric.label}{unit}", title=title)
    ax.set_xticks(lengths)
    ax.set_xlim(min(lengths) - 0.5, max(lengths) + 0.5)
    ax.grid(alpha=0.3)
    if metric.unit == "%" and not metric.lower_is_better:
        ax.set_ylim(-2, 108)
    else:
        top = np.nanmax(rows[[metric.name, hi]].to_numpy(dtype=float))
        ax.set_ylim(bottom=0, top=max(1.0 if scale > 1 else 0.1, scale * float(top) * 1.12))


def legend_below(fig: Figure, handles: list, labels: list[str], **kw) -> None:
    """The figure's one legend, below its axes, where it cannot cover a curve (savefig's
    tight bounding box takes it in)."""
    ncol = max(1, min(3, len(labels)))
    fig.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=ncol,
        fontsize=9,
        frameon=False,
        **kw,
    )


def accuracy_figure(group: TrainGroup, name: str, colours: Mapping[str, str]) -> Figure | None:
    """Every metric with ``plot=True`` against length for one evaluation; None without one."""
    rows = group.agg[(group.agg["eval"] == name) & (group.agg["length"] != TOTAL)].copy()
    rows["length"] = rows["length"].astype(int)
    shown = [m for m in METRICS if m.plot and rows[m.name].notna().any()]
    if not shown:
        return None
    ncols = min(2, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    fig = Figure(figsize=(11, 4.2 * nrows))
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    for ax, metric in zip(axes, shown, strict=False):
        _metric_panel(ax, rows, metric, colours, set(group.seen))
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    handles, labels = {}, {}
    for ax in axes[: len(shown)]:  # every variant once, whichever panel draws it
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
            labels.setdefault(label, label)
    hs = [*handles.values(), Patch(label="seen lengths", **SEEN_SHADE)]
    band = " / ".join(band_words(k) for k in sorted(set(rows["interval"]) - {""}))
    fig.suptitle(f"Trained on lengths {group.train} · eval {name} · band: {band}")
    tight_layout(fig)
    legend_below(fig, hs, [*labels.values(), "seen lengths"])
    return fig


@plot("accuracy")
def accuracy_plots(group: TrainGroup, colours: Mapping[str, str]) -> list[Plot]:
    """Per evaluation: every metric with ``plot=True`` against length, one line per variant."""
    plots = []
    for name in group.evals:
        fig = accuracy_figure(group, name, colours)
        if fig is not None:
            title = fig.get_suptitle()
            plots.append(Plot(file_name("accuracy", group.train, name), title, png_bytes(fig)))
    return plots


# --------------------------------------------------------------------------- training curves


def training_figure(group: TrainGroup, colours: Mapping[str, str]) -> Figure | None:
    """Training loss and validation accuracy against step, one line per run; None without
    any history."""
    runs = [r for r in group.runs if r.history is not None]
    if not runs:
        return None
    fig = Figure(figsize=(11, 3.8))
    ax_loss, ax_acc = fig.subplots(1, 2)
    positive = True
    labels = [r.variant or r.reader_name for r in runs]
    style = styles(labels)
    shade = variant_colours(labels, colours)
    for run, label in zip(runs, labels, strict=True):
        hist = run.history
        colour, ls = shade[label], style[label][0]
        if "loss" in hist.columns:
            loss = hist[["step", "loss"]].dropna()
            positive &= bool((loss["loss"] > 0).all())
            ax_loss.plot(loss["step"], loss["loss"], color=colour, ls=ls, alpha=0.8, lw=1.2)
        if "val_exact_acc" in hist.columns:
            acc = hist[["step", "val_exact_acc"]].dropna()
            ax_acc.plot(
                acc["step"],
                100 * acc["val_exact_acc"],
                color=colour,
                ls=ls,
                alpha=0.8,
                lw=1.2,
                marker=style[label][1],
                ms=3,
            )
    if positive:
        ax_loss.set_yscale("log")
    ax_loss.set(xlabel="step", ylabel="training loss", title="Training loss")
    ax_acc.set(xlabel="step", ylabel="validation exact accuracy (%)", title="Validation accuracy")
    ax_acc.set_ylim(-2, 102)
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
    fig.suptitle(f"Training curves · trained on lengths {group.train} · {len(runs)} run(s)")
    _runs_legend(fig, style, shade)
    return fig


def _runs_legend(fig: Figure, style: dict, shade: Mapping[str, str]) -> None:
    """The layout, then one legend entry per variant below it (one line per run drawn)."""
    tight_layout(fig)
    order = ordered_variants(style)
    handles = [
        Line2D([], [], color=shade[v], ls=style[v][0], marker=style[v][1], ms=3) for v in order
    ]
    legend_below(fig, handles, order, title="variant (one line per run)")


def minutes_figure(group: TrainGroup, colours: Mapping[str, str]) -> Figure | None:
    """Validation accuracy against the training minutes at each validation (history.csv's
    ``train_seconds``), one line per run that logs them; a dotted line at each budget in
    minutes the runs were given. None when no run logs them."""
    runs = [r for r in group.runs if has_seconds(r.history) and "val_exact_acc" in r.history]
    if not runs:
        return None
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.subplots()
    labels = [r.variant or r.reader_name for r in runs]
    style = styles(labels)
    shade = variant_colours(labels, colours)
    for run, label in zip(runs, labels, strict=True):
        acc = run.history[["train_seconds", "val_exact_acc"]].dropna()
        ax.plot(
            acc["train_seconds"] / 60.0,
            100 * acc["val_exact_acc"],
            color=shade[label],
            ls=style[label][0],
            marker=style[label][1],
            ms=3,
            alpha=0.8,
            lw=1.2,
        )
    given = sorted({r.spent.minutes for r in runs if r.spent and r.spent.minutes is not None})
    for minutes in given:
        ax.axvline(minutes, color="0.4", ls=":", lw=1)
        where = {"xycoords": ("data", "axes fraction"), "textcoords": "offset points"}
        ax.annotate(f"train.minutes={minutes:g}", (minutes, 1), xytext=(-3, -3), ha="right",
                    va="top", fontsize=8, color="0.3", **where)  # fmt: skip
    ax.set(
        xlabel="training minutes (validations included)",
        ylabel="validation exact accuracy (%)",
        title="Validation accuracy against minutes",
    )
    ax.set_ylim(-2, 102)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    fig.suptitle(
        f"Validation accuracy against training minutes · trained on lengths {group.train} · "
        f"{len(runs)} run(s)"
    )
    _runs_legend(fig, style, shade)
    return fig


@plot("training")
def training_plots(group: TrainGroup, colours: Mapping[str, str]) -> list[Plot]:
    """Training loss and validation accuracy against step, one line per run; then
    validation accuracy against minutes, for the runs that log their training seconds."""
    plots = []
    fig = training_figure(group, colours)
    if fig is not None:
        plots.append(Plot(file_name("training", group.train), fig.get_suptitle(), png_bytes(fig)))
    fig = minutes_figure(group, colours)
    if fig is not None:
        name = file_name("training", group.train, "minutes")
        plots.append(Plot(name, fig.get_suptitle(), png_bytes(fig)))
    return plots
