"""Training on labelled strips (``data=folder``): the folder-data path, one step after the
other, each with its owner: source -> entries (``sources.read_source``) -> duplicates
(``dedup``) -> groups (``groups``) -> split (``split``) -> limit (``limit``) -> cache; the
training stream and the validation sets, all built before a run writes anything.

- The held-out share (``data.val_share`` of ``data.path``'s groups or strips, drawn from
  ``data.eval_seed``) is never trained on; ``TrainingData.split`` lists its ids, groups and
  image keys, and the run keeps that record (``RunDir.split_file`` and the checkpoint), so
  ``attnlab eval RUN`` tests on those strips (``recorded``) and ``init_from`` knows them.
- Training strips are the other strips of the seen lengths (``data.train_lengths``); a
  label the reader cannot be trained on (``Reader.too_long``) is refused in one line unless
  ``data.skip_long`` skips it (counted in the log and the record).
- ``SourceStream`` draws batches from the decoded cache with the training augmentation and
  ``data.mix`` synthetic strips; its state is the generator's after the batches handed out,
  so a resumed run draws what it would have. Drawing a batch from the cache is cheap (the
  decoding was done once); preparing it one batch ahead in a worker thread (``prefetch``)
  halved the attention reader's strips/s on 2 cores (950 against 1,960: the worker's torch
  ops and the step's compete for the same two threads), so it is off by default.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnlab.data.augment import jpeg, shading, slant, vary_strips, warp
from attnlab.data.dedup import (
    CONTENT,
    KEY,
    KEYS,
    Distinct,
    find_duplicates,
    fingerprint,
    keyed_by,
    overlap,
    pairs_digest,
    short,
    split_digest,
)
from attnlab.data.groups import group_names, group_units, shared_groups
from attnlab.data.limit import draw
from attnlab.data.photo import vary_ink, vary_pixels
from attnlab.data.ranges import uniform
from attnlab.data.sources import (
    Source,
    StripCache,
    read_source,
)
from attnlab.data.split import Split, split_source
from attnlab.data.strips import StripBatch, StripSynth, pad_strips
from attnlab.errors import UserError

log = logging.getLogger("attnlab.train")


def augment_real(batch: StripBatch, d: Any, gen: torch.Generator) -> StripBatch:
    """The training augmentation on real strips: ``data.augmented`` of them get the
    whole-strip variation (``vary_strips`` on their ink, 1 - pixel), when on the elastic
    warp (``warp``, ``data.elastic`` > 0), the named augmentation for real images
    (``data.augment``: attnlab.data.photo, ink before the shading, pixels after), paper
    shading and, when on, JPEG; every draw from
    ``gen`` (none for a variation that is off). Each acts on every strip's own columns
    (``widths``), so a strip is varied alike beside a longer one; padded columns stay paper."""
    b = len(batch)
    varied = torch.rand(b, generator=gen) < d.augmented  # (B,)
    if not bool(varied.any()):
        return batch
    images = batch.images
    w = images.shape[-1]
    sub, widths = images[varied], batch.widths[varied]
    ink = vary_strips(1.0 - sub, widths, d, gen)  # (b', H, W) 1 = full ink
    if d.elastic > 0:
        ink = warp(ink, d.elastic, gen, widths)
    if d.slant > 0:
        ink = slant(ink, d.slant, gen)
    named = list(getattr(d, "augment", None) or [])
    if named:
        ink = vary_ink(ink, named, gen, widths)
    shade = shading(widths, w, d.shading, gen)  # (b', W)
    pixels = (1.0 - ink) * shade[:, None, :]
    if named:
        pixels = vary_pixels(pixels, named, gen, widths)
    if d.jpeg > 0:
        squeezed = torch.rand(len(sub), generator=gen) < d.jpeg
        quality = uniform(d.jpeg_quality, len(sub), gen)
        if bool(squeezed.any()):
            pixels[squeezed] = jpeg(pixels[squeezed], quality[squeezed], widths[squeezed])
    outside = torch.arange(w) >= widths[:, None]  # (b', W)
    images[varied] = pixels.masked_fill_(outside[:, None, :], 1.0)
    return batch


def join(a: StripBatch, b: StripBatch) -> StripBatch:
    """Two batches as one, padded with paper to the wider."""
    images = [a.images[i, :, : int(a.widths[i])] for i in range(len(a))]
    images += [b.images[i, :, : int(b.widths[i])] for i in range(len(b))]
    labels = a.labels + b.labels
    spans = torch.zeros(len(labels), max(map(len, labels)), 2, dtype=torch.long)
    return pad_strips(images, labels, spans)


class SourceStream:
    """Endless training batches from a strip cache (same interface as ``TrainStream``)."""

    def __init__(
        self,
        cache: StripCache,
        batch_size: int,
        seed: int,
        data: Any,
        synth: StripSynth | None = None,
        seen: list[int] | None = None,
        prefetch: bool = False,
    ):
        self.cache, self.batch_size, self.data = cache, batch_size, data
        self.synth = synth if data.mix > 0 else None
        self.seen = torch.tensor(seen or [1], dtype=torch.long)
        self.n_synth = round(data.mix * batch_size) if self.synth is not None else 0
        self.generator = torch.Generator().manual_seed(seed)
        self.handed = self.generator.get_state()  # the state after the batches handed out
        self.pool = ThreadPoolExecutor(max_workers=1) if prefetch else None
        self.ahead: Future | None = None

    def _make(self) -> tuple[StripBatch, torch.Tensor]:
        g = self.generator
        pick = torch.randint(0, len(self.cache), (self.batch_size - self.n_synth,), generator=g)
        batch = augment_real(self.cache.batch(pick), self.data, g)
        if self.n_synth:
            lengths = self.seen[torch.randint(0, len(self.seen), (self.n_synth,), generator=g)]
            batch = join(batch, self.synth.sample(lengths, g, augment=True))
        return batch, g.get_state()

    def next(self) -> StripBatch:
        if self.pool is None:
            batch, self.handed = self._make()
            return batch
        ahead = self.ahead or self.pool.submit(self._make)
        batch, self.handed = ahead.result()
        self.ahead = self.pool.submit(self._make)
        return batch

    def state(self) -> torch.Tensor:
        return self.handed.clone()

    def load_state(self, state: torch.Tensor) -> None:
        if self.ahead is not None:
            self.ahead.result()
            self.ahead = None
        self.generator.set_state(state)
        self.handed = state.clone()


@dataclass
class TrainingData:
    """What a trainer trains and validates on (``attnlab.data.training_data``): the
    training stream, the validation sets by length, and (data=folder) the split record."""

    stream: Any  # next(), state(), load_state(): SourceStream, TrainStream or a caller's
    val_sets: dict[int, StripBatch]
    split: dict[str, Any] | None  # data=folder: source, held-out ids, counts; else None
    unlabelled: Any = None  # data.unlabelled: the strips to self-train on (data.unlabelled.Pool)


def _val_cache(d: Any, source: Source, cache: StripCache, dist: Distinct, split: Split):
    """The validation strips and their entries: all of ``data.val_path`` (none of them a
    training strip's image, none of its groups a group of ``data.path``: each refused in one
    line) or the held-out distinct strips of ``data.path``."""
    if not d.val_path:
        return cache.subset(split.held), [source.entries[i] for i in split.held]
    val_source, val_cache = read_source(d.val_path, "data.val_path", d, log.warning)
    shared = overlap(dist.keys, val_cache.keys)
    if shared:
        raise UserError(
            f"data.val_path={d.val_path}: {shared} of its {len(val_source)} strips have the "
            f"image of a training strip of data.path={d.path}; held-out strips must not be "
            f"trained on (give a disjoint folder, or drop data.val_path to hold out a share)"
        )
    shared_groups(
        source.entries, val_source.entries, f"data.path={d.path}", f"data.val_path={d.val_path}"
    )
    return val_cache, val_source.entries


def folder_data(cfg: Any, reader: Any, seen: list[int], seed: int, synth: StripSynth):
    """The training stream and validation sets of ``data=folder``, one step after the other:
    source -> entries (decoded) -> duplicates -> groups -> split -> limit -> cache. Raises a
    one-line UserError (nothing written) for a bad label, a missing image, a label too long,
    a strip in two groups or a held-out strip that would be trained on."""
    d = cfg.data
    source, cache = read_source(d.path, "data.path", d, log.warning)
    dist = find_duplicates(source.entries, cache.keys, lambda m: log.warning(f"{d.path}: {m}"))
    units = group_units(source.entries, dist, f"data.path={d.path}")
    split = split_source(source, cache.widths, dist, units, cfg, reader, seen)
    _check_split(source, split, reader, seen, d.skip_long)
    pool = [source.entries[i].label for i in split.train]  # data.limit: the first N of it
    drawn = draw(split.train, pool, getattr(d, "limit", None), cfg.seed, str(source.path))
    val_cache, val_entries = _val_cache(d, source, cache, dist, split)
    val_sets = _val_sets(val_cache, seen, d.val_path or d.path)
    record = _record(d, source, dist, split, seen, drawn)
    record.update(_contents(source, dist, split, drawn, val_cache, val_entries))
    log.info(
        "%s %s: %d strips%s; training on %d of the seen lengths, %d held out%s, %d of other "
        "lengths, %d skipped as too long%s",
        source.kind,
        source.path,
        len(source),
        f" in {len(units)} groups" if units.names is not None else "",
        len(drawn),
        len(split.held),
        f" ({len(split.held_groups)} whole groups)" if split.held_groups else "",
        split.unseen,
        len(split.long),
        f"; {d.mix:.0%} of each batch synthetic" if d.mix > 0 else "",
    )
    stream = SourceStream(cache.subset(drawn), cfg.train.batch_size, seed, d, synth, seen)
    pool = _unlabelled(cfg, cache.keys, val_cache.keys, cache.subset(drawn), synth, seen)
    record.update(pool.record() if pool is not None else {})
    return TrainingData(stream, val_sets, record, pool)


def _unlabelled(cfg: Any, labelled, held, train: StripCache, synth: StripSynth, seen):
    """data.unlabelled: its strips (none a held-out strip's image; labelled ones left out),
    and the streams of self-training's rounds, drawn as the labelled strips are."""
    d = cfg.data
    if not getattr(d, "unlabelled", None):
        return None
    from attnlab.data.unlabelled import read_pool

    def make(strips: StripCache, seed: int) -> SourceStream:
        return SourceStream(strips, cfg.train.batch_size, seed, d, synth, seen)

    return read_pool(d, labelled, held, train, make, cfg.seed, log.warning)


def _check_split(source: Source, split: Split, reader: Any, seen: list[int], skip: bool):
    """Labels too long for the reader (unless ``data.skip_long``), or nothing to train on."""
    if split.long and not skip:
        i, why = split.long[0]
        e = source.entries[i]
        raise UserError(
            f"{source.path}: {len(split.long)} label(s) too long for the {reader.name} reader; "
            f"first at {e.where} ({short(e.label)}: {why}); set data.skip_long=true to skip them"
        )
    if not split.train:
        raise UserError(
            f"{source.path}: no strips to train on (seen lengths {seen}, {len(split.held)} "
            f"held out, {split.unseen} of other lengths, {len(split.long)} too long)"
        )


def _val_sets(val_cache: StripCache, seen: list[int], where: str) -> dict[int, StripBatch]:
    wanted = set(seen)
    by_length: dict[int, list[int]] = {}
    for i, label in enumerate(val_cache.labels):
        if len(label) in wanted:
            by_length.setdefault(len(label), []).append(i)
    if not by_length:
        raise UserError(
            f"{where}: no validation strips of the seen lengths {seen} "
            f"(raise data.val_share or give data.val_path)"
        )
    return {n: val_cache.batch(idx) for n, idx in sorted(by_length.items())}


def _record(d: Any, source: Source, dist: Distinct, split: Split, seen: list[int], drawn):
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


def _contents(source, dist, split, drawn, val_cache, val_entries) -> dict[str, Any]:
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
