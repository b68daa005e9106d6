"""What each variant costs, beside what it scores: its parameters by part and its forward
MFLOP per strip at the longest length it was trained on, computed from a run's config
(``attnlab.evaluation.cost_count.variant_cost``: the reader built and counted, once per
variant), joined to summary.csv; and the ``cost/cost.csv`` of any run that has one
(``attnlab cost RUN``), read as any other table.

Torch is imported only here, lazily, when there is a variant to count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from attnlab.report.cost_files import COST_CSV, COST_DIR
from attnlab.report.run_info import RunInfo

COLUMNS = ["params_encoder", "params_decoder", "params_output", "params", "mflop", "cost_length"]
SHOWN = {  # cost.csv columns the page and summary.md show, and their headings
    "reader": "reader",
    "length": "digits",
    "params": "parameters",
    "flops": "MFLOP",
    "flops_per_pair": "MFLOP per pair",
    "read_b1_ms": "read ms (b1)",
    "read_b64_ms": "read ms (b64)",
    "train_ms": "train ms",
    "mem_peak_mib": "step MiB",
}


@dataclass
class CostView:
    variants: pd.DataFrame  # one row per variant: COLUMNS
    measured: pd.DataFrame  # the runs' cost.csv rows (run, variant and the SHOWN columns)
    notes: list[str]  # variants whose cost could not be counted, and why

    def markdown(self) -> list[str]:
        """summary.md's section (none when there is nothing to show)."""
        lines = []
        if not self.variants.empty:
            lines += ["## What each variant costs", ""]
            lines += [
                "Parameters by part and forward MFLOP per strip (teacher forcing) at "
                "`cost_length` digits, the longest seen; counted from each variant's config.",
                "",
                _shown(self.variants).to_markdown(index=False),
                "",
            ]
            lines += [f"- not counted: {n}" for n in self.notes] + ([""] if self.notes else [])
        if not self.measured.empty:
            lines += ["## Measured cost by length (attnlab cost RUN)", ""]
            lines += [_shown(self.measured).to_markdown(index=False), ""]
        return lines

    def html(self) -> dict[str, str]:
        """Title -> an HTML table, for the page's cost section."""
        out = {}
        if not self.variants.empty:
            out["What each variant costs"] = _shown(self.variants).to_html(
                index=False, classes="summary", border=0
            )
        if not self.measured.empty:
            out["Measured cost by length"] = _shown(self.measured).to_html(
                index=False, classes="summary", border=0
            )
        return out


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    shown = frame.rename(columns=SHOWN)
    for col in shown:
        if col.startswith("MFLOP") or col == "mflop":
            shown[col] = shown[col].map(lambda v: "-" if pd.isna(v) else f"{v:.3f}")
        elif col.endswith(" ms (b1)") or col.endswith(" ms (b64)") or col.endswith("ms"):
            shown[col] = shown[col].map(lambda v: "-" if pd.isna(v) else f"{v:.3f}")
        elif col.startswith("params") or col in ("parameters", "digits", "cost_length"):
            shown[col] = shown[col].map(lambda v: "-" if pd.isna(v) else f"{int(v)}")  # counts
    return shown


def variant_costs(runs: list[RunInfo]) -> tuple[pd.DataFrame, list[str]]:
    """One row per variant (its first run's config): COLUMNS, with train and variant; and
    a line for each variant whose config could not be built here, with why."""
    from omegaconf import OmegaConf

    rows, seen, notes = [], set(), []
    for run in runs:
        key = (run.train, run.variant)
        if not run.variant or key in seen or not run.config_text or not run.seen_lengths:
            continue
        seen.add(key)
        try:
            cfg = OmegaConf.create(run.config_text)
            length = max(run.seen_lengths)
            cost = _variant_cost(cfg, length)
        except Exception as err:  # a config no reader here builds: said, not a crash
            why = str(err).splitlines()[0] if str(err) else type(err).__name__
            notes.append(f"train {run.train}, {run.variant} ({run.path}): {why}")
            continue
        rows.append({"train": run.train, "variant": run.variant, **cost, "cost_length": length})
    return pd.DataFrame(rows, columns=["train", "variant", *COLUMNS]), notes


def _variant_cost(cfg: Any, length: int) -> dict[str, float]:
    from attnlab.evaluation.cost_count import variant_cost

    return variant_cost(cfg, length)


def with_cost(agg: pd.DataFrame, variants: pd.DataFrame) -> pd.DataFrame:
    """summary.csv's rows with their variant's cost columns (empty where not counted)."""
    if variants.empty:
        return agg.reindex(columns=[*agg.columns, *COLUMNS])
    return agg.merge(variants, on=["train", "variant"], how="left")


def measured(runs: list[RunInfo]) -> pd.DataFrame:
    """The cost.csv of every run that has one, tagged with the run and its variant."""
    frames = []
    for run in runs:
        path = run.path / COST_DIR / COST_CSV
        if not path.is_file():
            continue
        frame = pd.read_csv(path, dtype={"reader": str})
        frame.insert(0, "variant", run.variant)
        frames.append(frame[["variant", *[c for c in SHOWN if c in frame]]])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def cost_view(runs: list[RunInfo]) -> CostView:
    variants, notes = variant_costs(runs)
    return CostView(variants, measured(runs), notes)
