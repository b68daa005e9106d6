"""Strips nobody labelled (``data.unlabelled=DIR``, with ``data=folder``): the pool that
self-training (``attnlab.training.selftrain``) reads and takes labels from.

- DIR is a folder of image files, read at its top level only: every file whose suffix is one
  Pillow reads (``PIL.Image.registered_extensions``; names starting with "." are left out).
  A ``labels.csv`` in it is refused in one line (labelled strips go in ``data.path``: a
  label nobody reads would be a silent skip), and so is any other file or folder, a missing
  folder or one without images.
- Each image goes through the labelled strips' pixel path (``strip_cache.decode_all``: decode,
  then prepare at ``data.height`` with ``data.crop``) and is known by the same content key
  (``dedup.content_key``) the leak checks use.
- A strip whose image is a held-out strip's (``data.val_path``, or the held-out share of
  ``data.path``) is refused in one line: its pseudo-label would train on a strip the run is
  measured on. A strip whose image is a strip trained with its label (of ``data.path``, in
  ``data.limit``'s draw when there is one) is dropped, with a count in the log and the
  record: its own label trains already. The strips of ``data.path`` that ``data.limit`` left
  out are not trained with their labels, so they may come unlabelled: a pool of N labels and
  the unlabelled rest of it is ``data.path=POOL data.limit=N data.unlabelled=IMAGES_OF_POOL``
  (the data-needs curve's third arm). A copy of a strip inside DIR counts once (dropped,
  counted).
- The run's record (``data_split``) keeps the content keys of every unlabelled strip it
  kept (``unlabelled_keys``): all of them count as trained on, whether or not a round took
  their reading, so ``attnlab eval RUN --folder``, ``attnlab eval RUN`` and a fine-tune's
  held-out set refuse them as they refuse trained strips (``attnlab.data.lineage``,
  ``recorded``, ``training.finetune``); and a fingerprint of DIR's strips, so a resume on
  another DIR is refused (``split_record.split_changes``).
- ``Pool.stream(taken, round)`` is the training stream of a round: the labelled training
  strips and the strips taken with their readings as labels, drawn as labelled strips are
  (``SourceStream``: augmentation, ``data.mix``) from a seed of the run's seed and the round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab.data.dedup import KEY, split_digest
from attnlab.data.folder import LABELS, Warn
from attnlab.data.notes import shown
from attnlab.data.sources import Entry, Source
from attnlab.data.strip_cache import StripCache, decode_all
from attnlab.data.strips import StripBatch, set_seed
from attnlab.errors import UserError

log = logging.getLogger("attnlab.train")

WHAT = "data.unlabelled"


def image_suffixes() -> set[str]:
    """The file suffixes Pillow reads (lower case, with the dot)."""
    from PIL import Image

    return {s.lower() for s in Image.registered_extensions()}


def open_unlabelled(path: Path | str) -> Source:
    """The image files of the folder ``path``, as a source whose labels are empty; refused in
    one line: no such folder, a labels.csv, a file or folder that is not an image, no image."""
    path = Path(path)
    where = f"{WHAT}={shown(path)}"
    if not path.is_dir():
        raise UserError(f"{where}: no such folder (give a folder of strip images)")
    if (path / LABELS).exists():
        raise UserError(
            f"{where}: holds {LABELS}; it is for strips nobody labelled: give labelled strips "
            f"as data.path (or move {LABELS} out)"
        )
    suffixes = image_suffixes()
    names = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
    other = [n for n in names if not (path / n).is_file() or Path(n).suffix.lower() not in suffixes]
    if other:
        raise UserError(
            f"{where}: {len(other)} entr{'y' if len(other) == 1 else 'ies'} not an image file "
            f"(first: {other[0]!r}); it must hold strip images only"
        )
    if not names:
        raise UserError(f"{where}: holds no images (give a folder of strip images)")
    return Source("folder", path, [Entry(n, "", f"{shown(path / n)}") for n in names])


@dataclass
class Pool:
    """The unlabelled strips a run may take labels from (distinct, none labelled, none held
    out), and how a round's training stream is made of them."""

    path: Path
    cache: StripCache  # (H, W) strips, labels empty; keys: their content keys
    dropped: int  # strips of data.path (labelled) or copies inside the folder, left out
    train: StripCache  # the labelled training strips
    make: Callable[[StripCache, int], Any]  # (strips, seed) -> a training stream
    seed: int  # the run's seed

    def __len__(self) -> int:
        return len(self.cache)

    @property
    def keys(self) -> list[str]:
        """Each strip's key as records keep it (``KEY`` hex digits)."""
        return [k[:KEY] for k in self.cache.keys or []]

    def strips(self) -> StripBatch:
        return self.cache.batch(range(len(self.cache)))

    def record(self) -> dict[str, Any]:
        """What the run's record keeps of the pool (``data_split``)."""
        named = [f"{i}\0{k}" for i, k in zip(self.cache.ids, self.keys, strict=True)]
        return {
            "unlabelled": {
                "path": str(self.path.resolve()),
                "strips": len(self.cache),
                "dropped": self.dropped,
                "fingerprint": split_digest([], named),  # each strip's file name and image
            },
            "unlabelled_keys": self.keys,
        }

    def stream(self, taken: list[tuple[str, str]], round_: int) -> Any:
        """The training stream of round ``round_``: the labelled training strips and the
        strips of ``taken`` (key, reading) labelled by their readings; round 0 has none."""
        at = {k: i for i, k in enumerate(self.keys)}
        missing = [k for k, _ in taken if k not in at]
        if missing:
            raise UserError(f"{WHAT}={self.path}: no strip of key {missing[0]} (changed since?)")
        idx = [at[k] for k, _ in taken]
        c, t = self.cache, self.train
        strips = StripCache(
            t.images + [c.images[i] for i in idx],
            t.labels + [label for _, label in taken],
            t.ids + [c.ids[i] for i in idx],
            None,
        )
        return self.make(strips, set_seed(self.seed, "train", round_))


def read_pool(
    d: Any,
    labelled: list[str],
    held: list[str],
    train: StripCache,
    make: Callable[[StripCache, int], Any],
    seed: int,
    warn: Warn,
) -> Pool:
    """``data.unlabelled`` read and checked against the labelled strips' content keys
    (``labelled``: the strips trained with their labels; ``held``: the held-out ones)."""
    source = open_unlabelled(d.unlabelled)
    cache = decode_all(source, d.height, d.crop, warn)
    where = f"{WHAT}={d.unlabelled}"
    held_set = set(held)
    bad = [i for i, k in enumerate(cache.keys) if k in held_set]
    if bad:
        raise UserError(
            f"{where}: {len(bad)} of its {len(cache)} strips have the image of a held-out strip "
            f"(first: {cache.ids[bad[0]]!r}); a strip the run is measured on must not be "
            f"trained on: take them out of the folder"
        )
    known, kept = set(labelled), []
    for i, k in enumerate(cache.keys):
        if k not in known:
            kept.append(i)
            known.add(k)
    dropped = len(cache) - len(kept)
    if not kept:
        raise UserError(
            f"{where}: every one of its {len(cache)} strips is a strip trained with its label "
            "(data.path)"
        )
    if dropped:
        warn(
            f"{where}: {dropped} strip(s) trained with their labels (data.path) or repeated "
            "left out"
        )
    log.info("%s: %d unlabelled strips (%d left out)", where, len(kept), dropped)
    return Pool(Path(d.unlabelled), cache.subset(kept), dropped, train, make, seed)
