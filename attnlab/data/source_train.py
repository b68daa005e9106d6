"""Training on labelled strips (``data=folder``): the folder-data path, one step after the
other, each with its owner: source -> entries (``strip_cache.read_source``) -> duplicates
(``dedup``) -> groups (``groups``) -> split (``split``) -> limit (``limit``) -> cache; the
training stream (``source_stream``) and the validation sets, all built before a run writes
anything.

- The held-out share (``data.val_share`` of ``data.path``'s groups or strips, drawn from
  ``data.eval_seed``) is never trained on; ``TrainingData.split`` lists its ids, groups and
  image keys (``split_record``), and the run keeps that record (``RunDir.split_file`` and
  the checkpoint), so ``attnlab eval RUN`` tests on those strips (``recorded``) and
  ``init_from`` knows them.
- Training strips are the other strips of the seen lengths (``data.train_lengths``); a
  label the reader cannot be trained on (``Reader.too_long``) is refused in one line unless
  ``data.skip_long`` skips it (counted in the log and the record).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from attnlab.data.dedup import Distinct, find_duplicates, overlap, short
from attnlab.data.groups import group_units, shared_groups
from attnlab.data.limit import draw
from attnlab.data.source_stream import SourceStream
from attnlab.data.sources import Source
from attnlab.data.split import Split, split_source
from attnlab.data.split_record import contents_record, split_record
from attnlab.data.strip_cache import StripCache, read_source
from attnlab.data.strips import StripBatch, StripSynth
from attnlab.errors import UserError

log = logging.getLogger("attnlab.train")


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
    record = split_record(d, source, dist, split, seen, drawn)
    record.update(contents_record(source, dist, split, drawn, val_cache, val_entries))
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
    labelled = [cache.keys[i] for i in drawn]  # data.limit's others may come unlabelled
    pool = _unlabelled(cfg, labelled, val_cache.keys, cache.subset(drawn), synth, seen)
    record.update(pool.record() if pool is not None else {})
    return TrainingData(stream, val_sets, record, pool)


def _unlabelled(cfg: Any, labelled, held, train: StripCache, synth: StripSynth, seen):
    """data.unlabelled: its strips (none a held-out strip's image; those trained with their
    labels left out: ``labelled``, data.limit's draw), and the streams of self-training's
    rounds, drawn as the labelled strips are."""
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
