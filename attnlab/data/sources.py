"""Labelled strips as a data source: a folder with ``labels.csv``, a list file of
``path<TAB>label`` lines (the PaddleOCR/mmocr convention) or an LMDB in the layout of
deep-text-recognition-benchmark and strhub (``num-samples``, ``image-%09d``, ``label-%09d``).
Each may say which strips belong together (a writer, a document: ``attnlab.data.groups``):
a ``group`` column in labels.csv, a third tab field in a list file, ``group-%09d`` records in
an LMDB. Without it every strip is its own group.

``open_source`` lists a source's strips (id, label, where: a file:line for errors) and checks
what can be checked without decoding: every image is there, every label uses only
``data.charset``. ``decode_all`` decodes every strip once, through the same steps as
``attnlab eval --folder`` and ``attnlab read`` (``attnlab.data.pixels``: ``decode``, then
``prepare``: polarity, ink placement, resize), into a ``StripCache`` that batches are
gathered from; each strip's identity (``dedup.content_key``) is taken from the decoded
image between the two steps, so it does not depend on how the strip is read.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnlab.data.dedup import content_key, short
from attnlab.data.folder import LABELS, Warn, read_labels, warn_stderr
from attnlab.data.notes import Tally, shown
from attnlab.data.pixels import decode, own_height, prepare
from attnlab.data.strips import StripBatch
from attnlab.errors import UserError

LMDB_DATA = "data.mdb"


@dataclass
class Entry:
    """One labelled strip of a source."""

    id: str  # file name (relative to the source) or LMDB key; what split files record
    label: str
    where: str  # "labels.csv:12", "train.txt:3", "lmdb:label-000000003": named in errors
    group: str | None = None  # the strips of one writer or document; None: its own group


@dataclass
class Source:
    kind: str  # folder | list | lmdb
    path: Path
    entries: list[Entry]

    def __len__(self) -> int:
        return len(self.entries)

    def image_bytes(self) -> Callable[[Entry], bytes | None]:
        """Per entry: its image file's bytes (LMDB) or None (read from the file itself)."""
        if self.kind != "lmdb":
            return lambda e: None
        env = _open_lmdb(self.path)

        def get(e: Entry) -> bytes | None:
            with env.begin() as txn:
                return bytes(txn.get(e.id.encode()))

        return get

    def file_of(self, e: Entry) -> Path:
        base = self.path if self.kind == "folder" else self.path.parent
        return self.path / e.id if self.kind == "lmdb" else base / e.id


def open_source(
    path: Path | str, warn: Warn = warn_stderr, key: str = "data.path", allow_outside: bool = False
) -> Source:
    """The strips listed at ``path`` (folder, list file or LMDB), each image checked present."""
    path = Path(path)
    if path.is_dir() and (path / LABELS).is_file():
        rows = read_labels(path, warn, allow_outside, digits_only=False)
        entries = [
            Entry(name, nfc(label), f"{shown(path / LABELS)}:{line}", group)
            for name, label, line, group in rows
        ]
        return Source("folder", path, entries)
    if path.is_dir() and (path / LMDB_DATA).is_file():
        return Source("lmdb", path, _lmdb_entries(path))
    if path.is_file():
        return Source("list", path, _list_entries(path, allow_outside))
    if path.is_dir():
        raise UserError(f"{key}={path}: neither a strip folder (labels.csv) nor an LMDB (data.mdb)")
    raise UserError(f"{key}={path}: no such folder, list file or LMDB")


def _list_entries(path: Path, allow_outside: bool = False) -> list[Entry]:
    """The ``path<TAB>label[<TAB>group]`` lines of a list file; a file named outside its
    folder is refused as in labels.csv (``folder.outside``) unless ``allow_outside``."""
    from attnlab.data.folder import labels_text, missing_image, outside

    entries = []
    for n, line in enumerate(labels_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        name, tab, rest = line.rstrip("\r").partition("\t")
        label, tab2, group = rest.partition("\t")
        if not tab or "\t" in group:
            raise UserError(
                f"{path}:{n}: expected 'path<TAB>label' or 'path<TAB>label<TAB>group', "
                f"got {line[:60]!r}"
            )
        where = f"{shown(path)}:{n}"
        if outside(path.parent, name) and not allow_outside:
            raise UserError(
                f"{where}: {name!r} lies outside {path.parent} (eval.allow_outside=true reads "
                f"such files)"
            )
        why = missing_image(path.parent, name)
        if why:
            raise UserError(f"{where}: {why}")
        entries.append(Entry(name, nfc(label.strip()), where, nfc(group.strip()) or None))
    if not entries:
        raise UserError(f"{path}: no strips listed")
    return entries


def _open_lmdb(path: Path):
    import lmdb

    try:
        return lmdb.open(str(path), readonly=True, lock=False, readahead=False, meminit=False)
    except lmdb.Error as err:
        raise UserError(f"{path}: not a readable LMDB ({err})") from err


def _lmdb_entries(path: Path) -> list[Entry]:
    env = _open_lmdb(path)
    entries = []
    with env.begin() as txn:
        count = lmdb_count(path, txn.get(b"num-samples"))
        for i in range(1, count + 1):
            image, label = f"image-{i:09d}", f"label-{i:09d}"
            where = f"{path}:{label}"
            text = txn.get(label.encode())
            if text is None:
                raise UserError(f"{where}: missing (num-samples says {count})")
            if txn.get(image.encode()) is None:
                raise UserError(f"{where}: image {image} not found in the LMDB")
            label = nfc(text.decode("utf-8", errors="replace").strip())
            group = lmdb_group(path, i, txn.get(f"group-{i:09d}".encode()))
            entries.append(Entry(image, label, where, group))
    env.close()
    if not entries:
        raise UserError(f"{path}: no strips listed (num-samples is 0)")
    return entries


def lmdb_group(path: Path, i: int, raw: bytes | None) -> str | None:
    """The ``group-%09d`` record of strip ``i``, in NFC; bytes that are not UTF-8 are refused
    in one line (decoded with replacement characters, two groups could read as one)."""
    if raw is None:
        return None
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(
            f"{path}:group-{i:09d}: not UTF-8 text (byte 0x{raw[err.start]:02x} at {err.start}): "
            f"write group names as UTF-8"
        ) from err
    return nfc(text.strip()) or None


def lmdb_count(path: Path, raw: bytes | None) -> int:
    """``num-samples`` as ASCII digits (``str.isdigit`` also takes '²'); anything else is one
    line naming the file, the key and the value."""
    import re

    if raw is None:
        raise UserError(f"{path}: LMDB without a num-samples record (strhub/DTRB layout)")
    if not re.fullmatch(rb"\s*[0-9]+\s*", raw):
        shown = raw[:40].decode("utf-8", errors="replace")
        raise UserError(
            f"{path / LMDB_DATA}: num-samples is {shown!r}, not a count (ASCII digits 0-9)"
        )
    return int(raw)


def nfc(label: str) -> str:
    """A label in Unicode NFC, the form a charset is typed in (a macOS file name or an
    NFD export would otherwise be refused, or never read, as other characters)."""
    return unicodedata.normalize("NFC", label)


def check_charset(source: Source, charset: str) -> None:
    """Refuse labels with a character outside ``charset`` (or empty ones), in one line: how
    many labels, which characters, and the first file:line. Never a silent drop."""
    allowed = set(charset)
    bad = [e for e in source.entries if not e.label or set(e.label) - allowed]
    if not bad:
        return
    chars = sorted(set().union(*(set(e.label) - allowed for e in bad)))
    empty = sum(1 for e in bad if not e.label)
    shown = "".join(chars)
    what = f"characters {shown!r} outside data.charset={charset!r}" if chars else ""
    what += (" and " if chars and empty else "") + (f"{empty} empty" if empty else "")
    raise UserError(
        f"{bad[0].where}: label {short(bad[0].label)}: {len(bad)} label(s) of {source.path} with "
        f"{what}; add the characters to data.charset or fix the labels"
    )


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
    ``prepare``); errors and warnings name the file:line (light ink on dark paper: once)."""
    entries = source.entries if only is None else [source.entries[i] for i in only]
    data_of = source.image_bytes()
    tally = Tally(warn, by_name=True)

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
    return StripCache(images, [e.label for e in entries], [e.id for e in entries], keys)


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


def export_lmdb(batch: StripBatch, out: Path | str, groups: list[str] | None = None) -> Path:
    """Strips as PNG records in an LMDB of the strhub/DTRB layout, written under a temporary
    name and renamed into place (a folder written whole or not at all); ``groups``, when
    known, as ``group-%09d`` records."""
    import io

    import lmdb
    from PIL import Image

    from attnlab.io import atomic_dir

    def write(work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        size = max(1 << 20, 4 * int(batch.images.numel()) + 4096 * len(batch))
        env = lmdb.open(str(work), map_size=size, subdir=True)
        with env.begin(write=True) as txn:
            for i, label in enumerate(batch.labels, start=1):
                pixels = batch.images[i - 1, :, : int(batch.widths[i - 1])].numpy()
                buf = io.BytesIO()
                Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L").save(buf, "PNG")
                txn.put(f"image-{i:09d}".encode(), buf.getvalue())
                txn.put(f"label-{i:09d}".encode(), label.encode())
                if groups is not None:
                    txn.put(f"group-{i:09d}".encode(), groups[i - 1].encode())
            txn.put(b"num-samples", str(len(batch)).encode())
        env.sync()
        env.close()
        lock = work / "lock.mdb"
        if lock.exists():
            lock.unlink()

    return atomic_dir(Path(out), write)
