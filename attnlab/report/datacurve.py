"""The data-needs curve's table: each arm against scratch, and what unlabelled strips add, at
each ``data.limit``.

When ``data.limit`` (strips trained on) is swept together with the arms of the curve, the
swept-number plot (``report.swept``) draws the curve on a log axis, one line per variant with
its seed band. The arms: scratch (``init_from=null``, nothing frozen, no ``data.unlabelled``),
runs started from a trained reader (``init_from=RUN``, any ``train.freeze``) and runs given
the rest of the pool unlabelled (``data.unlabelled``: self-training), alone or together.
This module writes the numbers beside the plot: for every training range, evaluation and N,
the paired difference (``report.compare``: strip by strip, seeds paired, 95% bootstrap
interval) of every other arm against the scratch variant of the same reader and the same
other keys (``data.mix``, ...) at that N; and of an arm with unlabelled strips against the
same arm without them, what the unlabelled strips add. Pairs are only formed from
evaluations that read the same strips (``compare`` refuses the others; its reason becomes a
note). Rows: every length and the seen and unseen totals, in ``data_needs.csv``; the page and
summary.md show the seen total and the longest seen length.
"""

from __future__ import annotations

import pandas as pd

from attnlab.evaluation.metrics import METRIC, TOTAL
from attnlab.report.aggregate import TrainGroup
from attnlab.report.compare import COLUMNS as COMPARE_COLUMNS
from attnlab.report.compare import Side, compare, sides
from attnlab.report.run_info import RunInfo
from attnlab.report.same_strips import CompareRefused
from attnlab.report.tables import Row, SummaryTable, md_escape, points_text

DATA_NEEDS_CSV = "data_needs.csv"
LIMIT = "data.limit"  # the swept number of training strips
SOURCE = "init_from"  # what a variant started from; "null" = scratch
UNLABELLED = "data.unlabelled"  # strips nobody labelled (self-training); "null" = none
FREEZE = "train.freeze"
SCRATCH = "null"
UNFROZEN = "[]"
# What makes an arm of the curve, and each key's value in the scratch arm (a key a report's
# runs all share is not among their swept keys: it counts as this value).
ARM = {SOURCE: SCRATCH, FREEZE: UNFROZEN, UNLABELLED: SCRATCH}
COLUMNS = ["limit", *COMPARE_COLUMNS]
HEADING = "How many strips: each arm against scratch at each N"
METHOD = (
    "Each arm (started from a trained reader, init_from; given the rest of the pool "
    "unlabelled, data.unlabelled; or both) against the scratch variant (init_from=null, "
    "nothing frozen, no unlabelled strips, every other key equal) trained on the same number "
    "of labelled strips (data.limit), and an arm with unlabelled strips against the same arm "
    "without them: the paired difference A - B on the same held-out strips, 95% bootstrap "
    "interval over seed pairs and strips (as Paired differences)."
)


def _arm(swept: dict[str, str]) -> dict[str, str]:
    """A variant's arm: its value of each arm key (the scratch value where not swept)."""
    return {k: swept.get(k, v) for k, v in ARM.items()}


def is_scratch(swept: dict[str, str]) -> bool:
    """Is a variant (its swept keys) of the scratch arm."""
    return _arm(swept) == ARM


def _twin(candidate: dict[str, str], of: dict[str, str], arm: dict[str, str]) -> bool:
    """Is ``candidate`` (a variant's swept keys) the variant of arm ``arm`` with every other
    swept key (data.limit included) as in ``of``."""
    if _arm(candidate) != arm:
        return False
    keys = (set(candidate) | set(of)) - set(ARM)
    return all(candidate.get(k) == of.get(k) for k in keys)


def _match(by_variant: dict[str, Side], first: RunInfo, arm: dict[str, str]) -> str | None:
    """The one variant of ``first``'s reader in arm ``arm`` with every other swept key as
    ``first`` has it; None when there is none (or more than one)."""
    found = [
        v
        for v, s in by_variant.items()
        if s.runs[0].reader_name == first.reader_name and _twin(s.runs[0].swept, first.swept, arm)
    ]
    return found[0] if len(found) == 1 else None


def _pairs(by_variant: dict[str, Side]) -> list[tuple[str, str | None]]:
    """(A, B or None) of one evaluation: every variant of an arm other than scratch against
    its scratch variant (None when there is none), and one with unlabelled strips also
    against the same arm without them, where that is not the scratch variant itself."""
    out = []
    for label, side in by_variant.items():
        first = side.runs[0]
        if first.swept.get(LIMIT, "null") == "null" or is_scratch(first.swept):
            continue  # no count of strips (the whole pool), or a scratch variant itself
        out.append((label, _match(by_variant, first, ARM)))
        without = {**_arm(first.swept), UNLABELLED: SCRATCH}
        twin = _match(by_variant, first, without) if without != _arm(first.swept) else None
        if without != ARM and twin is not None:
            out.append((label, twin))
    return out


def data_needs(groups: list[TrainGroup]) -> tuple[pd.DataFrame, list[str]]:
    """data_needs.csv rows of every training range and evaluation with ``data.limit`` swept,
    and one note per started-from variant that could not be paired (and why)."""
    frames, notes = [], []
    for group in groups:
        for name in group.evals:
            by_variant = sides(group.runs, name)
            # an evaluation only started-from runs have (the synthetic test sets: forgetting)
            # has no scratch side by design: not a note
            any_scratch = any(is_scratch(s.runs[0].swept) for s in by_variant.values())
            for a, b in _pairs(by_variant):
                if b is None and any_scratch:
                    notes.append(
                        f"train {group.train}, eval {name}: {a}: no scratch variant "
                        "(init_from=null, no data.unlabelled, same other keys) to pair it with"
                    )
                if b is None:
                    continue
                try:
                    rows = compare(group.train, name, group.seen, by_variant[a], by_variant[b])
                except CompareRefused as err:
                    notes.append(f"train {group.train}, eval {name}: {a} - {b}: {err}")
                    continue
                rows.insert(0, "limit", int(float(by_variant[a].runs[0].swept[LIMIT])))
                frames.append(rows)
    if not frames:
        return pd.DataFrame(columns=COLUMNS), notes
    frame = pd.concat(frames, ignore_index=True)
    return frame.sort_values(["train", "eval", "limit"], kind="stable", ignore_index=True), notes


def _without_limit(label: str) -> str:
    """A variant's label with its ``data.limit=N`` taken out (the table's rows give N)."""
    reader, sep, rest = label.partition(" · ")
    keys = [k for k in rest.split(", ") if not k.startswith(f"{LIMIT}=")] if sep else []
    return f"{reader} · {', '.join(keys)}" if keys else reader


def data_needs_tables(frame: pd.DataFrame, seen_top: dict[str, int]) -> list[SummaryTable]:
    """One table per training range and evaluation: per N and pair (A against B), their
    exact accuracy on the seen lengths and at the longest seen length (``seen_top``: training
    range -> that length), with the paired difference."""
    pct = METRIC["exact_acc"]
    tables = []
    for (train, name), part in frame.groupby(["train", "eval"], sort=False):
        top = seen_top.get(str(train))
        columns = [
            "N",
            "A",
            "B",
            "B exact seen %",
            "A exact seen %",
            "A - B seen (pp) [95%]",
            f"B exact at {top} %",
            f"A exact at {top} %",
            f"A - B at {top} (pp) [95%]",
            "seed pairs",
        ]
        table = SummaryTable(str(train), [str(name)], columns)
        table.notes.append(f"eval {name}: each arm against scratch, at each N")
        for (limit, a, b), cells in part.groupby(["limit", "a", "b"], sort=True):
            seen = cells[(cells["length"].astype(str) == TOTAL) & (cells["split"] == "seen")]
            at = cells[cells["length"].astype(str) == str(top)]
            if seen.empty:
                continue
            s = seen.iloc[0]
            row = [str(limit), _without_limit(str(a)), _without_limit(str(b)), *_cells(s, pct)]
            row += ["–", "–", "–"] if at.empty else _cells(at.iloc[0], pct)
            table.rows.append(Row([*row, str(s["n_pairs"])], "seen", False))
        tables.append(table)
    return tables


def _cells(r: pd.Series, pct) -> list[str]:
    """B's and A's exact accuracy, then A - B with its interval."""
    diff = points_text(r["exact_diff"], r["exact_diff_lo"], r["exact_diff_hi"], pct)
    return [pct.fmt(r["exact_b"]), pct.fmt(r["exact_a"]), diff]


SECTION = "How many strips"  # the page's heading begins so (templates/compare.html.j2)


def left_out(groups: list[TrainGroup], drawn: bool) -> str | None:
    """Why the data-needs section is not drawn (``drawn``: it has a table or a note) though
    ``data.limit`` is swept; None when it is drawn or not wanted. The section pairs runs
    of the other arms (``init_from``, ``data.unlabelled``) with scratch runs at each N, so a
    ``data.limit`` sweep needs both."""
    runs = [r for g in groups for r in g.runs if r.evals]
    limits = {r.swept.get(LIMIT, "null") for r in runs} - {"null"}
    if drawn or not limits:
        return None
    arms = [r for r in runs if not is_scratch(r.swept)]
    if not arms:
        return (
            f"{LIMIT} is swept ({len(limits)} value(s)) but no run started from a trained "
            f"reader or was given unlabelled strips, so there is nothing to set against "
            f"scratch at each N: sweep {SOURCE}=null,RUN (or {UNLABELLED}=null,DIR) with it "
            f'(README, "How many strips do I need?")'
        )
    return (
        f"{LIMIT} is swept and {len(arms)} run(s) started from a trained reader or were given "
        f"unlabelled strips, but no scratch run ({SOURCE}=null, no {UNLABELLED}) was "
        f"evaluated with them to pair them with: sweep {SOURCE}=null too"
    )


def data_needs_markdown(tables: list[SummaryTable], notes: list[str]) -> list[str]:
    """summary.md's lines for the data-needs tables (report.datacurve); none without them."""
    if not tables and not notes:
        return []
    lines = [f"## {HEADING}", ""]
    lines += [md_escape(METHOD) + f" The numbers are in {DATA_NEEDS_CSV}.", ""]
    for table in tables:
        lines += [f"### Trained on lengths {table.train}: {md_escape(table.notes[0])}", ""]
        lines += [table.markdown(), ""]
    lines += [f"- not paired: {md_escape(n)}" for n in notes]
    return lines + ([""] if notes else [])
