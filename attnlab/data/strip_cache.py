"""A source's strips decoded once (``attnlab.data.sources`` lists them): ``decode_all``
decodes every strip through the same steps as ``attnlab eval --folder`` and ``attnlab read``
(``attnlab.data.pixels``: ``decode``, then ``prepare``: polarity, ink placement, resize), into
a ``StripCache`` that batches are gathered from; each strip's identity
(``dedup.content_key``) is taken from the decoded image between the two steps, so it does not
depend on how the strip is read. ``read_source`` is the first steps of the folder-data path
(listed, charset checked, decoded once, widths checked); ``median_own_height`` measures the
strips the recipe then reads, each file decoded once. A decode of the very strips decoded
last in this process is not done again (``_DECODED``).
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.data.dedup import content_key
from attnlab.data.folder import Warn, warn_stderr
from attnlab.data.notes import Tally
from attnlab.data.pixels import decode, own_height, prepare
from attnlab.data.sources import Entry, Source, check_charset, open_source
from attnlab.data.strips import StripBatch
from attnlab.errors import UserError


class StripCache:
    """Every strip of a source decoded once: (height, W) images kept as 8-bit grey (1/255
    steps; a fifth of float32's memory), gathered into padded batches on demand."""

    def __init__(
        self,
        images: list[torch.Tensor],
        labels: list[str],
        ids: list[str],
        keys: list[str] | None = None,
    ):
        self.images = images  # (H, W_i) uint8, 255 = paper
        self.labels = labels
        self.ids = ids
        self.keys = keys  # each strip's dedup.content_key (None: not known, a caller's cache)
        self.widths = torch.tensor([im.shape[1] for im in images], dtype=torch.long)

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, index: torch.Tensor | list[int]) -> StripBatch:
        """Strips ``index`` as a StripBatch padded with paper; glyph spans unknown (zero)."""
        idx = torch.as_tensor(index, dtype=torch.long).tolist()
        h = self.images[idx[0]].shape[0] if idx else 1
        w = int(self.widths[idx].max()) if idx else 1
        out = torch.full((len(idx), h, w), 255, dtype=torch.uint8)  # (B, H, W)
        for row, i in enumerate(idx):
            im = self.images[i]
            out[row, :, : im.shape[1]] = im
        labels = [self.labels[i] for i in idx]
        span_len = max((len(s) for s in labels), default=0)
        spans = torch.zeros(len(idx), span_len, 2, dtype=torch.long)
        return StripBatch(out.float().mul_(1 / 255.0), self.widths[idx].clone(), labels, spans)

    def subset(self, index: list[int]) -> StripCache:
        return StripCache(
            [self.images[i] for i in index],
            [self.labels[i] for i in index],
            [self.ids[i] for i in index],
            None if self.keys is None else [self.keys[i] for i in index],
        )


def decode_all(
    source: Source,
    height: int,
    crop: bool,
    warn: Warn = warn_stderr,
    only: list[int] | None = None,
    threads: int = 0,
) -> StripCache:
    """Decode the strips of ``source`` (or those at ``only``) once, in parallel threads
    (Pillow releases the GIL while it decodes), each with its content key (taken before
    ``prepare``); errors and warnings name the file:line (light ink on dark paper: once).
    The whole of a source decoded before in this process, to the byte, is not decoded
    again: its cache is handed back and its warnings said again (``_DECODED``)."""
    entries = source.entries if only is None else [source.entries[i] for i in only]
    data_of = source.image_bytes()
    key = _decoded_key(source, data_of, height, crop) if only is None else None
    if key in _DECODED:
        _DECODED.move_to_end(key)
        _MEASURED.pop(_measured_key(source), None)  # not needed: nothing is decoded
        cache, said = _DECODED[key]
        for message in said:
            warn(message)
        return cache
    said: list[str] = []

    def say(message: str) -> None:  # said now, and again when the cache is handed back
        said.append(message)
        warn(message)

    tally = Tally(say, by_name=True)

    measured = _measured(source, entries)

    def one(e: Entry) -> tuple[torch.Tensor, str]:
        file, notes = source.file_of(e), []
        try:
            if id(e) in measured:  # decoded for the recipe's height
                grey, notes = measured[id(e)]
            else:
                grey = decode(file, notes, data_of(e))  # (H, W) as stored
            said = lambda m, w=e.where: tally(f"{w}: {m}")  # noqa: E731 (one line per file)
            strip = prepare(grey, height, crop=crop, name=file, warn=said, notes=notes)
        except UserError as err:
            raise UserError(f"{e.where}: {err}") from err
        return torch.from_numpy(np.round(strip * 255).astype(np.uint8)), content_key(grey)

    workers = threads or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = list(pool.map(one, entries))
    tally.close(len(entries))
    images, keys = [im for im, _ in done], [k for _, k in done]
    cache = StripCache(images, [e.label for e in entries], [e.id for e in entries], keys)
    if key is not None:
        _DECODED[key] = (cache, said)
        while len(_DECODED) > KEEP:
            _DECODED.popitem(last=False)
    return cache


# The sources decode_all decoded whole, by what decoding depends on (``_decoded_key``), with
# the warnings it said: a sweep builds every job's trainer before the first job starts
# (tasks.jobcheck), then runs the jobs (hydra/launcher=basic: in its own process), and each
# decoded the same folder again (10 jobs over 20,000 captchas at 64 px: minutes before the
# first step). KEEP of them (a training folder and its data.val_path), the oldest dropped; a
# cache handed out is only read (batches and subsets copy out of it).
_DECODED: OrderedDict[str, tuple[StripCache, list[str]]] = OrderedDict()
KEEP = 2


def _decoded_key(source: Source, data_of, height: int, crop: bool) -> str | None:
    """What a whole source's decode depends on: the height and crop, and every strip's id,
    label and image bytes (read, not decoded: a fraction of a decode's time). None when a
    file cannot be read: the decode names it."""
    h = hashlib.blake2b(f"{height}|{crop}|{source.kind}".encode(), digest_size=16)
    for e in source.entries:
        try:
            data = data_of(e)
            if data is None:
                data = source.file_of(e).read_bytes()
        except OSError:
            return None
        h.update(f"{len(e.id)}:{e.id}|{len(e.label)}:{e.label}|{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def median_own_height(source: Source, crop: bool, n: int = 200) -> int:
    """The median height of up to ``n`` of ``source``'s strips (evenly spaced) at their own
    resolution (``pixels.own_height``: their ink's crop with ``crop``, as training places
    it); a strip that cannot be decoded is named as training would name it."""
    step = max(1, len(source.entries) // n)
    data_of = source.image_bytes()
    heights, kept = [], {}
    for i in range(0, len(source.entries), step)[:n]:
        e, notes = source.entries[i], []
        try:
            grey = decode(source.file_of(e), notes, data_of(e))
        except UserError as err:
            raise UserError(f"{e.where}: {err}") from err
        heights.append(own_height(grey, crop=crop))
        kept[i] = (grey, notes)
    if not heights:
        raise UserError(f"{source.path}: no strips to measure")
    _MEASURED.clear()  # one source's at a time: the one about to be read
    _MEASURED[_measured_key(source)] = kept
    return int(np.median(heights))


# The strips ``median_own_height`` decoded, kept for the ``decode_all`` of the same source
# that follows (the recipe measures the strips training then reads, and each file is
# decoded once), by the source's path and entries, then by entry index.
_MEASURED: dict[tuple[str, int], dict[int, tuple[np.ndarray, list[str]]]] = {}


def _measured_key(source: Source) -> tuple[str, int]:
    return str(Path(source.path).resolve()), hash(tuple((e.id, e.label) for e in source.entries))


def _measured(source: Source, entries: list[Entry]) -> dict[int, tuple[np.ndarray, list[str]]]:
    """The greys ``median_own_height`` decoded of ``entries`` and the decoder's notes on
    them (by ``id`` of the entry),
    taken from the store: they are handed to one decode only."""
    kept = _MEASURED.pop(_measured_key(source), {})
    index = {id(e): i for i, e in enumerate(source.entries)}
    return {id(e): kept[index[id(e)]] for e in entries if index.get(id(e)) in kept}


WIDE = 8.0  # a strip wider than WIDE model heights per label character, plus WIDE, is refused


def check_widths(entries: list[Entry], cache: StripCache, height: int) -> None:
    """Refuse a strip far wider than its label needs (a 200,000-px image pads every batch it
    is drawn into to its width): over ``WIDE * height * (len(label) + 1)`` columns once read
    at the model height. The generator's widest of 500 strips used 0.78 of ``height *
    (len + 1)``, a tenth of the bound; a photo with wide margins stays well inside it."""
    for e, w in zip(entries, cache.widths.tolist(), strict=True):
        bound = round(WIDE * height * (len(e.label) + 1))
        if w > bound:
            raise UserError(
                f"{e.where}: image {e.id!r} is {w} columns wide at height {height}, over the "
                f"bound of {bound} for a label of {len(e.label)} character(s) (WIDE={WIDE:g} "
                f"heights a character); crop it to its digits"
            )


def read_source(path: str, key: str, d: Any, warn: Warn) -> tuple[Source, StripCache]:
    """The first steps of the folder-data path, for training and validation sources alike:
    the source listed (``key`` named in errors), its labels checked against ``data.charset``,
    every strip decoded once and checked not far wider than its label."""
    source = open_source(Path(path), warn, key)
    check_charset(source, d.charset)
    cache = decode_all(source, d.height, d.crop, warn)
    check_widths(source.entries, cache, d.height)
    return source, cache
