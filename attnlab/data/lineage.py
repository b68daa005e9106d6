"""What a reader's weights were trained on, through every ``init_from`` that led to them.

A run records the labelled strips it trained on (its ``data_split``: the image keys of its
training strips and their groups, ``attnlab.data.split_record``). A run fine-tuned from
another inherits what that one learned, and so on up the chain: C fine-tuned from B,
fine-tuned from A, has read A's strips too. So a run started with ``init_from`` carries, in
its ``init_from`` record (``trained_on``), the training records of its source and of every
run before it. The checks that keep a trained strip out of a held-out set
(``attnlab.training.finetune.check_leak``, ``attnlab eval RUN`` and ``attnlab eval RUN
--folder``) read them all (``lineage``), never the last link alone. A record names how
its keys were made (``dedup.KEYS``); one of an older attnlab holds keys of its strips as
read (``read_keys``), which the checks compute too.
"""

from __future__ import annotations

from typing import Any

from attnlab.data.dedup import CONTENT, KEYS, keyed_by

# What a leak check needs of a run's record: its keys and groups (and, for a record of a
# version without keys, its path and held-out ids)
# (and data.unlabelled's strips: every one counts as trained on, attnlab.data.unlabelled)
KEPT = ("path", "val_path", "held_out", "held_out_copies", "trained_keys", "trained_groups", KEYS)
KEPT += ("unlabelled_keys",)


def _trimmed(split: dict[str, Any], checkpoint: str) -> dict[str, Any]:
    return {"checkpoint": checkpoint, **{k: split[k] for k in KEPT if k in split}}


def carried(data_split: dict[str, Any] | None, init_from: dict[str, Any] | None, path: str):
    """What a run started from the checkpoint at ``path`` (with this ``data_split`` and
    ``init_from`` record) carries: its training record, then those of every run before it."""
    own = [_trimmed(data_split, path)] if data_split else []
    return own + list((init_from or {}).get("trained_on") or [])


def lineage(data_split: dict[str, Any] | None, init_from: dict[str, Any] | None):
    """Every training record behind a run's weights: its own first, then its ancestors'."""
    return carried(data_split, init_from, "this run")


class TrainedKeys(frozenset):
    """The image keys of the strips behind a run's weights; ``read``: some of them are keys
    of strips as read (``read_keys``), to be compared with keys computed that way too."""

    read: bool = False


def trained_keys(data_split: dict[str, Any] | None, init_from: dict[str, Any] | None):
    """The image keys of every strip a run's weights were trained on, ancestors included
    (a ``TrainedKeys``); None when no record of the chain has keys (synthetic strips, or an
    older version)."""
    records = [r for r in lineage(data_split, init_from) if "trained_keys" in r]
    if not records:
        return None
    keys = TrainedKeys(k for r in records for k in trained_in(r))
    keys.read = read_keys(records)
    return keys


def read_keys(records: list[dict[str, Any]]) -> bool:
    """Whether any of these training records holds keys of its strips as read (an older
    attnlab's ``dedup.image_key``), not content keys: a check then computes those too."""
    return any("trained_keys" in r and keyed_by(r) != CONTENT for r in records)


def trained_in(record: dict[str, Any]) -> list[str]:
    """The image keys one training record counts as trained on: its training strips' and
    (data.unlabelled) every unlabelled strip's, pseudo-labelled or not."""
    return list(record.get("trained_keys") or []) + list(record.get("unlabelled_keys") or [])
