"""Probe files on disk -> the report's "Does attention cause the reading?" section.

Reads each run's ``probe/<name>/summary.csv`` and ``probe.json`` (written by ``attnlab
probe``) and averages them over seeds: every number shown comes from those files. With one
seed a cell's interval is the probe's own 95% bootstrap interval over strips; with more it
is the seed band of the rest of the report (min-max, or a t-interval from `MIN_SEEDS_T`
seeds). The sentences are generated from the numbers, and nothing here names a reader: what
a reader lacks (attention weights: no attended glyph, no saliency) is a column of NaNs.

The metric declarations live with the computations (``attnlab.evaluation.probe_summary``);
they are imported only when there are probes to show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from attnlab.evaluation.metrics import TOTAL
from attnlab.io import csv_text
from attnlab.io.folders import PARTIAL
from attnlab.report.aggregate import (
    TrainGroup,
    band_words,
    interval_kind,
    length_key,
    seed_band,
    seeds_text,
)
from attnlab.report.run_evals import current_meta
from attnlab.report.variants import variant_key
from attnlab.runs.probedir import ProbeDir

KEYS = ["train", "reader", "variant", "probe", "length", "split"]
# The columns of the page's tables (summary.csv of a probe, and probes.csv, have them all).
SHOWN = (
    "drop_attended",
    "drop_true",
    "drop_random",
    "drop_random_before",
    "drop_random_after",
    "excess",
    "excess_true",
    "flip_attended",
    "flip_true",
    "swap_only",
    "spearman",
)
BOOTSTRAP = "bootstrap"  # the interval of a single seed: the probe's own, over strips


def _metrics():
    from attnlab.evaluation.probe_summary import PROBE_METRICS, SUMMARY_COLUMNS

    return PROBE_METRICS, SUMMARY_COLUMNS


@dataclass
class ProbeTable:
    reader: str
    probe: str
    columns: list[str]
    rows: list[list[str]]
    splits: list[tuple[str, bool]]  # (split, is a total) per row, for the row's style
    note: str


@dataclass
class ProbeExample:
    reader: str
    caption: str
    png: bytes


@dataclass
class ProbeSection:
    """The probes of one training range: tables per reader, sentences, example figures."""

    train: str
    tables: list[ProbeTable] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    examples: list[ProbeExample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # probes that do not count, and why


def _read_probe(pd_dir: ProbeDir, best_step: int | None):
    """(summary rows, meta) of a probe that counts, or why it does not count."""
    meta = current_meta(pd_dir, best_step)
    if isinstance(meta, str):
        return meta
    try:
        table = pd.read_csv(pd_dir.summary, dtype={"length": str, "split": str})
    except (OSError, ValueError) as exc:
        return f"unreadable {pd_dir.summary.name}: {exc}"
    missing = [c for c in _metrics()[1] if c not in table.columns]
    if missing:
        return f"{pd_dir.summary.name} lacks {', '.join(missing)}"
    return table, meta


def probe_frame(group: TrainGroup) -> tuple[pd.DataFrame, list[str], dict]:
    """One row per (run, probe, summary row), the problems of probes that do not count, and
    the example figure of each (reader, probe) from its first run that has one."""
    rows, notes, examples = [], [], {}
    for run in (r for r in group.runs if not r.unsound):  # its problems say why
        for partial in ProbeDir.root(run.path).glob(f".*{PARTIAL}"):
            name = partial.name.removeprefix(".").removesuffix(PARTIAL)
            notes.append(f"{run.path}: probe/{name}: partial (being written or killed)")
        for pdir in ProbeDir.of_run(run.path):
            result = _read_probe(pdir, run.best_step)
            if isinstance(result, str):
                notes.append(f"{run.path}: probe/{pdir.name}: {result}")
                continue
            table, meta = result
            variant = run.variant or run.reader_name
            key = (variant, pdir.name)
            if key not in examples and pdir.example.is_file():
                where = f"length {meta.example.get('length')}, strip {meta.example.get('strip')}"
                caption = f"{variant}, seed {run.seed}, probe {pdir.name}: {where}"
                examples[key] = (caption, pdir.example)
            for rec in table.to_dict("records"):
                length = TOTAL if str(rec["length"]).strip() == TOTAL else int(rec["length"])
                rows.append(
                    {
                        "train": group.train,
                        "reader": run.reader_name,
                        "variant": variant,
                        "probe": pdir.name,
                        **rec,
                        "length": length,
                        "seed": run.seed,
                        "seconds": meta.seconds,
                    }
                )
    return pd.DataFrame(rows), notes, examples


def aggregate_probes(long: pd.DataFrame) -> pd.DataFrame:
    """Per (train, reader, probe, length, split): seeds, strips and every metric's seed mean
    with its interval (one seed: the probe's bootstrap interval; more: the seed band)."""
    metrics, _ = _metrics()
    out = []
    for keys, grp in long.groupby(KEYS, sort=False):
        row = {**dict(zip(KEYS, keys, strict=True)), "n_seeds": len(grp)}
        row["n_strips"] = int(grp["n_strips"].sum())
        row["interval"] = BOOTSTRAP if len(grp) == 1 else interval_kind(len(grp))
        for m in metrics:
            values = pd.to_numeric(grp[m.name], errors="coerce").dropna().to_numpy(dtype=float)
            lo_c, hi_c = m.interval
            if len(grp) == 1:
                value, lo, hi = (float(grp.iloc[0][c]) for c in (m.name, lo_c, hi_c))
            else:
                value, lo, hi = seed_band(values, m)
            row.update({m.name: value, lo_c: lo, hi_c: hi})
        out.append(row)
    agg = pd.DataFrame(out)
    if agg.empty:
        return agg
    order = sorted(
        range(len(agg)),
        key=lambda i: (
            variant_key(agg.at[i, "variant"]),
            agg.at[i, "probe"],
            length_key(agg.at[i, "length"]),
            agg.at[i, "split"] != "seen",
        ),
    )
    return agg.iloc[order].reset_index(drop=True)


def _cell(row: pd.Series | dict, name: str) -> str:
    metric = {m.name: m for m in _metrics()[0]}[name]
    lo, hi = metric.interval
    return metric.fmt(row[name], row[lo], row[hi])


def _has(row, name: str) -> bool:
    value = row.get(name)
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def sentence(reader: str, probe: str, row: dict) -> str:
    """What the numbers of one split say, in words made from those numbers."""
    where = f"{reader} ({probe}, {row['split']} lengths, {row['n_strips']} strips)"
    glyph = "the attended glyph" if _has(row, "drop_attended") else "the step's own glyph"
    drop, excess, flip = (
        ("drop_attended", "excess", "flip_attended")
        if _has(row, "drop_attended")
        else ("drop_true", "excess_true", "flip_true")
    )
    parts = [f"occluding {glyph} lowers the read digit's probability by {_cell(row, drop)}"]
    if _has(row, "drop_random"):
        parts[0] += f" on average, a random glyph by {_cell(row, 'drop_random')}"
        parts[0] += f" (a difference of {_cell(row, excess)})"
    if _has(row, "drop_random_before") and _has(row, "drop_random_after"):
        parts[0] += (
            f"; a random glyph before the step, whose removal moves the step's glyph up a "
            f"place, by {_cell(row, 'drop_random_before')}, one after it by "
            f"{_cell(row, 'drop_random_after')}"
        )
    if _has(row, flip):
        parts.append(f"it changes the freely read digit at {_cell(row, flip)} % of steps")
    if _has(row, "swap_only"):
        parts.append(
            f"a swapped glyph changes the reading at its own step and nowhere else in "
            f"{_cell(row, 'swap_only')} % of swaps"
        )
    if _has(row, "spearman"):
        parts.append(
            f"attention and gradient x input rank the columns with a Spearman correlation of "
            f"{_cell(row, 'spearman')}"
        )
    return f"{where}: " + "; ".join(parts) + "."


def _table(reader: str, probe: str, part: pd.DataFrame) -> ProbeTable:
    metrics = {m.name: m for m in _metrics()[0]}
    shown = [n for n in SHOWN if part[n].notna().any()]
    if "excess" in shown:  # with an attended glyph, its excess is the headline
        shown.remove("excess_true")
    columns = ["length", "split", "strips"] + [
        metrics[n].heading.replace(" [95% CI]", "") for n in shown
    ]
    rows, splits = [], []
    for rec in part.to_dict("records"):
        cells = [str(rec["length"]), rec["split"], str(rec["n_strips"])]
        rows.append(cells + [_cell(rec, n) for n in shown])
        splits.append((rec["split"], rec["length"] == TOTAL))
    kinds = sorted(set(part["interval"]))
    words = [
        "95% bootstrap interval over strips" if k == BOOTSTRAP else band_words(k) for k in kinds
    ]
    note = (
        f"{reader} ({probe}): {seeds_text(list(part['n_seeds']))}; value [interval]: "
        f"{' / '.join(words)}"
    )
    return ProbeTable(reader, probe, columns, rows, splits, note)


def probe_section(group: TrainGroup) -> tuple[ProbeSection, pd.DataFrame]:
    """The section of one training range, and its aggregate rows (for probes.csv)."""
    section = ProbeSection(group.train)
    long, section.notes, examples = probe_frame(group)
    if long.empty:
        return section, pd.DataFrame()
    agg = aggregate_probes(long)
    for reader, probe in dict.fromkeys(zip(agg["variant"], agg["probe"], strict=True)):
        part = agg[(agg["variant"] == reader) & (agg["probe"] == probe)]
        section.tables.append(_table(reader, probe, part))
        for rec in part[(part["length"] == TOTAL) & (part["n_strips"] > 0)].to_dict("records"):
            section.sentences.append(sentence(reader, probe, rec))
        if (reader, probe) in examples:
            caption, path = examples[(reader, probe)]
            try:
                section.examples.append(ProbeExample(reader, caption, path.read_bytes()))
            except OSError:  # vanished since it was found: left out
                pass
    return section, agg


def probes_markdown(sections: list[ProbeSection]) -> list[str]:
    """summary.md's lines about the probes (none when no run has one)."""
    if not any(s.tables or s.notes for s in sections):
        return []
    lines = ["## Does attention cause the reading?", ""]
    for s in sections:
        if not (s.tables or s.notes):
            continue
        lines += [f"### Trained on lengths {s.train}", ""]
        for t in s.tables:
            frame = pd.DataFrame(t.rows, columns=t.columns)
            lines += [f"- {t.note}", "", frame.to_markdown(index=False), ""]
        lines += [f"- {x}" for x in s.sentences] + ([""] if s.sentences else [])
        lines += [f"- not counted: {n}" for n in s.notes] + ([""] if s.notes else [])
    return lines


def probes_csv(frames: list[pd.DataFrame]) -> str | None:
    """probes.csv of the report: every aggregate row, or None when there is none."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return None
    return csv_text(pd.concat(frames, ignore_index=True))
