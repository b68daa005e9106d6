"""The strips a folder-trained run held out, re-read for ``attnlab eval RUN`` and checked
against what the run recorded when it trained (its checkpoint's ``data_split``).

A held-out set is read again from disk, long after training: a strip the run trained on
may have been copied into its ``data.val_path`` since, or a held-out file overwritten by a
trained strip. Either would be evaluated as held-out. So each strip read is compared, by
content (its decoded image's key, ``attnlab.data.dedup.content_key``, the same however the
strip is read), with the record: the held-out strips' keys and labels, and the keys of the
strips trained on. A record of a version whose keys were of strips as read
(``dedup.image_key``) is checked with keys computed that way (at the run's height, with and
without ``data.crop``: ``legacy_keys``). A changed set is
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

from attnlab.data.dedup import CONTENT, KEY, image_key, keyed_by, pairs_digest, split_digest
from attnlab.data.folder import Warn, warn_stderr
from attnlab.data.lineage import trained_in
from attnlab.data.sources import (
    Source,
    check_charset,
    open_source,
)
from attnlab.data.strip_cache import StripCache, decode_all
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
    cache = held_out_cache(d, split, warn, trained)
    return cache.batch(range(len(cache))), cache.ids


def held_out_cache(
    d: Any, split: dict[str, Any], warn: Any, trained: set[str] | None = None
) -> StripCache:
    """``held_out_strips`` as a ``StripCache`` (with each strip's content key)."""
    if split.get("val_path"):
        source = open_source(Path(split["val_path"]), warn, "data.val_path")
        check_charset(source, d.charset)
        cache = decode_all(source, d.height, d.crop, warn)
        where = f"data.val_path={split['val_path']}"
        known = identities(source, cache, d.height, _read(split, trained))
        keys = _keys(cache, split)
        check_recorded(split, keys, cache.labels, cache.ids, where, trained, known)
        return cache
    source = open_source(Path(split["path"]), warn)
    where = {e.id: i for i, e in enumerate(source.entries)}
    missing = [s for s in split["held_out"] if s not in where]
    if missing:
        raise UserError(
            f"{split['path']}: {len(missing)} held-out strip(s) of this run are no longer "
            f"listed (first: {missing[0]!r}); evaluate with --folder instead"
        )
    only = [where[s] for s in split["held_out"]]
    cache = decode_all(source, d.height, d.crop, warn, only=only)
    known = identities(source, cache, d.height, _read(split, trained), only)
    keys = _keys(cache, split)
    check_recorded(split, keys, cache.labels, cache.ids, split["path"], trained, known)
    return cache


def _keys(cache: StripCache, split: dict[str, Any]) -> list[str]:
    """The strips' keys as ``split`` (a run's record) keeps its held-out keys: content keys,
    or for a record of an older version keys of the strips as read (the run's own reading,
    which ``cache`` is)."""
    if keyed_by(split) == CONTENT:
        return [k[:KEY] for k in cache.keys]
    return [image_key(im)[:KEY] for im in cache.images]


def _read(split: dict[str, Any], trained: Any) -> bool:
    """Whether the run's record or a record behind its weights holds keys of strips as read."""
    own = "trained_keys" in split and keyed_by(split) != CONTENT
    return own or bool(getattr(trained, "read", False))


def identities(
    source: Source, cache: StripCache, height: int, read: bool, only: list[int] | None = None
) -> list[set[str]]:
    """Per strip read: every key a training record may know it by: its content key, and
    with ``read`` its keys as read (``legacy_keys``, decoded again only then)."""
    known = [{k[:KEY]} for k in cache.keys]
    if read:
        for keys, legacy in zip(known, legacy_keys(source, height, only), strict=True):
            keys |= legacy
    return known


def check_recorded(
    split: dict[str, Any],
    keys: list[str],
    labels: list[str],
    ids: list[str],
    where: str,
    trained: set[str] | None = None,
    known: list[set[str]] | None = None,
) -> None:
    """Refuse held-out strips that are not the ones the run held out when it trained: any
    that is a strip it trained on, then any other change (strips added, removed, replaced or
    relabelled), in one line naming how many and the first. ``known``: per strip, every key
    a training record may know it by (``identities``; else its key in ``keys``)."""
    recorded = split.get("held_out_keys")
    if recorded is None:
        return  # a record of a version without keys: its ids were checked
    trained = set(trained_in(split)) | set(trained or ())  # data.unlabelled's strips too
    known = known if known is not None else [{k} for k in keys]
    leaked = [i for i, k in enumerate(known) if k & trained]
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
    folder: str | Path, d: Any, crop: bool, **how: Any
) -> tuple[StripBatch, list[str]]:
    """Every strip of ``folder`` (a folder, list file or LMDB: ``attnlab eval RUN --folder``)
    and their ids: the one loader of a labelled folder as a whole, read at ``d.height`` with
    its labels checked against ``d.charset``, ``crop`` as in ``folder.load_image`` and
    ``allow_outside`` as in ``folder.read_labels``. Refused in one line when any is a strip
    the run's weights were trained on (``trained``: their keys, ancestors included; compared
    by content, however either read them): an evaluation of trained strips reads recall,
    not reading."""
    cache = folder_cache(folder, d, crop, **how)  # allow_outside, trained, warn
    return cache.batch(range(len(cache))), cache.ids


def folder_cache(
    folder: str | Path,
    d: Any,
    crop: bool,
    allow_outside: bool = False,
    trained: set[str] | None = None,
    warn: Warn = warn_stderr,
) -> StripCache:
    """``folder_strips`` as a ``StripCache`` (with each strip's content key)."""
    source = open_source(Path(folder), warn, "eval.folder", allow_outside)
    check_charset(source, d.charset)
    cache = decode_all(source, d.height, crop, warn)
    if trained:
        known = identities(source, cache, d.height, bool(getattr(trained, "read", False)))
        hits = [i for i, k in enumerate(known) if k & trained]
        if hits:
            raise UserError(
                f"eval.folder={folder}: {len(hits)} of its {len(cache)} strips were trained on "
                f"by this run's weights (first: {cache.ids[hits[0]]!r}); scores on them would "
                f"be filed as a test of reading: evaluate on strips it never trained on (attnlab "
                f"eval RUN reads its held-out strips)"
            )
    return cache


def legacy_keys(source: Source, height: int, only: list[int] | None = None) -> list[set[str]]:
    """Per strip of ``source`` (or those at ``only``): its keys as records written before
    content keys hold them (``dedup.image_key`` of the strip as read, ``KEY`` hex digits),
    at ``height`` both with and without ``data.crop``, the two ways a run could have read
    it (a fine-tuned run reads at its source's height). Warnings are not repeated."""
    out: list[set[str]] = [set() for _ in (only if only is not None else source.entries)]
    for crop in (False, True):
        cache = decode_all(source, height, crop, lambda m: None, only)
        for keys, im in zip(out, cache.images, strict=True):
            keys.add(image_key(im)[:KEY])
    return out


def held_out_read_keys(split: dict[str, Any], height: int) -> list[set[str]]:
    """Per held-out strip of a run's record (``split``, in the order of its
    ``held_out_keys``): its keys as an older attnlab recorded strips (read at ``height``,
    with and without ``data.crop``), to compare with a training record of that version."""
    quiet: Warn = lambda m: None  # noqa: E731 (the run's own reading said it all)
    if split.get("val_path"):
        return legacy_keys(open_source(Path(split["val_path"]), quiet), height)
    source = open_source(Path(split["path"]), quiet)
    where = {e.id: i for i, e in enumerate(source.entries)}
    return legacy_keys(source, height, [where[s] for s in split["held_out"]])
