"""The strips a folder-trained run held out, re-read for ``attnlab eval RUN`` and checked
against what the run recorded when it trained (its checkpoint's ``data_split``).

A held-out set is read again from disk, long after training: a strip the run trained on
may have been copied into its ``data.val_path`` since, or a held-out file overwritten by a
trained strip. Either would be evaluated as held-out. So each strip read is compared, by
content (its decoded image's key, ``attnlab.data.dedup.image_key``), with the record: the
held-out strips' keys and labels, and the keys of the strips trained on. A changed set is
refused in one line naming what changed and how many strips; nothing is evaluated. A
record from a version without keys is read as before (its ids only).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from attnlab.data.dedup import image_key, split_digest
from attnlab.data.source_train import KEY
from attnlab.data.sources import StripCache, check_charset, decode_all, open_source
from attnlab.data.strips import StripBatch
from attnlab.errors import UserError


def held_out_path(split: dict[str, Any]) -> str:
    """The path the held-out strips are read from: ``data.val_path`` when the run had one."""
    return split.get("val_path") or split["path"]


def held_out_strips(d: Any, split: dict[str, Any], warn: Any) -> tuple[StripBatch, list[str]]:
    """The strips a folder-trained run held out: all of ``data.val_path`` when it had one,
    else the recorded ids of ``data.path``; each checked against the record."""
    if split.get("val_path"):
        source = open_source(Path(split["val_path"]), warn, "data.val_path")
        check_charset(source, d.charset)
        cache = decode_all(source, d.height, d.crop, warn)
        where = f"data.val_path={split['val_path']}"
        check_recorded(split, _keys(cache), cache.labels, cache.ids, where)
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
    check_recorded(split, _keys(cache), cache.labels, cache.ids, split["path"])
    return cache.batch(range(len(cache))), cache.ids


def _keys(cache: StripCache) -> list[str]:
    return [image_key(im)[:KEY] for im in cache.images]


def check_recorded(
    split: dict[str, Any], keys: list[str], labels: list[str], ids: list[str], where: str
) -> None:
    """Refuse held-out strips that are not the ones the run held out when it trained: any
    that is a strip it trained on, then any other change (strips added, removed, replaced or
    relabelled), in one line naming how many and the first."""
    recorded = split.get("held_out_keys")
    if recorded is None:
        return  # a record of a version without keys: its ids were checked
    trained = set(split.get("trained_keys") or [])
    leaked = [i for i, k in enumerate(keys) if k in trained]
    if leaked:
        raise UserError(
            f"{where}: {len(leaked)} of its {len(keys)} strips now have the image of a strip "
            f"this run trained on (first: {ids[leaked[0]]!r}); they cannot be evaluated as "
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
    if list(recorded) == list(keys) and split.get("held_out_labels") not in (
        None,
        split_digest([], list(labels)),
    ):
        raise UserError(
            f"{where}: the labels of its held-out strips changed since training; restore them, "
            f"or read the folder as it is now with --folder"
        )
