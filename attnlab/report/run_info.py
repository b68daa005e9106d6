"""`RunInfo`: what the report knows about one run directory, the record its modules read.

``report.discover`` fills it from the run's files (config, status, metrics, history),
``report.run_evals`` with the evaluations that count, ``report.variants.assign_variants``
with the variant it is a seed of. Its `problems` say why it is incomplete; a problem that
ends in `UNSOUND` leaves it out of every aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab.report.budgets import Spent
from attnlab.report.reader_styles import UNKNOWN
from attnlab.runs.evaldir import EvalMeta

# A run with one of these problems is left out of every aggregate, not only the evaluation
# it concerns: its files cannot be trusted.
UNSOUND = ": the run is left out of every aggregate"


@dataclass
class RunInfo:
    """What the report knows about one run directory; `problems` says why it is incomplete."""

    path: Path
    reader: str | None = None
    seed: int | None = None
    train: str = "?"  # lengths_label of the seen lengths: "1-8", "2,4,6"; "?" when unknown
    seen_lengths: list[int] = field(default_factory=list)
    # a RunStatus value, "stale" (running but no process holds it) or "unknown" (no status)
    status: str = "unknown"
    evals: list[str] = field(default_factory=list)  # evaluations that count (complete, current)
    problems: list[str] = field(default_factory=list)
    step: int | None = None
    best_step: int | None = None  # metrics.json best.step: the checkpoint evaluations must read
    sweep: Path | None = None  # the sweep directory (holding multirun.yaml) for multirun jobs
    # train.threads: the CPU threads it trained with (runs record the number since the sweep
    # ran jobs side by side; 0 = torch's default, in older runs). A neutral key, shown only.
    threads: int | None = None
    device: str | None = None  # metrics.json: where it trained, with the GPU it was given
    drawn_by: str | None = None  # metrics.json: a digest of its package versions and glyph bank
    glyph_bank: str | None = None  # metrics.json: its glyph bank's digest (attnlab.runs.drawn)
    drawn_record: Any = field(default=None, repr=False, compare=False)  # drawn_by as read
    config_text: str = field(default="", repr=False)
    overrides: list[str] = field(default_factory=list)
    eval_tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)
    eval_meta: dict[str, EvalMeta] = field(default_factory=dict, repr=False, compare=False)
    history: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    # metrics.json: its budget (minutes, steps) and what it spent (report.budgets)
    spent: Spent | None = field(default=None, compare=False)
    # Set by attnlab.report.variants.assign_variants: the variant this run is a seed of.
    variant: str = ""  # its label: the reader, then the keys swept within its reader
    variant_id: str = ""  # a hash of the config keys that count
    swept: dict[str, str] = field(default_factory=dict)  # key -> value, as in the label
    duplicate_of: Path | None = None  # another run with the same config and seed

    @property
    def complete(self) -> bool:
        return not self.problems

    @property
    def unsound(self) -> bool:
        """A file of the run cannot be trusted: it counts in no aggregate (evaluations, probes)."""
        return any(p.endswith(UNSOUND) for p in self.problems)

    @property
    def reader_name(self) -> str:
        return self.reader or UNKNOWN
