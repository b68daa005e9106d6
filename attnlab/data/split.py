"""The split step of the folder-data path: which strips are held out, which trained on.

Decided once, here, over the units of ``attnlab.data.groups`` (the source's groups, or its
distinct strips when it has none), from ``data.eval_seed``; everything downstream asks it:
``data.limit`` draws from ``Split.train`` only, the record lists ``Split.held`` and the
held-out groups, and every copy of a held-out strip is held out with it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.data.dedup import Distinct
from attnlab.data.groups import Units
from attnlab.data.sources import Source
from attnlab.data.strips import set_seed
from attnlab.errors import UserError

log = logging.getLogger("attnlab.train")


def held_out(n: int, share: float, seed: int) -> list[int]:
    """Indices of the held-out share of ``n`` units: the same for every run of a source."""
    if share <= 0:
        return []
    k = min(n - 1, max(1, round(share * n)))
    gen = torch.Generator().manual_seed(set_seed(seed, "held-out", n))
    return sorted(torch.randperm(n, generator=gen)[:k].tolist())


def say_share(share: float, held: int, strips: int, groups: int, of: int) -> None:
    """One warning line when whole groups hold out a share far from ``data.val_share`` (off
    by more than half of it): groups of uneven size, or too few groups to come near it."""
    got = held / strips
    if abs(got - share) <= share / 2:
        return
    log.warning(
        "data.val_share=%g holds out %d of %d strips (%.1f%%), not about %.0f%%: whole groups "
        "are held out (%d of %d) and they differ in size or are too few; choose another "
        "data.eval_seed or data.val_share, or give data.val_path",
        share,
        held,
        strips,
        100 * got,
        100 * share,
        groups,
        of,
    )


@dataclass
class Split:
    held: list[int]  # entries held out: one per distinct strip (what evaluation reads)
    copies: list[int]  # the other copies of held-out strips: never trained on either
    train: list[int]  # entries trained on: one per distinct strip
    long: list[tuple[int, str]]  # (entry, why) too long for the reader
    unseen: int  # distinct strips of other lengths
    held_groups: list[str] | None = None  # the groups held out whole (None: no groups)


def split_source(
    source: Source,
    widths: torch.Tensor,
    dist: Distinct,
    units: Units,
    cfg: Any,
    reader: Any,
    seen: list[int],
) -> Split:
    """The held-out share drawn over units (a source without groups or duplicates keeps the
    draw it always had), all copies of a held-out strip held out, the rest trained on once."""
    d = cfg.data
    clusters = dist.groups
    if units.names is not None and len(units) < 2 and not d.val_path:
        raise UserError(
            f"data.path={d.path}: every strip is in group {units.names[0]!r}; holding out "
            f"whole groups needs two or more (or give data.val_path)"
        )
    picked = [] if d.val_path else held_out(len(units), d.val_share, d.eval_seed)
    held_clusters = sorted(c for u in picked for c in units.members[u])
    if units.names is not None and picked:
        say_share(d.val_share, len(held_clusters), len(clusters), len(picked), len(units))
    held = [clusters[c][0] for c in held_clusters]
    copies = [i for c in held_clusters for i in clusters[c][1:]]
    held_set, wanted = set(held_clusters), set(seen)
    columns = reader.encoder.column_lengths(widths).tolist()
    train, long, unseen = [], [], 0
    for c, members in enumerate(clusters):
        i = members[0]
        if c in held_set:
            continue
        label = source.entries[i].label
        if len(label) not in wanted:
            unseen += 1
            continue
        why = reader.too_long(label, columns[i])
        (long if why else train).append((i, why) if why else i)
    groups = None if units.names is None else [units.names[u] for u in picked]
    return Split(held, copies, train, long, unseen, groups)
