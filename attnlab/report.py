"""Runs on disk -> tables, plots and one self-contained HTML page.

A run directory is any directory holding ``.hydra/config.yaml``; single runs live under
``outputs/<date>/<time>/`` and sweep jobs under ``multirun/<date>/<time>/<job>/``. Each run may
carry ``status.json``, ``metrics.json``, ``history.csv`` and ``eval/<name>/`` results written by
the training and evaluation tasks. This module only reads those files: it never imports torch.

Seeds are aggregated per (training lengths, reader, evaluation, length). With five or more seeds
the band is a 95% Student-t interval of the mean; with fewer it is the min-max range of the seeds,
and every table and plot says which one it shows.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory
from omegaconf import OmegaConf

from attnlab.metrics import TABLE_COLUMNS

__all__ = [
    "AGG_COLUMNS",
    "MIN_SEEDS_T",
    "ReportError",
    "RunInfo",
    "aggregate",
    "build_report",
    "discover_runs",
    "t_quantile_975",
]

# Columns of `aggregate`'s frame (and of summary.csv). Values are fractions in 0..1.
AGG_COLUMNS = [
    "train",
    "reader",
    "eval",
    "length",
    "split",
    "n_seeds",
    "exact_acc",
    "exact_lo",
    "exact_hi",
    "cer",
    "cer_lo",
    "cer_hi",
    "interval",
]
# The columns of an evaluation table (metrics.TABLE_COLUMNS) that a report reads.
EVAL_COLUMNS = TABLE_COLUMNS[: TABLE_COLUMNS.index("cer_hi") + 1]
MIN_SEEDS_T = 5  # from this many seeds on, the band is a t-interval; below it, min-max
MAX_MAPS_SHOWN = 4  # attention maps embedded per (run, eval, length, correct|failure)
READER_ORDER = ["fixed", "attention"]
READER_COLOURS = {"fixed": "tab:orange", "attention": "tab:blue"}
_EXTRA_COLOURS = ["tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
_SKIP_DIRS = {"eval", "report", "__pycache__", "node_modules"}
_MAP_NAME = re.compile(r"^len(\d+)_(correct|failure)_(\d+)\.png$")

# Two-sided 95% Student-t quantiles t_{0.975, df}, df = 1..30, then 40, 60, 120 and infinity.
# Checked against a numerical integration of the t density to 4 decimals.
_T975 = {
    1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060,
    9: 2.2622, 10: 2.2281, 11: 2.2010, 12: 2.1788, 13: 2.1604, 14: 2.1448, 15: 2.1314,
    16: 2.1199, 17: 2.1098, 18: 2.1009, 19: 2.0930, 20: 2.0860, 21: 2.0796, 22: 2.0739,
    23: 2.0687, 24: 2.0639, 25: 2.0595, 26: 2.0555, 27: 2.0518, 28: 2.0484, 29: 2.0452,
    30: 2.0423, 40: 2.0211, 60: 2.0003, 120: 1.9799,
}  # fmt: skip
_Z975 = 1.9600


class ReportError(Exception):
    """A user error while building a report (nothing to report, a path that does not exist)."""


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}: exact table for df <= 30, linear in 1/df between 30, 40, 60, 120 and inf."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df in _T975:
        return _T975[df]
    knots = [(30, _T975[30]), (40, _T975[40]), (60, _T975[60]), (120, _T975[120]), (None, _Z975)]
    for (d0, q0), (d1, q1) in zip(knots, knots[1:], strict=False):
        if d1 is None or df < d1:
            x0, x1, x = 1 / d0, (1 / d1 if d1 else 0.0), 1 / df
            return q0 + (q1 - q0) * (x0 - x) / (x0 - x1)
    return _Z975  # pragma: no cover


@dataclass
class RunInfo:
    """What the report knows about one run directory; `problems` says why it is incomplete."""

    path: Path
    reader: str | None
    seed: int | None
    train: str  # "1-8" for a range, "2,4,6" for an explicit set, "?" when the config lacks it
    seen_lengths: list[int]
    status: str  # running | complete | failed | unknown
    evals: list[str] = field(default_factory=list)  # eval names with readable results
    problems: list[str] = field(default_factory=list)
    step: int | None = None
    sweep: Path | None = None  # the sweep directory (holding multirun.yaml) for multirun jobs
    config_text: str = field(default="", repr=False)
    overrides: list[str] = field(default_factory=list)
    eval_tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    eval_meta: dict[str, dict] = field(default_factory=dict, repr=False, compare=False)

    @property
    def complete(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------- discovery


def discover_runs(paths: list[Path]) -> list[RunInfo]:
    """Every run directory under `paths` (recursively), sorted by path; never raises for a run.

    Directories named eval/ or report/ and hidden directories other than .hydra are not walked.
    A path that does not exist is a user error (ReportError).
    """
    found: dict[Path, None] = {}
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise ReportError(f"no such file or directory: {root}")
        if root.is_file():
            raise ReportError(f"not a directory: {root}")
        for dirpath, dirnames, _ in os.walk(root):
            here = Path(dirpath)
            if (here / ".hydra" / "config.yaml").is_file():
                found[here.resolve()] = None
            dirnames[:] = sorted(
                d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
            )
    return [_read_run(p) for p in sorted(found)]


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"unreadable {path.name}: {exc}"
    if not isinstance(data, dict):
        return None, f"unreadable {path.name}: not a JSON object"
    return data, None


def _select(cfg, key: str):
    try:
        return OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
    except Exception:  # a broken config is reported, not raised
        return None


def _train_label(lengths, length_set) -> tuple[str, list[int]]:
    if length_set is not None:
        seen = sorted({int(v) for v in length_set})
        return ",".join(str(v) for v in seen), seen
    lo, hi = (int(v) for v in lengths)
    return f"{lo}-{hi}", list(range(lo, hi + 1))


def _find_sweep(path: Path) -> Path | None:
    for parent in path.parents:
        if (parent / "multirun.yaml").is_file():
            return parent
    return None


def _read_run(path: Path) -> RunInfo:
    problems: list[str] = []
    reader = seed = None
    train, seen = "?", []
    config_text = (path / ".hydra" / "config.yaml").read_text(errors="replace")
    try:
        cfg = OmegaConf.create(config_text)
    except Exception as exc:  # any parse error is reported as a problem
        cfg = None
        problems.append(f"unreadable .hydra/config.yaml: {str(exc).splitlines()[0]}")
    if cfg is not None:
        reader = _select(cfg, "model.name")
        seed = _select(cfg, "seed")
        if seed is not None and not isinstance(seed, int):
            problems.append(f"config seed is not an integer: {seed!r}")
            seed = None
        try:
            train, seen = _train_label(
                _select(cfg, "data.train_lengths"), _select(cfg, "data.train_length_set")
            )
        except (TypeError, ValueError):
            problems.append("config lacks data.train_lengths")
    overrides: list[str] = []
    try:
        loaded = OmegaConf.load(path / ".hydra" / "overrides.yaml")
        overrides = [str(o) for o in loaded] if loaded is not None else []
    except Exception:  # overrides are informative only
        pass

    status, step = "unknown", None
    status_json, err = _read_json(path / "status.json")
    if err:
        problems.append(err)
    elif status_json is None:
        problems.append("no status.json")
    else:
        status = str(status_json.get("state", "unknown"))
        step = status_json.get("step")
        if status == "failed":
            problems.append(f"failed: {status_json.get('error') or 'no error message'}")
        elif status == "running":
            problems.append(f"running (step {step})")
        elif status != "complete":
            problems.append(f"unknown state {status!r}")

    metrics, err = _read_json(path / "metrics.json")
    if err:
        problems.append(err)
    elif metrics is None:
        problems.append("no metrics.json")
    if reader is None and metrics is not None:
        reader = metrics.get("reader")
    if reader is None:
        problems.append("config lacks model.name")

    run = RunInfo(
        path=path,
        reader=None if reader is None else str(reader),
        seed=seed,
        train=train,
        seen_lengths=seen,
        status=status,
        problems=problems,
        step=step,
        sweep=_find_sweep(path),
        config_text=config_text,
        overrides=overrides,
    )
    _read_evals(run)
    return run


def _read_evals(run: RunInfo) -> None:
    eval_root = run.path / "eval"
    names = sorted(p.name for p in eval_root.iterdir() if p.is_dir()) if eval_root.is_dir() else []
    for name in names:
        csv_path = eval_root / name / "metrics_by_length.csv"
        if not csv_path.is_file():
            run.problems.append(f"eval/{name}: no metrics_by_length.csv")
            continue
        try:
            table = pd.read_csv(csv_path, dtype={"length": str, "split": str})
        except (OSError, ValueError) as exc:
            run.problems.append(f"eval/{name}: unreadable metrics_by_length.csv: {exc}")
            continue
        missing = [c for c in EVAL_COLUMNS if c not in table.columns]
        if missing:
            run.problems.append(f"eval/{name}: metrics_by_length.csv lacks {', '.join(missing)}")
            continue
        lengths = table["length"].astype(str).str.strip()
        bad = sorted(set(lengths[~(lengths.str.fullmatch(r"\d+") | (lengths == "all"))]))
        if bad:
            run.problems.append(f"eval/{name}: metrics_by_length.csv has bad length {bad[0]!r}")
            continue
        meta, err = _read_json(eval_root / name / "eval.json")
        if err:
            run.problems.append(f"eval/{name}: {err}")
        meta = meta or {}
        if run.reader and meta.get("reader") and meta["reader"] != run.reader:
            run.problems.append(
                f"eval/{name}: reader {meta['reader']!r} differs from config {run.reader!r}"
            )
        run.evals.append(name)
        run.eval_tables[name] = table
        run.eval_meta[name] = meta
    if not run.evals and not any(p.startswith("eval/") for p in run.problems):
        run.problems.append("no evaluation")


# --------------------------------------------------------------------------- aggregation


def _length_key(length) -> tuple[int, int]:
    return (1, 0) if length == "all" else (0, int(length))


def _reader_key(reader: str) -> tuple[int, str]:
    return (
        (READER_ORDER.index(reader), "") if reader in READER_ORDER else (len(READER_ORDER), reader)
    )


def _train_key(label: str) -> tuple[int, str]:
    m = re.match(r"\d+", label)
    return (int(m.group()) if m else 10**9, label)


def _interval(values: np.ndarray) -> tuple[float, float, float, str]:
    """(mean, lo, hi, kind) of per-seed values; kind is "t95" from MIN_SEEDS_T seeds on."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan, ""
    mean = float(values.mean())
    if n >= MIN_SEEDS_T:
        half = t_quantile_975(n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
        # a rate lies in [0, 1]; the part of the interval outside it is cut off
        return mean, max(0.0, mean - half), min(1.0, mean + half), "t95"
    return mean, float(values.min()), float(values.max()), "min-max"


def _long_frame(runs: list[RunInfo], eval_name: str | None) -> pd.DataFrame:
    rows = []
    for run in runs:
        for name in run.evals:
            if eval_name is not None and name != eval_name:
                continue
            table = run.eval_tables[name]
            for rec in table.to_dict("records"):
                raw = str(rec["length"]).strip()
                length = "all" if raw == "all" else int(raw)
                split = rec.get("split")
                if not isinstance(split, str):
                    split = "seen" if length in run.seen_lengths else "unseen"
                rows.append(
                    {
                        "train": run.train,
                        "reader": run.reader or "?",
                        "eval": name,
                        "length": length,
                        "split": split,
                        "run": str(run.path),
                        "seed": run.seed,
                        "exact_acc": float(rec["exact_acc"]),
                        "cer": float(rec["cer"]),
                    }
                )
    return pd.DataFrame(rows)


def aggregate(runs: list[RunInfo], eval_name: str | None = None) -> pd.DataFrame:
    """Seed aggregate per (train, reader, eval, length, split); columns `AGG_COLUMNS`.

    Every readable evaluation counts, whatever the run's status. Per-length rows have an integer
    `length`; the totals of each split have `length == "all"` (as in metrics_by_length.csv).
    `n_seeds` counts contributing runs; exact_acc/cer are seed means; the band (`*_lo`, `*_hi`)
    is a 95% t-interval of the mean with >= MIN_SEEDS_T seeds, else the min-max of the seeds,
    as `interval` says. With `eval_name`, only that evaluation is aggregated.
    """
    long = _long_frame(runs, eval_name)
    if long.empty:
        return pd.DataFrame(columns=AGG_COLUMNS)
    out = []
    for (train, reader, name, length, split), grp in long.groupby(
        ["train", "reader", "eval", "length", "split"], sort=False
    ):
        acc = grp["exact_acc"].dropna().to_numpy(dtype=float)
        cer = grp["cer"].dropna().to_numpy(dtype=float)
        acc_m, acc_lo, acc_hi, kind = _interval(acc)
        cer_m, cer_lo, cer_hi, _ = _interval(cer)
        out.append(
            {
                "train": train,
                "reader": reader,
                "eval": name,
                "length": length,
                "split": split,
                "n_seeds": len(acc),
                "exact_acc": acc_m,
                "exact_lo": acc_lo,
                "exact_hi": acc_hi,
                "cer": cer_m,
                "cer_lo": cer_lo,
                "cer_hi": cer_hi,
                "interval": kind,
            }
        )
    agg = pd.DataFrame(out, columns=AGG_COLUMNS)
    order = sorted(
        range(len(agg)),
        key=lambda i: (
            _train_key(agg.at[i, "train"]),
            _reader_key(agg.at[i, "reader"]),
            agg.at[i, "eval"],
            _length_key(agg.at[i, "length"]),
            agg.at[i, "split"] != "seen",
        ),
    )
    return agg.iloc[order].reset_index(drop=True)


# --------------------------------------------------------------------------- tables


def _pct(mean: float, lo: float, hi: float, digits: int) -> str:
    if mean is None or math.isnan(mean):
        return "–"
    return f"{100 * mean:.{digits}f} [{100 * lo:.{digits}f}, {100 * hi:.{digits}f}]"


def _band_words(kind: str) -> str:
    return "95% t-interval of the mean" if kind == "t95" else "min-max over seeds"


def _summary_table(agg: pd.DataFrame, train: str) -> tuple[pd.DataFrame, list[str]]:
    """One wide table for a training range: rows = lengths, columns = readers (per eval)."""
    sub = agg[agg["train"] == train]
    pairs = list(dict.fromkeys(zip(sub["reader"], sub["eval"], strict=True)))
    several_evals = sub["eval"].nunique() > 1
    index = sorted(
        dict.fromkeys(zip(sub["length"], sub["split"], strict=True)),
        key=lambda ls: (_length_key(ls[0]), ls[1] != "seen"),
    )
    table = pd.DataFrame(
        {
            "length": [str(length) for length, _ in index],
            "split": [split for _, split in index],
        }
    )
    notes = []
    for reader, name in pairs:
        part = sub[(sub["reader"] == reader) & (sub["eval"] == name)]
        keyed = {(r.length, r.split): r for r in part.itertuples(index=False)}
        head = f"{reader} ({name})" if several_evals else reader
        table[f"{head} exact %"] = [
            _pct(keyed[k].exact_acc, keyed[k].exact_lo, keyed[k].exact_hi, 1) if k in keyed else "–"
            for k in index
        ]
        table[f"{head} CER %"] = [
            _pct(keyed[k].cer, keyed[k].cer_lo, keyed[k].cer_hi, 2) if k in keyed else "–"
            for k in index
        ]
        n = sorted(set(part["n_seeds"]))
        kinds = sorted(set(part["interval"]) - {""})
        n_txt = str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"
        notes.append(
            f"{head}: {n_txt} seed{'s' if n != [1] else ''}, "
            f"interval {' / '.join(_band_words(k) for k in kinds)}"
        )
    return table, notes


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _summary_md(
    paths: list[Path], runs: list[RunInfo], agg: pd.DataFrame, dup_notes: list[str]
) -> str:
    lines = [
        "# attnlab report",
        "",
        f"Aggregated {len(runs)} run(s) under: {', '.join(f'`{p}`' for p in paths)}.",
        "Values are percents: seed mean [interval]. With >= "
        f"{MIN_SEEDS_T} seeds the interval is a 95% t-interval of the mean, otherwise the "
        "min-max over seeds.",
        "",
    ]
    if agg.empty:
        lines += ["No evaluation results were found.", ""]
    for train in sorted(agg["train"].unique(), key=_train_key) if not agg.empty else []:
        table, notes = _summary_table(agg, train)
        evals = ", ".join(sorted(agg.loc[agg["train"] == train, "eval"].unique()))
        lines += [f"## Trained on lengths {train}", "", f"Evaluation: {evals}.", ""]
        lines += [f"- {_md_escape(n)}" for n in notes] + [""]
        lines += [table.to_markdown(index=False), ""]
    for note in dup_notes:
        lines += [f"Note: {_md_escape(note)}", ""]
    bad = [r for r in runs if r.problems]
    lines += ["## Incomplete or failed runs", ""]
    if not bad:
        lines += ["None: every run has a status, metrics and an evaluation.", ""]
    for r in bad:
        lines.append(
            f"- `{r.path}` ({r.reader or '?'}, seed {r.seed}, train {r.train}, {r.status}): "
            + _md_escape("; ".join(r.problems))
        )
    return "\n".join(lines).rstrip() + "\n"


def _duplicate_seed_notes(runs: list[RunInfo]) -> list[str]:
    notes = []
    groups: dict[tuple, list[RunInfo]] = {}
    for r in runs:
        if r.evals:
            groups.setdefault((r.train, r.reader), []).append(r)
    for (train, reader), members in groups.items():
        seeds = [r.seed for r in members]
        dups = sorted({s for s in seeds if s is not None and seeds.count(s) > 1})
        if dups:
            notes.append(
                f"train {train}, {reader}: seed(s) {', '.join(map(str, dups))} appear in more than "
                "one run; such runs are not independent repeats."
            )
    return notes


# --------------------------------------------------------------------------- plots


def _reader_colour(reader: str, readers: list[str]) -> str:
    if reader in READER_COLOURS:
        return READER_COLOURS[reader]
    others = [r for r in readers if r not in READER_COLOURS]
    return _EXTRA_COLOURS[others.index(reader) % len(_EXTRA_COLOURS)] if reader in others else "k"


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


def _mark_seen(ax, lengths: list[int], seen: set[int], label: bool) -> None:
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for is_seen, first, last in _blocks(lengths, seen):
        if is_seen:
            ax.axvspan(first - 0.5, last + 0.5, color="0.85", alpha=0.6, lw=0, zorder=0)
        narrow = last == first and len(lengths) > 8
        if label and (is_seen or not narrow):  # a narrow unseen gap is clear from the shading
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


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _accuracy_figure(agg: pd.DataFrame, train: str, name: str, seen: list[int]) -> bytes:
    sub = agg[(agg["train"] == train) & (agg["eval"] == name) & (agg["length"] != "all")].copy()
    sub["length"] = sub["length"].astype(int)
    lengths = sorted(sub["length"].unique())
    readers = sorted(sub["reader"].unique(), key=_reader_key)
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2)
    specs = [
        (axes[0], "exact_acc", "exact_lo", "exact_hi", "exact accuracy (%)", "Exact accuracy"),
        (axes[1], "cer", "cer_lo", "cer_hi", "CER (%)", "Character error rate"),
    ]
    kinds = set()
    for ax, col, lo, hi, ylabel, title in specs:
        _mark_seen(ax, lengths, set(seen), label=True)
        for reader in readers:
            part = sub[sub["reader"] == reader].sort_values("length")
            colour = _reader_colour(reader, readers)
            n = sorted(set(part["n_seeds"]))
            kinds |= set(part["interval"])
            n_txt = str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"
            ax.plot(
                part["length"],
                100 * part[col],
                marker="o",
                ms=4,
                color=colour,
                label=f"{reader} ({n_txt} seed{'s' if n != [1] else ''})",
            )
            ax.fill_between(
                part["length"], 100 * part[lo], 100 * part[hi], color=colour, alpha=0.2, lw=0
            )
        ax.set_xlabel("string length (digits)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_xticks(lengths)
        ax.set_xlim(min(lengths) - 0.5, max(lengths) + 0.5)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(-2, 108)
    axes[1].set_ylim(bottom=0, top=max(1.0, 100 * float(sub["cer_hi"].max()) * 1.12))
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Patch(color="0.85", alpha=0.6, label="seen lengths"))
    labels.append("seen lengths")
    axes[0].legend(handles, labels, loc="lower left", fontsize=9)
    band = " / ".join(_band_words(k) for k in sorted(kinds - {""}))
    fig.suptitle(f"Trained on lengths {train} · eval {name} · band: {band}")
    fig.tight_layout()
    return _png(fig)


def _read_history(run: RunInfo) -> pd.DataFrame | None:
    path = run.path / "history.csv"
    if not path.is_file():
        return None
    try:
        hist = pd.read_csv(path)
    except (OSError, ValueError):
        run.problems.append("unreadable history.csv")
        return None
    if "step" not in hist.columns:
        run.problems.append("history.csv lacks step")
        return None
    return hist


def _training_figure(train: str, runs: list[RunInfo], hists: dict[Path, pd.DataFrame]) -> bytes:
    readers = sorted({r.reader or "?" for r in runs}, key=_reader_key)
    fig = Figure(figsize=(11, 3.8))
    ax_loss, ax_acc = fig.subplots(1, 2)
    positive = True
    for run in runs:
        hist = hists[run.path]
        colour = _reader_colour(run.reader or "?", readers)
        if "loss" in hist.columns:
            loss = hist[["step", "loss"]].dropna()
            positive &= bool((loss["loss"] > 0).all())
            ax_loss.plot(loss["step"], loss["loss"], color=colour, alpha=0.8, lw=1.2)
        if "val_exact_acc" in hist.columns:
            acc = hist[["step", "val_exact_acc"]].dropna()
            ax_acc.plot(
                acc["step"], 100 * acc["val_exact_acc"], color=colour, alpha=0.8, lw=1.2, marker="."
            )
    if positive:
        ax_loss.set_yscale("log")
    ax_loss.set(xlabel="step", ylabel="training loss", title="Training loss")
    ax_acc.set(xlabel="step", ylabel="validation exact accuracy (%)", title="Validation accuracy")
    ax_acc.set_ylim(-2, 102)
    handles = [Patch(color=_reader_colour(r, readers), label=r) for r in readers]
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(handles=handles, fontsize=9, title="reader (one line per run)")
    fig.suptitle(f"Training curves · trained on lengths {train} · {len(runs)} run(s)")
    fig.tight_layout()
    return _png(fig)


# --------------------------------------------------------------------------- writing


def _write_atomic(path: Path, data: bytes | str) -> None:
    """Write `data` to `path` whole or not at all (temp file in the same dir, then rename)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "x"


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _display_path(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


# --------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
       margin: 0; background: #f6f8fa; line-height: 1.45; }
main { max-width: 1240px; margin: 0 auto; padding: 0 24px 48px; }
header { background: #24292f; color: #fff; padding: 20px 24px; margin-bottom: 24px; }
header h1 { margin: 0 0 6px; font-size: 1.6em; }
header p { margin: 2px 0; color: #d0d7de; font-size: .95em; }
header code { color: #fff; }
h2 { border-bottom: 2px solid #d0d7de; padding-bottom: 4px; margin-top: 36px; }
h3 { margin-bottom: 6px; }
section.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px;
               padding: 12px 20px 16px; margin: 16px 0; }
table { border-collapse: collapse; font-size: .88em; margin: 8px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eaeef2; }
tr:nth-child(even) td { background: #f6f8fa; }
table.summary td { font-variant-numeric: tabular-nums; white-space: nowrap; }
table.summary tr.seen td { background: #eef6ee; }
table.summary tr.total td { font-weight: 600; border-top: 2px solid #8c959f; }
img.plot { max-width: 100%; border: 1px solid #d0d7de; border-radius: 6px; background: #fff; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: .85em;
         color: #fff; background: #6e7781; }
.badge.complete { background: #1a7f37; } .badge.failed { background: #cf222e; }
.badge.running { background: #bf8700; }
.problems { color: #cf222e; }
.muted { color: #57606a; font-size: .9em; }
details { margin: 6px 0; }
summary { cursor: pointer; font-weight: 600; }
details details { margin-left: 18px; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: 8px 12px; overflow-x: auto;
      font-size: .85em; }
.maps { display: flex; flex-wrap: wrap; gap: 8px; margin: 4px 0 10px; }
.maps figure { margin: 0; }
.maps img { max-height: 180px; border: 1px solid #d0d7de; background: #fff; }
.maps figcaption { font-size: .8em; color: #57606a; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.pair > div { min-width: 0; }
.pair p { margin: 4px 0; }
td.nowrap { white-space: nowrap; }
.kind-correct { color: #1a7f37; } .kind-failure { color: #cf222e; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _summary_html(table: pd.DataFrame) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    body = []
    for rec in table.itertuples(index=False):
        classes = [rec.split] + (["total"] if rec.length == "all" else [])
        cells = "".join(f"<td>{_e(v)}</td>" for v in rec)
        body.append(f'<tr class="{_e(" ".join(classes))}">{cells}</tr>')
    return f'<table class="summary"><tr>{head}</tr>{"".join(body)}</table>'


def _runs_html(runs: list[RunInfo]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in [
            "path",
            "reader",
            "seed",
            "train",
            "status",
            "evaluations",
            "overrides",
            "problems",
        ]
    )
    rows = []
    for r in runs:
        badge = f'<span class="badge {_e(r.status)}">{_e(r.status)}</span>'
        if r.step is not None:
            badge += f' <span class="muted">step {_e(r.step)}</span>'
        rows.append(
            "<tr>"
            f'<td class="nowrap"><code>{_e(_display_path(r.path))}</code></td>'
            f"<td>{_e(r.reader or '?')}</td><td>{_e(r.seed)}</td><td>{_e(r.train)}</td>"
            f'<td class="nowrap">{badge}</td>'
            f'<td class="nowrap">{_e(", ".join(r.evals) or "–")}</td>'
            f"<td><code>{_e(' '.join(r.overrides))}</code></td>"
            f'<td class="problems">{_e("; ".join(r.problems))}</td>'
            "</tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _maps_html(run: RunInfo, name: str) -> str:
    folder = run.path / "eval" / name
    parts = []
    summary_png = folder / "attention_summary.png"
    if summary_png.is_file():
        parts.append(
            f'<p class="muted">attention summary</p><img class="plot" alt="attention summary" '
            f'src="{_data_uri(summary_png.read_bytes())}">'
        )
    maps: dict[tuple[int, str], list[tuple[int, Path]]] = {}
    map_dir = folder / "maps"
    if map_dir.is_dir():
        for p in map_dir.iterdir():
            m = _MAP_NAME.match(p.name)
            if m:
                maps.setdefault((int(m.group(1)), m.group(2)), []).append((int(m.group(3)), p))
    if not maps and not parts:
        return ""
    seen = set(run.seen_lengths)
    for length in sorted({k[0] for k in maps}):
        split = "seen" if length in seen else "unseen"
        columns = []
        for kind in ("correct", "failure"):
            files = sorted(maps.get((length, kind), []))
            figs = "".join(
                f'<figure><img alt="{_e(p.name)}" src="{_data_uri(p.read_bytes())}">'
                f"<figcaption>{_e(p.name)}</figcaption></figure>"
                for _, p in files[:MAX_MAPS_SHOWN]
            )
            more = len(files) - MAX_MAPS_SHOWN
            extra = f'<p class="muted">{more} more not shown</p>' if more > 0 else ""
            empty = "" if files else '<p class="muted">none</p>'
            columns.append(
                f'<div><p class="kind-{kind}"><b>{kind}</b> ({len(files)})</p>'
                f'<div class="maps">{figs}</div>{extra}{empty}</div>'
            )
        inner = [f'<div class="pair">{"".join(columns)}</div>']
        n_ok = len(maps.get((length, "correct"), []))
        n_bad = len(maps.get((length, "failure"), []))
        parts.append(
            f"<details><summary>length {length} ({split}): {n_ok} correct, {n_bad} failure"
            f"</summary>{''.join(inner)}</details>"
        )
    return "".join(parts)


def _gallery_html(runs: list[RunInfo]) -> str:
    out = []
    with_evals = [r for r in runs if r.evals]
    if not with_evals:
        return '<p class="muted">No evaluations, so no attention maps.</p>'
    for train in sorted({r.train for r in with_evals}, key=_train_key):
        group = [r for r in with_evals if r.train == train]
        out.append(f"<h3>Trained on lengths {_e(train)}</h3>")
        for reader in sorted({r.reader or "?" for r in group}, key=_reader_key):
            members = [r for r in group if (r.reader or "?") == reader]
            blocks = []
            for run in members:
                for name in run.evals:
                    body = _maps_html(run, name)
                    if not body:
                        continue
                    blocks.append(
                        f"<details><summary>seed {_e(run.seed)} · eval {_e(name)} · "
                        f"<code>{_e(_display_path(run.path))}</code></summary>{body}</details>"
                    )
            if blocks:
                out.append(f"<h4>{_e(reader)} reader</h4>{''.join(blocks)}")
            else:
                why = (
                    "the fixed-context reader has no attention weights"
                    if reader == "fixed"
                    else "no attention maps were found"
                )
                out.append(f'<h4>{_e(reader)} reader</h4><p class="muted">No maps: {_e(why)}.</p>')
    return "".join(out)


def _configs_html(runs: list[RunInfo]) -> str:
    return "".join(
        f"<details><summary><code>{_e(_display_path(r.path))}</code> "
        f'<span class="muted">({_e(r.reader or "?")}, seed {_e(r.seed)}, train {_e(r.train)})'
        f"</span></summary><pre>{_e(r.config_text)}</pre></details>"
        for r in runs
    )


def _index_html(
    paths: list[Path],
    runs: list[RunInfo],
    agg: pd.DataFrame,
    acc_figs: dict[str, list[tuple[str, bytes]]],
    train_figs: dict[str, bytes],
    dup_notes: list[str],
) -> str:
    n_bad = sum(1 for r in runs if r.problems)
    trains = sorted({r.train for r in runs}, key=_train_key)
    readers = sorted({r.reader or "?" for r in runs}, key=_reader_key)
    evals = sorted({e for r in runs for e in r.evals})
    header = (
        "<header><h1>attnlab report</h1>"
        f"<p>{len(runs)} run(s) under {', '.join(f'<code>{_e(p)}</code>' for p in paths)}"
        f" · {len(runs) - n_bad} complete, {n_bad} incomplete or failed</p>"
        f"<p>training lengths: {_e(', '.join(trains))} · readers: {_e(', '.join(readers))}"
        f" · evaluations: {_e(', '.join(evals) or 'none')}</p>"
        f"<p>Bands and brackets: 95% t-interval of the seed mean with ≥ {MIN_SEEDS_T} seeds, "
        f"otherwise min-max over seeds. Generated {_e(datetime.now().strftime('%Y-%m-%d %H:%M'))}."
        "</p></header>"
    )
    body = ["<h2>Accuracy by length</h2>"]
    if agg.empty:
        body.append('<p class="muted">No evaluation results were found.</p>')
    for train in sorted(agg["train"].unique(), key=_train_key) if not agg.empty else []:
        table, notes = _summary_table(agg, train)
        figs = "".join(
            f'<p class="muted">eval {_e(name)}</p>'
            f'<img class="plot" alt="accuracy vs length, train {_e(train)}, eval {_e(name)}" '
            f'src="{_data_uri(png)}">'
            for name, png in acc_figs.get(train, [])
        )
        note_list = "".join(f"<li>{_e(n)}</li>" for n in notes)
        body.append(
            f'<section class="card"><h3>Trained on lengths {_e(train)}</h3>{figs}'
            f'<ul class="muted">{note_list}</ul>'
            f"<details open><summary>Table (percent: mean [interval])</summary>"
            f"{_summary_html(table)}</details></section>"
        )
    body += [f'<p class="muted">Note: {_e(n)}</p>' for n in dup_notes]
    body.append("<h2>Training curves</h2>")
    if not train_figs:
        body.append('<p class="muted">No history.csv found.</p>')
    for train, png in train_figs.items():
        body.append(
            f'<section class="card"><img class="plot" alt="training curves, train {_e(train)}" '
            f'src="{_data_uri(png)}"></section>'
        )
    body.append("<h2>Attention maps</h2>")
    body.append(
        '<p class="muted">Correct readings and failures per run, length and reader '
        f"(at most {MAX_MAPS_SHOWN} of each kind embedded).</p>"
    )
    body.append(f'<section class="card">{_gallery_html(runs)}</section>')
    body.append("<h2>Runs</h2>")
    bad = [r for r in runs if r.problems]
    if bad:
        items = "".join(
            f"<li><code>{_e(_display_path(r.path))}</code> ({_e(r.reader or '?')}, seed "
            f"{_e(r.seed)}): {_e('; '.join(r.problems))}</li>"
            for r in bad
        )
        body.append(
            f'<section class="card"><h3>Incomplete or failed runs ({len(bad)})</h3>'
            f'<ul class="problems">{items}</ul></section>'
        )
    body.append(f'<section class="card">{_runs_html(runs)}</section>')
    body.append(f'<h2>Run configs</h2><section class="card">{_configs_html(runs)}</section>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>attnlab report</title><style>{_CSS}</style></head><body>{header}<main>"
        + "".join(body)
        + "</main></body></html>\n"
    )


def build_report(paths: list[Path], out_dir: Path) -> Path:
    """Write summary.csv, summary.md, plot PNGs and a self-contained index.html into `out_dir`.

    Returns the path of index.html. Raises ReportError when no run is found under `paths`.
    """
    paths = [Path(p) for p in paths]
    runs = discover_runs(paths)
    if not runs:
        raise ReportError(f"no runs found under {', '.join(str(p) for p in paths)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    agg = aggregate(runs)
    seen_of = {r.train: r.seen_lengths for r in runs}
    acc_figs: dict[str, list[tuple[str, bytes]]] = {}
    for train in sorted(agg["train"].unique(), key=_train_key) if not agg.empty else []:
        for name in sorted(agg.loc[agg["train"] == train, "eval"].unique()):
            png = _accuracy_figure(agg, train, name, seen_of.get(train, []))
            _write_atomic(out_dir / f"accuracy_{_slug(train)}_{_slug(name)}.png", png)
            acc_figs.setdefault(train, []).append((name, png))

    hists = {r.path: h for r in runs if (h := _read_history(r)) is not None}
    train_figs: dict[str, bytes] = {}
    for train in sorted({r.train for r in runs}, key=_train_key):
        members = [r for r in runs if r.train == train and r.path in hists]
        if members:
            png = _training_figure(train, members, hists)
            _write_atomic(out_dir / f"training_{_slug(train)}.png", png)
            train_figs[train] = png

    dup_notes = _duplicate_seed_notes(runs)
    _write_atomic(out_dir / "summary.csv", agg.to_csv(index=False))
    _write_atomic(out_dir / "summary.md", _summary_md(paths, runs, agg, dup_notes))
    index = out_dir / "index.html"
    _write_atomic(index, _index_html(paths, runs, agg, acc_figs, train_figs, dup_notes))
    return index
