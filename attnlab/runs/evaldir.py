"""One evaluation's directory (``RUN/eval/<name>/``): its file names, ``eval.json``
(``EvalMeta``, written last, with the digests of its tables) and the attention maps.
The run directory (``attnlab.runs.rundir``) lists them; the layout is drawn there."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from attnlab.io import file_digest, write_json
from attnlab.runs.jsonfiles import from_dict, load_json

# Files of one evaluation (eval/<name>/); eval.json is written last and marks it complete.
TABLE_CSV = "metrics_by_length.csv"
TABLE_MD = "metrics_by_length.md"
READINGS = "readings.csv"
# EvalMeta.extra key: file name -> sha256 of the CSV tables as the evaluation wrote them
DIGESTS = "digests"
STRIP_PRINTS = "strips"  # EvalMeta.extra key: length -> fingerprint of the strips read
# EvalMeta.extra key: "content" where STRIP_PRINTS are of labelled strips' content keys and
# labels (attnlab.data.dedup), however they were read; absent: of the strips' pixels
STRIPS_BY = "strips_by"
THRESHOLDS = "thresholds.csv"
RELIABILITY = "reliability.png"
STOPS = "stops.png"
PACE = "pace.png"
EVAL_META = "eval.json"
MAPS = "maps"
ATTENTION_SUMMARY = "attention_summary.png"
EXPLORE = "explore.json"  # the report explorer's sample of strips (attnlab.evaluation.explore)
MAP_KINDS = ("correct", "failure")
_MAP_NAME = re.compile(r"^len(\d+)_(correct|failure)_(\d+)\.png$")


@dataclass
class EvalMeta:
    """eval.json: what an evaluation read, with which checkpoint; written last.

    ``extra[STRIP_PRINTS]`` maps each length to a fingerprint of the strips read there: two
    evaluations are paired strip by strip only where these are equal (report.same_strips).
    """

    name: str
    source: str  # synthetic | folder
    decoding: str  # greedy | beam<K>
    reader: str
    seen_lengths: list[int]
    lengths: list[int]
    checkpoint: str
    step: int  # the training step of the checkpoint it read
    folder: str | None = None
    n_per_length: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class EvalDir:
    """One evaluation: ``eval/<name>/`` with its tables, maps and eval.json (written last)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def table_csv(self) -> Path:
        return self.path / TABLE_CSV

    @property
    def table_md(self) -> Path:
        return self.path / TABLE_MD

    @property
    def meta_file(self) -> Path:
        return self.path / EVAL_META

    @property
    def readings(self) -> Path:
        return self.path / READINGS

    @property
    def thresholds(self) -> Path:
        return self.path / THRESHOLDS

    @property
    def reliability(self) -> Path:
        return self.path / RELIABILITY

    @property
    def stops(self) -> Path:
        return self.path / STOPS

    @property
    def pace(self) -> Path:
        return self.path / PACE

    @property
    def maps(self) -> Path:
        return self.path / MAPS

    @property
    def attention_summary(self) -> Path:
        return self.path / ATTENTION_SUMMARY

    @property
    def explore(self) -> Path:
        return self.path / EXPLORE

    def map_path(self, length: int, kind: str, index: int) -> Path:
        if kind not in MAP_KINDS:
            raise ValueError(f"map kind must be one of {MAP_KINDS}, got {kind!r}")
        return self.maps / f"len{length:02d}_{kind}_{index}.png"

    def head_map_path(self, length: int, kind: str, index: int) -> Path:
        """Per-head maps of a reader with several attention heads, beside its maps."""
        return self.map_path(length, kind, index).with_name(
            f"heads_len{length:02d}_{kind}_{index}.png"
        )

    def map_files(self) -> dict[tuple[int, str], list[Path]]:
        """(length, kind) -> map PNGs in index order."""
        found: dict[tuple[int, str], list[tuple[int, Path]]] = {}
        if self.maps.is_dir():
            for p in self.maps.iterdir():
                m = _MAP_NAME.match(p.name)
                if m:
                    key = (int(m.group(1)), m.group(2))
                    found.setdefault(key, []).append((int(m.group(3)), p))
        return {k: [p for _, p in sorted(v)] for k, v in found.items()}

    def write_meta(self, meta: EvalMeta) -> None:
        """eval.json, written last, with the sha256 of the two CSV tables (per length, and
        readings) as they are now (``extra[DIGESTS]``): a table edited by hand afterwards is
        found (``changed_files``) instead of disagreeing with the other in one report."""
        digests = {p.name: file_digest(p) for p in (self.table_csv, self.readings) if p.is_file()}
        write_json(self.meta_file, asdict(replace(meta, extra={**meta.extra, DIGESTS: digests})))

    def changed_files(self, meta: EvalMeta) -> list[str]:
        """The tables whose bytes are not those eval.json recorded (edited after the
        evaluation wrote them). An evaluation written before the digests were recorded has
        none to compare: [] (it is read as before)."""
        recorded = (meta.extra or {}).get(DIGESTS)
        if not isinstance(recorded, dict):
            return []
        return [
            name
            for name, digest in sorted(recorded.items())
            if not (self.path / name).is_file() or file_digest(self.path / name) != digest
        ]

    def read_meta(self) -> EvalMeta:
        return from_dict(EvalMeta, load_json(self.meta_file), EVAL_META)
