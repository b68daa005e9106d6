"""Labelled strips as a data source: a folder with ``labels.csv``, a list file of
``path<TAB>label`` lines (the PaddleOCR/mmocr convention) or an LMDB in the layout of
deep-text-recognition-benchmark and strhub (``num-samples``, ``image-%09d``, ``label-%09d``).
Each may say which strips belong together (a writer, a document: ``attnlab.data.groups``):
a ``group`` column in labels.csv, a third tab field in a list file, ``group-%09d`` records in
an LMDB. Without it every strip is its own group.

``open_source`` lists a source's strips (id, label, where: a file:line for errors) and checks
what can be checked without decoding: every image is there, every label uses only
``data.charset``. Decoding them is ``attnlab.data.strip_cache``'s; writing an LMDB,
``attnlab.data.write_lmdb``'s.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnlab.data.dedup import short
from attnlab.data.folder import LABELS, Warn, read_labels, warn_stderr
from attnlab.data.notes import shown
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
