"""The strips a folder-trained run held out, re-read for ``attnlab eval RUN`` and checked
against what the run recorded when it trained (its checkpoint's ``data_split``).

A held-out set is read again from disk, long after training: a strip the run trained on
may have been copied into its ``data.val_path`` since, or a held-out file overwritten by a
trained strip. Either would be evaluated as held-out. So each strip read is compared, by
content (its decoded image's key, ``attnlab.data.dedup.image_key``), with the record: the
held-out strips' keys and labels, and the keys of the strips trained on. A changed set is
refused in one line naming what changed and how many strips; nothing is evaluated. A
record from a version without keys is read as before (its ids only). Strips are compared
by identity (image key), never by their place in the file: a reordered labels.csv reads
the same, a relabelled strip does not. "Trained on" covers the runs a fine-tuned run
started from (``attnlab.data.lineage``), and ``attnlab eval RUN --folder`` refuses a
folder holding strips the run's weights were trained on (``folder_strips``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from attnlab.data.dedup import image_key, pairs_digest, split_digest
from attnlab.data.source_train import KEY
from attnlab.data.sources import StripCache, check_charset, decode_all, open_source
from attnlab.data.strips import StripBatch
from attnlab.errors import UserError


def held_out_path(split: dict[str, Any]) -> str:
    """The path the held-out strips are read from: ``data.val_path`` when the run had one."""
    return split.get("val_path") or split["path"]


def held_out_strips(
    d: Any, split: dict[str, Any], warn: Any, trained: set[str] | None = None
) -> tuple[StripBatch, list[str]]:
    """The strips a folder-trained run held out: all of ``data.val_path`` when it had one,
    else the recorded ids of ``data.path``; each checked against the record. ``trained``:
    the keys of every strip behind the run's weights (``lineage.trained_keys``), when known
    (else the record's own ``trained_keys``)."""
    if split.get("val_path"):
        source = open_source(Path(split["val_path"]), warn, "data.val_path")
        check_charset(source, d.charset)
        cache = decode_all(source, d.height, d.crop, warn)
        where = f"data.val_path={split['val_path']}"
        check_recorded(split, _keys(cache), cache.labels, cache.ids, where, trained)
        return cache.batch(range(len(cache))), cache.ids
    source = open_source(Path(split["path"]), warn)
    where = {e.id: i for i, e in enumerate(source.entries)}
    missing = [s for s in split["held_out"] if s not in where]
    if missing:
        raise UserError(
            f"{split['path']}: {len(missing)} held-out strip(s) of this run are no longer "
            f"listed (first: {missing[0]!r}); evaluate with --folder instead"
        )
    cache = decode_all(source, d.height, d.crop, warn, only=[where[s] for s in split["held_out"]])
    check_recorded(split, _keys(cache), cache.labels, cache.ids, split["path"], trained)
    return cache.batch(range(len(cache))), cache.ids


def _keys(cache: StripCache) -> list[str]:
    return [image_key(im)[:KEY] for im in cache.images]


def check_recorded(
    split: dict[str, Any],
    keys: list[str],
    labels: list[str],
    ids: list[str],
    where: str,
    trained: set[str] | None = None,
) -> None:
    """Refuse held-out strips that are not the ones the run held out when it trained: any
    that is a strip it trained on, then any other change (strips added, removed, replaced or
    relabelled), in one line naming how many and the first."""
    recorded = split.get("held_out_keys")
    if recorded is None:
        return  # a record of a version without keys: its ids were checked
    trained = set(split.get("trained_keys") or []) | set(trained or ())
    leaked = [i for i, k in enumerate(keys) if k in trained]
    if leaked:
        raise UserError(
            f"{where}: {len(leaked)} of its {len(keys)} strips now have the image of a strip "
            f"this run's weights were trained on (first: {ids[leaked[0]]!r}; a run it was "
            f"fine-tuned from counts too); they cannot be evaluated as "
            f"held-out: restore the held-out strips, or read other strips with --folder"
        )
    was, now = Counter(recorded), Counter(keys)
    if was != now:
        added, gone = sum((now - was).values()), sum((was - now).values())
        first = next((ids[i] for i, k in enumerate(keys) if k not in was), None)
        raise UserError(
            f"{where}: its held-out strips changed since training ({added} strip(s) not "
            f"held out then, {gone} of the {len(recorded)} held out then missing"
            + (f"; first new: {first!r}" if first else "")
            + "); restore them, or read the folder as it is now with --folder"
        )
    if relabelled(split, keys, labels):
        raise UserError(
            f"{where}: the labels of its held-out strips changed since training; restore them, "
            f"or read the folder as it is now with --folder"
        )


def relabelled(split: dict[str, Any], keys: list[str], labels: list[str]) -> bool:
    """Whether the held-out strips (``keys``, the same strips as recorded, in any order) now
    carry other labels than when the run trained: each strip's label compared with its own,
    by image key, never by its line in the file."""
    if "held_out_pairs" in split:
        return split["held_out_pairs"] != pairs_digest(keys, labels)
    recorded = split.get("held_out_labels")
    if recorded is None:
        return False
    # a record of a version without pairs: its labels in its strips' order, matched by key
    now: dict[str, list[str]] = {}
    for k, label in zip(keys, labels, strict=True):
        now.setdefault(k, []).append(label)
    ordered = [now[k].pop(0) for k in split["held_out_keys"]]
    return split_digest([], ordered) != recorded


def folder_strips(
    folder: str, d: Any, crop: bool, allow_outside: bool, trained: set[str] | None, warn: Any
) -> tuple[StripBatch, list[str]]:
    """Every strip of ``folder`` (a folder, list file or LMDB: ``attnlab eval RUN --folder``)
    and their ids. Refused in one line when any is a strip the run's weights were trained on
    (``trained``: their keys, ancestors included; compared as the run decoded them, with its
    ``data.crop``): an evaluation of trained strips reads recall, not reading."""
    source = open_source(Path(folder), warn, "eval.folder", allow_outside)
    check_charset(source, d.charset)
    cache = decode_all(source, d.height, crop, warn)
    if trained:
        same = bool(crop) == bool(d.crop)
        keyed = cache if same else decode_all(source, d.height, d.crop, lambda m: None)
        hits = [i for i, k in enumerate(_keys(keyed)) if k in trained]
        if hits:
            raise UserError(
                f"eval.folder={folder}: {len(hits)} of its {len(cache)} strips were trained on "
                f"by this run's weights (first: {cache.ids[hits[0]]!r}); scores on them would "
                f"be filed as a test of reading: evaluate on strips it never trained on (attnlab "
                f"eval RUN reads its held-out strips)"
            )
    return cache.batch(range(len(cache))), cache.ids
