"""User strips on disk: a folder of images plus ``labels.csv`` (``filename,label``).

``attnlab data export`` writes this format; any folder in it is readable as a dataset
(``attnlab.data.sources`` lists it, ``attnlab.data.recorded.folder_strips`` reads it whole),
each image prepared as ``attnlab.data.pixels`` prepares every image (grey by its mode, light
ink on dark paper inverted, resized to the model height) and made a torch tensor here. What a
user could get wrong without noticing is said in one warning line per file (stderr,
``attnlab: warning:``): a very tall image, a multi-frame image (only the first frame is
read), a file listed twice in labels.csv; light ink on dark paper (inverted so it reads) is
said once for a source, with a count (``attnlab.data.notes.Tally``). An image that holds
nothing to read (blank, all dark, a few pixels) is refused, as on every path
(``pixels.check_readable``).
"""

from __future__ import annotations

import csv
import io
import os
import unicodedata
from pathlib import Path

import torch

from attnlab.data import pixels
from attnlab.data.dedup import short
from attnlab.data.notes import shown
from attnlab.data.pixels import Warn, warn_stderr
from attnlab.errors import UserError

LABELS = "labels.csv"
Row = tuple[str, str, int, str | None]  # filename, label, line in labels.csv, group (or None)


def load_image(
    path: Path | str,
    height: int,
    warn: Warn = warn_stderr,
    crop: bool = False,
    data: bytes | None = None,
) -> torch.Tensor:
    """Any image file -> (height, W) float in [0, 1], 1 = paper, aspect ratio kept
    (``attnlab.data.pixels.load_image``, as a tensor).

    Light ink on dark paper is inverted. ``crop``: the ink is first placed as the
    generator places it (``pixels.crop_to_ink``), whatever margins the file has.
    Raises one-line UserErrors; anything doubtful goes to ``warn`` as one line naming the file.
    ``data``: the image file's bytes (an LMDB record named ``path``).
    """
    strip = pixels.load_image(Path(path), height, crop=crop, warn=warn, data=data)
    return torch.from_numpy(strip)


def labels_text(path: Path) -> str:
    """labels.csv as text: UTF-8, with or without a byte-order mark (as Excel saves it).

    Other encodings are refused, not guessed: latin-1 decodes any bytes, so a guess would
    turn a cp1252 or UTF-16 file into file names that do not match, or match the wrong file.
    """
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise UserError(
            f"{shown(path)}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x}): save it as UTF-8"
        ) from err


def check_duplicates(path: Path, rows: list[Row], warn: Warn) -> list[Row]:
    """Rows with each file once: a file listed twice with one label is counted once (one
    warning line); with two labels, or in two groups, it is a contradiction and refused.
    Duplicates by content, in every source, are found after decoding (``attnlab.data.dedup``)."""
    first: dict[str, Row] = {}
    again: dict[str, list[int]] = {}
    for name, label, line, group in rows:
        key = os.path.normpath(name)
        if key not in first:
            first[key] = (name, label, line, group)
        elif first[key][1] != label:
            raise UserError(
                f"{shown(path)}:{line}: {name!r} is labelled {short(label)} here but "
                f"{short(first[key][1])} on line {first[key][2]}"
            )
        elif first[key][3] != group:  # one strip, two groups: which side of the split?
            raise UserError(
                f"{shown(path)}:{line}: {name!r} is in {_group(group)} here but "
                f"{_group(first[key][3])} on line {first[key][2]}; a strip belongs to one "
                f"group: drop one of the lines"
            )
        else:
            again.setdefault(key, [first[key][2]]).append(line)
    for key, lines in again.items():
        listed = ", ".join(map(str, lines))
        warn(f"{shown(path)}: {first[key][0]!r} is listed on lines {listed}: counted once")
    return list(first.values())


def _group(group: str | None) -> str:
    return "no group" if group is None else f"group {group!r}"


def missing_image(folder: Path, name: str) -> str | None:
    """Why ``folder/name`` cannot be read as an image file, if it cannot: not there, or there
    but not a regular file (a FIFO would block the read forever)."""
    file = folder / name
    if file.is_file():
        return None
    if file.exists():
        return (
            f"image file {name!r} in {shown(folder)} is not a regular file (a pipe, device or "
            "folder)"
        )
    return f"image file {name!r} not found in {shown(folder)}"


def outside(folder: Path, name: str) -> bool:
    """Whether a labels.csv file name points out of its folder (``../x.png``, ``/abs.png``);
    judged by the name, so a symbolic link inside the folder is still inside."""
    norm = os.path.normpath(name)
    return os.path.isabs(name) or norm == ".." or norm.startswith(".." + os.sep)


def read_labels(
    folder: Path, warn: Warn = warn_stderr, allow_outside: bool = False, digits_only: bool = True
) -> list[Row]:
    """(filename, label, line number, group) rows of ``folder/labels.csv``, checked. A file
    name outside the folder is refused unless ``allow_outside`` (eval.allow_outside=true). The
    line number is where a record starts (a quoted field may span lines). ``digits_only``
    False: labels are checked against a charset later (attnlab.data.sources). A third column
    ``group`` is optional (None without it: ``attnlab.data.groups``)."""
    path = folder / LABELS
    if not folder.is_dir():
        raise UserError(f"{shown(folder)}: no such folder")
    if not path.is_file():
        raise UserError(f"{shown(path)}: missing (a strip folder needs labels.csv: filename,label)")
    rows = []
    reader = csv.reader(io.StringIO(labels_text(path), newline=""))
    try:
        header = next(reader, None)
        columns = [h.strip() for h in header or []]
        if columns not in (["filename", "label"], ["filename", "label", "group"]):
            raise UserError(
                f"{shown(path)}:1: header must be 'filename,label' (a third column: group), "
                f"got {header}"
            )
        end = reader.line_num
        for row in reader:
            line, end = end + 1, reader.line_num  # the record's first line, then its last
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(columns):
                raise UserError(
                    f"{shown(path)}:{line}: expected {len(columns)} fields ({','.join(columns)}), "
                    f"got {len(row)}"
                )
            name, label = row[0].strip(), row[1].strip()
            if digits_only and (not label.isdigit() or not label.isascii()):
                raise UserError(
                    f"{shown(path)}:{line}: label {short(label)} is not a string of digits 0-9"
                )
            if outside(folder, name) and not allow_outside:
                raise UserError(
                    f"{shown(path)}:{line}: {name!r} lies outside {shown(folder)} "
                    "(eval.allow_outside=true reads such files)"
                )
            why = missing_image(folder, name)
            if why:
                raise UserError(f"{shown(path)}:{line}: {why}")
            group = row[2].strip() or None if len(row) == 3 else None  # blank: checked later
            group = group and unicodedata.normalize("NFC", group)  # as labels are (sources.nfc)
            rows.append((name, label, line, group))
    except csv.Error as err:
        raise UserError(f"{shown(path)}:{reader.line_num}: not CSV ({err})") from err
    if not rows:
        raise UserError(f"{shown(path)}: no strips listed")
    return check_duplicates(path, rows, warn)
