"""Duplicates, overlaps and fingerprints of a source's decoded strips.

A strip is known by its content: a hash of its image as the file stores it, decoded
(``content_key``: the grey array of ``attnlab.data.pixels.decode``, with its shape, before
any of attnlab's reading steps: inversion, ``data.crop``, resizing to ``data.height``) and
its label. So a strip has one identity however it is read: a run reading at 64 px or with
``data.crop=false`` knows the strips of a run that read them at 32 px with the crop. Two rows
naming one file (``./a.png`` and ``a.png``, an in-folder symbolic link) decode to the same
array, so content also finds every path written two ways; byte copies under two names, a
copy re-encoded losslessly (PNG to BMP or TIFF), repeated list lines and repeated LMDB
records too. Each distinct strip is counted once in the split, so no copy of a held-out
strip is trained on.

Records written before content keys (no ``KEYS`` field: ``keyed_by``) hold ``image_key``s,
of the strip as read (after inversion, crop and resize); those are still checked, with keys
computed the old way (``attnlab.data.recorded.legacy_keys``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.errors import UserError

SHOWN = 80  # characters of a label quoted in an error


def short(label: str) -> str:
    """A label as quoted in one-line errors: at most SHOWN characters of it."""
    return repr(label if len(label) <= SHOWN else label[:SHOWN] + "…")


KEY = 16  # hex digits of a strip's image key kept in a run's record (64 bits)

# A record's field naming how its image keys were made; its value for ``content_key``. A
# record without it holds ``image_key``s (an older attnlab).
KEYS, CONTENT = "image_keys", "content"


def content_key(grey: np.ndarray) -> str:
    """A decoded image (``pixels.decode``: (H, W) float32 grey, before inversion, crop and
    resize) -> a hash of its shape and samples (32 hex digits): a strip's identity, whatever
    height, crop or polarity it is read with."""
    a = np.ascontiguousarray(grey, dtype=np.float32)
    h = hashlib.sha256(f"{CONTENT}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()[:32]


def keyed_by(record: dict[str, Any]) -> str:
    """How a record's image keys were made: ``CONTENT``, or "read" for ``image_key``s."""
    return str(record.get(KEYS) or "read")


def image_key(image: Any) -> str:
    """(H, W) uint8 tensor of a strip as read -> a hash of its shape and pixels (32 hex
    digits): the key of records written before ``content_key`` (it changes with the height
    and crop a strip is read with)."""
    a = image.numpy()
    h = hashlib.sha256(str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()[:32]


@dataclass
class Distinct:
    keys: list[str]  # per entry: its image's key
    groups: list[list[int]]  # per distinct strip, in order of first sight: its entries

    @property
    def merged(self) -> int:
        return sum(len(g) - 1 for g in self.groups)


def find_duplicates(entries: list[Any], keys: list[str], warn: Callable[[str], None]):
    """Group entries by content (``keys``: each entry's ``content_key``); one warning line
    says how many copies were merged. The same image under two labels is a contradiction,
    refused in one line."""
    group_of: dict[str, int] = {}
    groups: list[list[int]] = []
    for i, (e, k) in enumerate(zip(entries, keys, strict=True)):
        g = group_of.get(k)
        if g is None:
            group_of[k] = len(groups)
            groups.append([i])
            continue
        first = entries[groups[g][0]]
        if first.label != e.label:
            raise UserError(
                f"{e.where}: the same image as {first.where} is labelled {short(e.label)} "
                f"here but {short(first.label)} there; fix one of the labels"
            )
        groups[g].append(i)
    got = Distinct(keys, groups)
    if got.merged:
        g = next(g for g in groups if len(g) > 1)
        warn(
            f"{got.merged} duplicate strip(s) (same image and label) merged, each distinct strip "
            f"counted once; first: {entries[g[1]].where} repeats {entries[g[0]].where}"
        )
    return got


def overlap(train_keys: list[str], val_keys: list[str]) -> int:
    """How many strips of a validation set have an image among the training strips'."""
    known = set(train_keys)
    return sum(1 for k in val_keys if k in known)


def _digest(parts: list[str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:16]


def fingerprint(entries: list[Any], keys: list[str]) -> dict[str, Any]:
    """What a run trained on, to compare on resume: the strips' ids, labels (with their
    groups, when the source has groups) and images."""
    return {
        "strips": len(entries),
        "ids": _digest([e.id for e in entries]),
        "labels": _digest([f"{e.id}\0{e.label}" + _group(e) for e in entries]),
        "images": _digest([f"{e.id}\0{k}" for e, k in zip(entries, keys, strict=True)]),
    }


def _group(entry: Any) -> str:
    """A strip's group as the fingerprint reads it: nothing without one (the digests of a
    source without groups are the ones they always were)."""
    group = getattr(entry, "group", None)
    return "" if group is None else f"\0{group}"


def pairs_digest(keys: list[str], labels: list[str]) -> str:
    """A set of strips and their labels as one digest, in no order: each strip's image key
    with its own label, sorted (a reordered file gives the same, a relabelled strip not)."""
    return _digest(sorted(f"{k}\0{label}" for k, label in zip(keys, labels, strict=True)))


def split_digest(held: list[str], train: list[str]) -> str:
    """The split as one digest: held-out ids, then training ids."""
    return _digest(["held", *held, "train", *train])
