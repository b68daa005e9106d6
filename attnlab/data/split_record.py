"""What a ``data=folder`` run keeps of its data (``data_split.json`` and the checkpoint:
``TrainingData.split``, made by ``attnlab.data.source_train``) and what a resume compares it
with: ``split_record`` (the source, its held-out ids, the counts and the fingerprints),
``contents_record`` (the run's strips by content, for the checks made after training) and
``split_changes`` (what differs, in words, between the data a run trained on and the data it
would resume on).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.data.dedup import (
    CONTENT,
    KEY,
    KEYS,
    Distinct,
    fingerprint,
    keyed_by,
    pairs_digest,
    split_digest,
)
from attnlab.data.groups import group_names
from attnlab.data.sources import Source
from attnlab.data.split import Split


def split_record(d: Any, source: Source, dist: Distinct, split: Split, seen: list[int], drawn):
    """What the run keeps (data_split.json and the checkpoint): the source, its held-out ids
    and the fingerprints a resume is compared with (``split_changes``). The split (held out
    and training pool) does not depend on ``data.limit``; what was drawn from the pool does
    (``limit``, ``trained``, ``drawn``)."""
    ids = [e.id for e in source.entries]
    held, train = [ids[i] for i in split.held], [ids[i] for i in split.train]
    limit = getattr(d, "limit", None)
    return {
        "source": source.kind,
        "path": str(Path(d.path).resolve()),
        "val_path": str(Path(d.val_path).resolve()) if d.val_path else None,
        "strips": len(source),
        "pool": len(split.train),
        "trained": len(drawn),
        "limit": None if limit is None else int(limit),
        "drawn": split_digest([], [ids[i] for i in drawn]),
        # data.limit: the strips drawn, in the draw's order (a smaller N's are its first N)
        **({"drawn_ids": [ids[i] for i in drawn]} if limit is not None else {}),
        "held_out": held,
        "held_out_copies": [ids[i] for i in split.copies],
        "merged": dist.merged,
        "skipped_long": len(split.long),
        "other_lengths": split.unseen,
        "seen": list(seen),
        KEYS: CONTENT,  # how the image keys below were made (dedup.content_key)
        "fingerprint": fingerprint(source.entries, dist.keys),
        "split_fingerprint": split_digest(held, train),
    }


def contents_record(source, dist, split, drawn, val_cache, val_entries) -> dict[str, Any]:
    """What the run's strips are, by content, for the checks made after training: ``attnlab
    eval RUN`` re-reads its held-out strips and refuses any that changed or is a trained
    strip (``attnlab.data.recorded``); ``init_from`` refuses a held-out set that holds a
    strip, or a group, the starting weights trained on (``attnlab.training.finetune``)."""
    train_groups = sorted({source.entries[i].group for i in drawn} - {None})
    return {
        "groups": len(group_names(source.entries)) or None,
        "held_out_groups": split.held_groups,
        "trained_groups": train_groups if split.held_groups is not None else None,
        "val_groups": sorted(group_names(val_entries)) or None,
        "trained_keys": [dist.keys[i][:KEY] for i in drawn],
        "held_out_keys": [k[:KEY] for k in val_cache.keys],
        "held_out_labels": split_digest([], list(val_cache.labels)),
        # each held-out strip's label by its key, in no order (attnlab.data.recorded)
        "held_out_pairs": pairs_digest([k[:KEY] for k in val_cache.keys], list(val_cache.labels)),
    }


def split_changes(saved: dict[str, Any] | None, now: dict[str, Any]) -> str | None:
    """What differs between the data a run trained on (its checkpoint's ``data_split``) and
    the data it would resume on, in words; None when nothing does. A record of a version
    without fingerprints is compared by its path and held-out ids; one whose image keys were
    made another way (``dedup.keyed_by``) by everything but its images' keys."""
    if not saved:
        return None
    if (saved.get("source"), saved.get("path")) != (now["source"], now["path"]):
        return (
            f"it trained on the {saved.get('source')} {saved.get('path')}, not the "
            f"{now['source']} {now['path']}"
        )
    if saved.get("val_path") != now["val_path"]:
        return f"it validated on data.val_path={saved.get('val_path')}, not {now['val_path']}"
    if saved.get("unlabelled") != now.get("unlabelled"):  # data.unlabelled: other strips
        return "its data.unlabelled strips differ from the ones it self-trained on"
    old, new = saved.get("fingerprint"), now["fingerprint"]
    if old is None:
        return None if saved.get("held_out") == now["held_out"] else "its held-out strips differ"
    where = f"{now['path']} "
    if old["ids"] != new["ids"]:
        diff = new["strips"] - old["strips"]
        if diff:
            return where + f"has {abs(diff)} strip(s) {'added' if diff > 0 else 'removed'} since"
        return where + "lists other strips (same count) since"
    if old["labels"] != new["labels"]:
        return where + "has labels changed in place since"
    same_keys = keyed_by(saved) == keyed_by(now)  # image keys of one kind: comparable
    if same_keys and old["images"] != new["images"]:
        return where + "has images changed in place since"
    if saved.get("split_fingerprint") != now["split_fingerprint"]:
        return where + "splits into other held-out and training strips than it did"
    if saved.get("limit") != now.get("limit"):
        return f"it trained on data.limit={saved.get('limit')} strips, not {now.get('limit')}"
    if saved.get("drawn", now.get("drawn")) != now.get("drawn"):
        return where + "draws other training strips for data.limit than it did"
    if same_keys and saved.get("held_out_keys", now.get("held_out_keys")) != now.get(
        "held_out_keys"
    ):
        return f"{now['val_path'] or now['path']} has other held-out strips (images) than it had"
    return None
