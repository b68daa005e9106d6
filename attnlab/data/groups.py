"""Which strips belong together: the groups step of the folder-data path.

A source may say, strip by strip, which group (a writer, a scanned document, a pool of
digit images) a strip comes from (``attnlab.data.sources``). The held-out share is then
drawn over whole groups, so no writer is on both sides of the split; without groups every
distinct strip is a group of its own, and the draw is the one it always was. Duplicates
(same decoded image and label: ``attnlab.data.dedup``) follow their group: one strip in two
groups is a contradiction, refused in one line, as is a source where some strips have a
group and others do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnlab.data.dedup import Distinct
from attnlab.errors import UserError


@dataclass
class Units:
    """What the held-out share is drawn over: the source's groups, or its distinct strips."""

    members: list[list[int]]  # per unit: its distinct strips (indices into Distinct.groups)
    names: list[str] | None  # per unit: its group's name; None for a source without groups

    def __len__(self) -> int:
        return len(self.members)


def group_units(entries: list[Any], dist: Distinct, where: str) -> Units:
    """The units of a source: its groups (sorted by name, so a reordered file draws the same
    groups) or, without groups, its distinct strips in order of first sight."""
    named = [e for e in entries if e.group is not None]
    if not named:
        return Units([[c] for c in range(len(dist.groups))], None)
    if len(named) < len(entries):
        first = next(e for e in entries if e.group is None)
        raise UserError(
            f"{first.where}: no group, but {len(named)} of the {len(entries)} strips of {where} "
            f"have one; give every strip a group, or none"
        )
    by_name: dict[str, list[int]] = {}
    for c, members in enumerate(dist.groups):
        head = entries[members[0]]
        for i in members[1:]:
            if entries[i].group != head.group:
                raise UserError(
                    f"{entries[i].where}: the same strip (image and label) as {head.where} is "
                    f"in group {entries[i].group!r} here but {head.group!r} there; a strip "
                    f"belongs to one group: fix one of the groups or drop the copy"
                )
        by_name.setdefault(head.group, []).append(c)
    names = sorted(by_name)
    return Units([by_name[n] for n in names], names)


def group_names(entries: list[Any]) -> set[str]:
    """The groups a list of entries names (empty for a source without groups)."""
    return {e.group for e in entries if e.group is not None}


def shared_groups(train: list[Any], val: list[Any], train_key: str, val_key: str) -> None:
    """Refuse a validation source that shares a group with the training source (one writer
    on both sides), in one line naming how many groups and the first."""
    shared = sorted(group_names(train) & group_names(val))
    if shared:
        raise UserError(
            f"{val_key}: {len(shared)} of its groups are groups of {train_key} too (first: "
            f"{shared[0]!r}); a group is held out whole: give a folder of other groups"
        )
