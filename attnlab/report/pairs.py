"""Which variants the report pairs, in every training range and evaluation.

Unasked (`default_pairs`): the baseline reader against every variant of another reader, and
the variants of one reader each against its neighbour in one swept key. Asked
(``attnlab report --compare A B``, ``attnlab.compare``): the two variants named
(``report.choose``), wherever both were evaluated. `comparisons` gathers the paired
differences (``report.compare``) of every such pair, with one line on each pair that could
not be paired, or on why nothing is.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from attnlab.report.aggregate import TrainGroup
from attnlab.report.choose import parse_choice, resolve
from attnlab.report.compare import COLUMNS, Side, compare, sides
from attnlab.report.discover import ReportError
from attnlab.report.reader_styles import baseline, ordered
from attnlab.report.same_strips import CompareRefused
from attnlab.report.variants import ordered_variants

MAX_WITHIN = 6  # a reader with more variants (a sweeper's study) is compared only on request


def _swept(side: Side) -> dict[str, str]:
    return side.runs[0].swept


def _cross_pairs(variants: dict[str, Side], reference: str) -> list[tuple[str, str]]:
    """The reference reader's variant against every variant of another reader, matched on
    the swept keys when the reference has several."""
    base = [v for v, s in variants.items() if s.runs[0].reader_name == reference]
    pairs = []
    for label, side in variants.items():
        if side.runs[0].reader_name == reference or not base:
            continue
        swept = _swept(side)
        match = [v for v in base if _swept(variants[v]) == swept]
        if len(base) == 1:
            match = base
        if len(match) == 1:
            pairs.append((match[0], label))
    return pairs


def _within_pairs(labels: list[str], variants: dict[str, Side]) -> list[tuple[str, str]]:
    """Variants of one reader, in order: each against the one before it that differs from
    it in exactly one swept key (16 -> 64 -> 256 of a width: A the later, B the earlier)."""
    pairs = []
    for i, a in enumerate(labels):
        sa = _swept(variants[a])
        for b in reversed(labels[:i]):
            sb = _swept(variants[b])
            if sum(sa.get(k) != sb.get(k) for k in {*sa, *sb}) == 1:
                pairs.append((a, b))
                break
    return pairs


def default_pairs(
    variants: dict[str, Side], baseline: str | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(A, B) pairs the report compares unasked, and why nothing is paired when nothing is.

    Across readers: the baseline reader (the first reader present, in registry order, when
    the baseline is not in the report) against every variant of another reader. Within a
    reader with 2 to `MAX_WITHIN` variants: each variant against its neighbour in one
    swept key."""
    readers = ordered(s.runs[0].reader_name for s in variants.values())
    if not readers:
        return [], []
    reference = baseline if baseline in readers else readers[0]
    pairs = _cross_pairs(variants, reference)
    notes = []
    for reader in readers:
        mine = ordered_variants(v for v, s in variants.items() if s.runs[0].reader_name == reader)
        if len(mine) > MAX_WITHIN:
            notes.append(
                f"{reader} has {len(mine)} variants, too many to pair each unasked: "
                "name two with attnlab report --compare A B"
            )
        elif len(mine) > 1:
            pairs += _within_pairs(mine, variants)
    if not pairs and not notes:
        only = next(iter(variants))
        notes.append(
            f"only {only} was evaluated here: nothing to pair it with (paired differences "
            "need two readers, or two variants of one reader, read on the same strips)"
            if len(variants) == 1
            else f"no two of {'; '.join(variants)} differ in one thing only: name two "
            "with attnlab report --compare A B"
        )
    return pairs, notes


def comparisons(
    groups: list[TrainGroup],
    chosen: tuple[str, str] | None = None,
    warn: Callable[[str], object] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Paired differences of every training range and evaluation: the default pairs (the
    baseline reader, or the first reader there, against every other reader; the variants of
    one reader against each other: default_pairs), or only `chosen` (A, B). Returns
    the rows and one line each on why a pair cannot be paired or nothing is paired (for
    `chosen`, also said through `warn`). A chosen pair that does not exist, names one
    variant twice, or can be paired in no evaluation is a ReportError."""
    frames, notes = [], []
    labels = ordered_variants(r.variant for g in groups for r in g.runs if r.evals)
    trains = None
    if chosen is not None:
        try:
            resolved = (resolve(chosen[0], labels), resolve(chosen[1], labels))
        except CompareRefused as err:
            raise ReportError(str(err)) from err
        if resolved[0] == resolved[1]:
            raise ReportError(
                f"--compare {chosen[0]!r} {chosen[1]!r}: both name the variant {resolved[0]!r}; "
                "name two different variants"
            )
        named = {parse_choice(c)[0] for c in chosen} - {None}
        trains = named or None  # "train 1-8 · ..." as the sweep prints it: that range only
        chosen = resolved
    for group in groups:
        if trains is not None and group.train not in trains:
            continue
        for name in group.evals:
            by_variant = sides(group.runs, name)
            if chosen is None:
                pairs, why = default_pairs(by_variant, baseline())
                notes += [f"train {group.train}, eval {name}: {w}" for w in why]
            else:
                pairs = [chosen] if all(v in by_variant for v in chosen) else []
            for a, b in pairs:
                try:
                    frames.append(
                        compare(group.train, name, group.seen, by_variant[a], by_variant[b])
                    )
                except CompareRefused as err:
                    notes.append(f"train {group.train}, eval {name}: {a} - {b}: {err}")
    if chosen is not None and not frames:
        if notes:  # every evaluation they share was refused: the first reason
            raise ReportError(f"--compare: {notes[0]}")
        raise ReportError(
            f"--compare {chosen[0]!r} {chosen[1]!r}: these variants were never evaluated on "
            "the same training range and evaluation"
        )
    for note in notes if chosen is not None and warn is not None else []:
        warn(f"--compare: skipped {note}")
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    return rows, notes
