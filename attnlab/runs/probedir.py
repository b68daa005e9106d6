"""A probe of a run: ``probe/<name>/`` (attnlab.evaluation.probe) with its CSV tables, example
figure and ``probe.json``, written last. Every name of it is spelled here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from attnlab.io import write_json
from attnlab.runs.jsonfiles import from_dict, load_json

PROBE = "probe"
PROBE_META = "probe.json"
PROBE_SUMMARY = "summary.csv"
OCCLUSION = "occlusion.csv"
SWAPS = "swap.csv"
SALIENCY = "saliency.csv"
PROBE_EXAMPLE = "example.png"


@dataclass
class ProbeMeta:
    """probe.json: what a probe read, with which checkpoint; written last."""

    name: str
    reader: str
    seen_lengths: list[int]
    lengths: list[int]
    n_per_length: int  # asked for; summary.csv says how many correct strips each length had
    pool: int  # strips read per length to find them
    checkpoint: str
    step: int  # the training step of the checkpoint it read
    has_weights: bool
    seconds: float  # wall time of the probe
    example: dict[str, Any] = field(default_factory=dict)  # length and strip of example.png
    extra: dict[str, Any] = field(default_factory=dict)


class ProbeDir:
    """One probe of a run: ``probe/<name>/`` with its CSV tables, example.png and probe.json."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    @staticmethod
    def root(run: Path | str) -> Path:
        return Path(run) / PROBE

    @classmethod
    def of_run(cls, run: Path | str) -> list[ProbeDir]:
        """The probes of a run directory (hidden folders are ones being written)."""
        root = cls.root(run)
        if not root.is_dir():
            return []
        return [cls(p) for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def summary(self) -> Path:
        return self.path / PROBE_SUMMARY

    @property
    def occlusion(self) -> Path:
        return self.path / OCCLUSION

    @property
    def swaps(self) -> Path:
        return self.path / SWAPS

    @property
    def saliency(self) -> Path:
        return self.path / SALIENCY

    @property
    def example(self) -> Path:
        return self.path / PROBE_EXAMPLE

    @property
    def meta_file(self) -> Path:
        return self.path / PROBE_META

    def write_meta(self, meta: ProbeMeta) -> None:
        write_json(self.meta_file, asdict(meta))

    def read_meta(self) -> ProbeMeta:
        return from_dict(ProbeMeta, load_json(self.meta_file), PROBE_META)
