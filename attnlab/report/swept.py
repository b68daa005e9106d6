"""A swept number gets its own plot: the chosen metrics against each numeric key that varies.

When a numeric key takes several values across the report's variants (a width such as
``model.hidden``, ``optim.lr``, or the top of the seen range, across training ranges), this
plots, per evaluation, exact accuracy at the longest seen length, at the first unseen
length, and the seen and unseen totals against that key: one line per reader (and per value
of any other swept key), with the seed band of each point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from attnlab.evaluation.metrics import TOTAL
from attnlab.report.aggregate import band_words, interval_kind
from attnlab.report.figures import Plot, file_name, legend_below, png_bytes, tight_layout
from attnlab.report.run_info import RunInfo
from attnlab.report.short_numbers import finite_number, short_number
from attnlab.report.variants import SEP, styles, variant_colours

# Keys that count strips (data.limit: the data-needs curve): drawn on a log x axis whatever
# their span, and a run without a count (null: the whole pool, e.g. the run fine-tuned
# from) is no point of the curve rather than a reason to draw no curve at all.
COUNT_KEYS = ("data.limit",)
SEEN_TOP = "top of the seen lengths"  # the derived key of a sweep over training ranges
PANELS = (
    ("longest seen length", "at_top"),
    ("first unseen length", "at_next"),
    ("seen total", "seen"),
    ("unseen total", "unseen"),
)


@dataclass(frozen=True)
class Point:
    train: str
    eval: str
    reader: str
    keys: dict[str, str]  # swept key -> value, SEEN_TOP included
    values: dict[str, tuple[float, float, float, int]]  # panel -> (exact, lo, hi, seeds)


def _exact(rows: pd.DataFrame, length: object, split: str):
    part = rows[(rows["length"] == length) & (rows["split"] == split)]
    if part.empty or pd.isna(part.iloc[0]["exact_acc"]):
        return None
    r = part.iloc[0]
    return float(r["exact_acc"]), float(r["exact_lo"]), float(r["exact_hi"]), int(r["n_seeds"])


def points(agg: pd.DataFrame, runs: list[RunInfo]) -> list[Point]:
    """One point per (training range, variant, evaluation) of the aggregate."""
    info = {(r.train, r.variant): r for r in runs if r.variant}
    out = []
    for (train, variant, name), rows in agg.groupby(["train", "variant", "eval"], sort=False):
        run = info.get((train, variant))
        if run is None or not run.seen_lengths:
            continue
        top = max(run.seen_lengths)
        unseen = sorted(n for n in rows["length"] if n != TOTAL and int(n) > top)
        cells = {
            "at_top": _exact(rows, top, "seen"),
            "at_next": _exact(rows, unseen[0], "unseen") if unseen else None,
            "seen": _exact(rows, TOTAL, "seen"),
            "unseen": _exact(rows, TOTAL, "unseen"),
        }
        keys = {**run.swept, SEEN_TOP: str(top)}
        values = {k: v for k, v in cells.items() if v is not None}
        out.append(Point(train, str(name), run.reader_name, keys, values))
    return out


def _has(p: Point, key: str) -> bool:
    """Is ``key`` set for this point (a count key's null is not)?"""
    return key in p.keys and not (key in COUNT_KEYS and p.keys[key] == "null")


def numeric_keys(pts: list[Point]) -> list[str]:
    """Keys whose values are numbers wherever they are set, with two or more values."""
    keys = sorted({k for p in pts for k in p.keys})
    out = []
    for key in keys:
        values = [p.keys[key] for p in pts if _has(p, key)]
        numbers = [finite_number(v) for v in values]
        if all(x is not None for x in numbers) and len(set(numbers)) >= 2:
            out.append(key)
    return out


def lines_of(pts: list[Point], key: str) -> dict[str, list[Point]]:
    """Points of one evaluation -> lines: same reader and same value of every other key."""
    lines: dict[str, list[Point]] = {}
    several_ranges = len({p.train for p in pts}) > 1
    for p in pts:
        if not _has(p, key):
            continue
        rest = [f"{k}={v}" for k, v in sorted(p.keys.items()) if k != key and k != SEEN_TOP]
        if key != SEEN_TOP and several_ranges:
            rest.append(f"seen {p.train}")
        label = SEP.join([p.reader, ", ".join(rest)]) if rest else p.reader
        lines.setdefault(label, []).append(p)
    return {k: sorted(v, key=lambda p: finite_number(p.keys[key])) for k, v in lines.items()}


def swept_plots(agg: pd.DataFrame, runs: list[RunInfo], colours: Mapping[str, str]) -> list[Plot]:
    """Per numeric swept key and evaluation: the four panels of `PANELS` against the key."""
    pts = points(agg, runs)
    plots = []
    for key in numeric_keys(pts):
        for name in sorted({p.eval for p in pts}):
            lines = lines_of([p for p in pts if p.eval == name], key)
            if not any(len(v) >= 2 for v in lines.values()):
                continue
            plots.append(_figure(key, name, lines, colours))
    return plots


SECTION = "Against a swept number"  # the page's heading (templates/compare.html.j2)


def left_out(agg: pd.DataFrame, runs: list[RunInfo]) -> list[str]:
    """Why a numeric key that varies gets no plot in an evaluation (``swept_plots`` skips
    it): no line (one reader, one value of every other key) has two of its values there."""
    pts = points(agg, runs)
    out = []
    for key in numeric_keys(pts):
        for name in sorted({p.eval for p in pts}):
            lines = lines_of([p for p in pts if p.eval == name], key)
            if lines and not any(len(v) >= 2 for v in lines.values()):
                out.append(
                    f"{key} varies but in eval {name} no line has two of its values (a line "
                    "is one reader with every other swept key the same)"
                )
    return out


def _figure(key: str, name: str, lines: dict[str, list[Point]], colours) -> Plot:
    fig = draw(key, name, lines, colours)
    return Plot(file_name("swept", key, name), fig.get_suptitle(), png_bytes(fig))


def draw(key: str, name: str, lines: dict[str, list[Point]], colours) -> Figure:
    """The four panels of one swept key and evaluation (``lines_of``'s lines)."""
    fig = Figure(figsize=(11, 7.6))
    axes = np.atleast_1d(fig.subplots(2, 2)).ravel()
    xs = [finite_number(p.keys[key]) for v in lines.values() for p in v]
    # a number of strips (data.limit: the data-needs curve) is read on a log axis at any span
    log = min(xs) > 0 and (max(xs) / min(xs) >= 10 or key in COUNT_KEYS)
    style = styles(lines)
    shade = variant_colours(lines, colours)
    kinds = set()
    for ax, (title, panel) in zip(axes, PANELS, strict=True):
        if not any(panel in p.values for line in lines.values() for p in line):
            ax.set_axis_off()  # e.g. a folder's held-out strips: no length beyond the seen
            ax.text(
                0.5,
                0.5,
                f"{title}: not read in this evaluation",
                ha="center",
                va="center",
                transform=ax.transAxes,
                color="0.4",
            )
            continue
        for label, line in lines.items():
            got = [(p, p.values[panel]) for p in line if panel in p.values]
            if not got:
                continue
            x = [finite_number(p.keys[key]) for p, _ in got]
            y = [100 * v[0] for _, v in got]
            lo = [100 * v[1] for _, v in got]
            hi = [100 * v[2] for _, v in got]
            kinds |= {interval_kind(v[3]) for _, v in got}
            colour = shade[label]
            ls, marker = style[label]
            ax.plot(x, y, ls=ls, marker=marker, ms=5, color=colour, label=label)
            ax.fill_between(x, lo, hi, color=colour, alpha=0.15, lw=0)
        ax.set(title=f"Exact, {title}", xlabel=key, ylabel="exact accuracy (%)")
        ax.set_ylim(-2, 102)
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_minor_locator(NullLocator())  # only the swept values are labelled
        ticks = sorted(set(xs))
        ax.set_xticks(ticks)
        crowded = len(ticks) > 5  # a sweeper's many values: slanted, so they do not overlap
        ax.set_xticklabels(
            [short_number(t, ticks) for t in ticks],
            rotation=40 if crowded else 0,
            ha="right" if crowded else "center",
        )
        ax.grid(alpha=0.3)
    handles: dict[str, object] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    band = " / ".join(band_words(k) for k in sorted(kinds))
    title = f"Exact accuracy against {key} · eval {name} · band: {band or 'none'}"
    fig.suptitle(title)
    tight_layout(fig)
    legend_below(fig, list(handles.values()), list(handles))
    return fig
