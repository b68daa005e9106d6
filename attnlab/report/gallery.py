"""Evaluation figures on disk -> the gallery of one training range (what the page embeds).

Per reader, per run and evaluation that counts: its diagnostic figures (reliability, where
it stopped, the pace of the alignment), a link to its readings.csv (every strip, failures
included) and, per length, the attention maps of correct readings and failures, at most
`MAX_MAPS_SHOWN` of each embedded (the page stays one file of sensible size). A reader none
of whose evaluations has maps has no attention weights; the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from attnlab.report.aggregate import TrainGroup
from attnlab.report.run_info import RunInfo
from attnlab.report.variants import ordered_variants
from attnlab.runs.evaldir import MAP_KINDS, EvalDir
from attnlab.runs.rundir import RunDir

MAX_MAPS_SHOWN = 4  # attention maps embedded per (run, eval, length, correct|failure)


@dataclass(frozen=True)
class Image:
    name: str
    png: bytes


@dataclass
class MapKind:
    kind: str  # "correct" | "failure"
    total: int
    shown: list[Image]

    @property
    def more(self) -> int:
        return self.total - len(self.shown)


@dataclass
class LengthMaps:
    length: int
    split: str  # seen | unseen
    kinds: list[MapKind]


@dataclass
class EvalMaps:
    run: RunInfo
    eval: str
    summary: Image | None  # the attention summary figure of the evaluation
    lengths: list[LengthMaps]
    figures: list[Image] = field(default_factory=list)  # reliability, stops, pace
    readings: Path | None = None  # readings.csv: every strip, for the failures


@dataclass
class ReaderMaps:
    variant: str  # a variant label (the reader's name when nothing else is swept)
    evals: list[EvalMaps] = field(default_factory=list)  # empty: no attention weights


def _image(path: Path) -> Image | None:
    try:
        return Image(path.name, path.read_bytes())
    except OSError:  # vanished or unreadable since discovery: leave it out
        return None


def _eval_maps(run: RunInfo, ev: EvalDir) -> EvalMaps | None:
    files = ev.map_files()
    summary = _image(ev.attention_summary) if ev.attention_summary.is_file() else None
    figures = [
        img for p in (ev.reliability, ev.stops, ev.pace) if p.is_file() and (img := _image(p))
    ]
    readings = ev.readings if ev.readings.is_file() else None
    if not files and summary is None and not figures and readings is None:
        return None
    lengths = []
    for length in sorted({n for n, _ in files}):
        kinds = []
        for kind in MAP_KINDS:
            paths = files.get((length, kind), [])
            shown = [img for p in paths[:MAX_MAPS_SHOWN] if (img := _image(p)) is not None]
            kinds.append(MapKind(kind, len(paths), shown))
        split = "seen" if length in run.seen_lengths else "unseen"
        lengths.append(LengthMaps(length, split, kinds))
    return EvalMaps(run, ev.name, summary, lengths, figures, readings)


def gallery(group: TrainGroup) -> list[ReaderMaps]:
    """The maps of every variant of `group` that has an evaluation that counts."""
    runs = [r for r in group.runs if r.evals]
    out = []
    for variant in ordered_variants(r.variant or r.reader_name for r in runs):
        entry = ReaderMaps(variant)
        for run in (r for r in runs if (r.variant or r.reader_name) == variant):
            for name in run.evals:
                maps = _eval_maps(run, RunDir(run.path).eval_dir(name))
                if maps is not None:
                    entry.evals.append(maps)
        out.append(entry)
    return out
