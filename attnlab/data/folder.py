"""User strips on disk: a folder of images plus ``labels.csv`` (``filename,label``).

``attnlab data export`` writes this format; any folder in it is readable as a dataset, each
image converted to grey by its mode and resized to the model height. What a user could get
wrong without noticing is said in one warning line per file (stderr, ``attnlab: warning:``):
light ink on dark paper (inverted so it reads), a 1-pixel-wide or very tall image, a
multi-frame image (only the first frame is read), a file listed twice in labels.csv.
"""

from __future__ import annotations

import csv
import io
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from attnlab.data.dedup import short
from attnlab.data.strips import StripBatch, pad_strips
from attnlab.errors import UserError

LABELS = "labels.csv"
TALL = 4.0  # height / width above which an image is not a row of digits
Warn = Callable[[str], None]
Row = tuple[str, str, int, str | None]  # filename, label, line in labels.csv, group (or None)

# Pillow modes by how they become grey; any other mode (LAB, La, ...) is refused.
PLAIN = {"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr", "HSV"}  # Pillow converts these to L
ALPHA = {"LA", "PA", "RGBA", "RGBa"}  # composited over white paper first
DEEP = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}  # 16/32-bit integer or float samples


def warn_stderr(message: str) -> None:
    """The default warning: one line on stderr, like the one-line errors; written in one
    call, so that lines warned from the decoding threads (``sources.decode_all``) do not
    interleave (``print`` writes the newline apart)."""
    sys.stderr.write(f"attnlab: warning: {message}\n")


def full_scale(top: float, is_float: bool) -> float:
    """White of deep samples, from the data, as the file records the type but not the range.

    Float samples whose brightest value is at most 1.5 are 0..1 (overshoot clipped); any
    other deep samples are 0..2**b-1 for the smallest usual depth b in 8, 10, 12, 14, 16, 32
    that holds the brightest value (a 12-bit scan in a 16-bit PNG, a float TIFF in 0..255).
    Paper is the brightest part of a strip, so it sits near the top of its range.
    """
    if is_float and top <= 1.5:
        return 1.0
    return float(next((2**b - 1 for b in (8, 10, 12, 14, 16) if top <= 2**b - 1), 2**32 - 1))


def to_grey(im, path: Path) -> np.ndarray:
    """A Pillow image of any supported mode -> (H, W) float32 in [0, 1], 1 = paper."""
    from PIL import Image

    if im.mode in DEEP:
        a = np.asarray(im).astype(np.float64)  # (H, W)
        if not np.isfinite(a).all():
            raise UserError(f"{path}: float image with NaN or infinite pixels")
        scale = full_scale(float(a.max(initial=0.0)), im.mode == "F")
        return np.clip(a / scale, 0.0, 1.0).astype(np.float32)
    if im.mode in ALPHA or (im.mode in PLAIN and "transparency" in im.info):
        paper = Image.new("RGBA", im.size, "white")
        im = Image.alpha_composite(paper, im.convert("RGBA"))
    elif im.mode not in PLAIN:
        raise UserError(f"{path}: image mode {im.mode} is not supported (save it as grey or RGB)")
    return np.asarray(im.convert("L"), dtype=np.float32) / 255.0


def decode(path: Path, notes: list[str], data: bytes | None = None) -> np.ndarray:
    """The first frame of an image file as grey (H, W); every failure is one UserError line.
    ``data``: the file's bytes (an LMDB record), ``path`` then only names it."""
    import stat

    from PIL import Image, ImageOps

    try:  # a FIFO or a device would block Pillow's read forever
        regular = data is not None or stat.S_ISREG(path.stat().st_mode)
    except OSError:
        regular = True  # missing: Pillow's open says so below
    if not regular:
        raise UserError(f"{path}: not a regular file (a pipe, device or folder is not read)")
    try:
        with warnings.catch_warnings():  # one limit: refuse what Pillow only warns about
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(path if data is None else io.BytesIO(data))
        with im:
            if (
                getattr(im, "is_animated", False) and im.format != "MPO"
            ):  # MPO: a camera JPEG + previews
                notes.append(f"{im.n_frames} frames (pages): only the first is read")
            im.load()
            im = ImageOps.exif_transpose(im)  # a phone photo stands the way it was shot
    except FileNotFoundError as err:
        raise UserError(f"{path}: no such image") from err
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise UserError(
            f"{path}: image too large (over {Image.MAX_IMAGE_PIXELS} pixels, Pillow's guard "
            "against decompression bombs): crop or downscale it"
        ) from err
    except Exception as err:  # Pillow's decoders raise many types on a corrupt file
        raise UserError(f"{path}: not a readable image ({type(err).__name__})") from err
    return to_grey(im, path)


def shape_note(h: int, w: int) -> str | None:
    """Why an image of this size is unlikely to be a strip (a row of digits), if it is."""
    if min(h, w) == 1:
        return f"only 1 pixel {'wide' if w == 1 else 'high'} ({w}x{h})"
    if h > TALL * w:
        return f"{h / w:.1f} times taller than wide: a strip is one row of digits"
    return None


def resize(grey: np.ndarray, height: int) -> np.ndarray:
    """(H, W) -> (height, W * height / H), bilinear in float (no 8-bit rounding)."""
    from PIL import Image

    h, w = grey.shape
    width = max(1, round(w * height / h))
    return np.array(Image.fromarray(grey).resize((width, height), Image.BILINEAR))


def is_inverted(grey: np.ndarray) -> bool:
    """Light ink on dark paper: paper covers most of a strip and its edges, so both the median
    and the edges' median lie nearer the dark end than the light end (both: a tight crop of
    bold digits may be mostly ink). A blank image is left alone: one whose grey levels span
    under 0.2 between the 0.1th and 99.9th percentiles (scanner noise, not ink)."""
    lo, hi = (float(v) for v in np.percentile(grey, [0.1, 99.9]))
    edges = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])  # (2W + 2H,)
    mid = (lo + hi) / 2
    return hi - lo > 0.2 and float(np.median(grey)) < mid and float(np.median(edges)) < mid


# Where the generator puts a string, measured over its default strips (attnlab data export,
# 2,000 strips of lengths 1-8): the rows holding the middle INK_MASS of a strip's ink span
# 55% of the height (53-56% at every length), centred 55% of the way down, with about 19%
# of the height of paper left and right of the ink. The ink's outermost rows would not do:
# each glyph's own vertical jitter widens them with the string's length (58% of the height
# at length 1, 68% at length 8), so long strips were shrunk by up to 15% on reading.
INK_MASS = (0.05, 0.95)
INK_HEIGHT, INK_CENTRE, SIDE_MARGIN = 0.55, 0.55, 0.19


def ink_of(grey: np.ndarray) -> np.ndarray | None:
    """(H, W) grey, 1 = paper -> (H, W) bool: what is darker than halfway from the strip's
    paper (its 90th percentile; a tight crop is mostly ink) to its darkest pixel. None: too
    little contrast to tell ink from paper."""
    paper, dark = float(np.percentile(grey, 90)), float(grey.min())
    return None if paper - dark < 0.1 else grey < (paper + dark) / 2


def ink_rows(ink: np.ndarray) -> tuple[int, int]:
    """(H, W) bool ink -> the rows (top, bottom + 1) between which the middle INK_MASS of the
    ink lies: a glyph set higher or lower than the others, a descender or a speck barely
    moves them."""
    cum = np.cumsum(ink.sum(1)) / max(1, int(ink.sum()))
    top = int(np.searchsorted(cum, INK_MASS[0]))
    return top, max(top + 1, int(np.searchsorted(cum, INK_MASS[1])) + 1)


def crop_to_ink(grey: np.ndarray) -> np.ndarray:
    """(H, W) grey, 1 = paper -> the strip cut (or padded with its paper) so that its ink sits
    where the generator's does: the rows of the middle of its ink (``ink_rows``)
    INK_HEIGHT of the height, centred at INK_CENTRE, SIDE_MARGIN of paper left and right.
    A strip with too little contrast to find ink (``ink_of``) is returned as it is; columns
    with a speck or two of ink (under 2% of the fullest) do not count.
    """
    ink = ink_of(grey)  # (H, W)
    if ink is None:
        return grey
    paper = float(np.percentile(grey, 90))
    col_count = ink.sum(0)
    cols = np.flatnonzero(col_count >= max(1, 0.02 * col_count.max()))
    if len(cols) == 0:
        return grey
    (top, bottom), left, right = ink_rows(ink), cols[0], cols[-1] + 1
    h = (bottom - top) / INK_HEIGHT
    y0 = round((top + bottom) / 2 - INK_CENTRE * h)
    margin = round(SIDE_MARGIN * h)
    y1 = y0 + max(1, round(h))
    x0, x1 = left - margin, right + margin
    out = np.full((y1 - y0, x1 - x0), paper, dtype=np.float32)
    sy0, sy1 = max(0, y0), min(grey.shape[0], y1)
    sx0, sx1 = max(0, x0), min(grey.shape[1], x1)
    out[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = grey[sy0:sy1, sx0:sx1]
    return out


def load_image(
    path: Path | str,
    height: int,
    warn: Warn = warn_stderr,
    crop: bool = False,
    data: bytes | None = None,
) -> torch.Tensor:
    """Any image file -> (height, W) float in [0, 1], 1 = paper, aspect ratio kept.

    Light ink on dark paper is inverted. ``crop``: the ink is first placed as the
    generator places it (``crop_to_ink``), whatever margins the file has.
    Raises one-line UserErrors; anything doubtful goes to ``warn`` as one line naming the file.
    ``data``: the image file's bytes (an LMDB record named ``path``).
    """
    path = Path(path)
    notes: list[str] = []
    grey = decode(path, notes, data)  # (H, W)
    return prepare(grey, path, height, warn, crop, notes)


def prepare(
    grey: np.ndarray,
    path: Path | str,
    height: int,
    warn: Warn = warn_stderr,
    crop: bool = False,
    notes: list[str] | None = None,
) -> torch.Tensor:
    """A decoded grey image (H, W) in [0, 1] -> (height, W') as ``load_image`` gives it; the
    one path of a file, a Pillow image and a NumPy array (attnlab.api). ``path`` names it."""
    notes = list(notes or [])
    note = shape_note(*grey.shape)
    notes += [note] if note else []
    if is_inverted(grey):
        grey = 1.0 - grey
        notes.append("light ink on dark paper: inverted to read it")
    if crop:
        grey = crop_to_ink(grey)
    grey = resize(grey, height)  # (height, W')
    if notes:
        warn(f"{path}: {'; '.join(notes)}")
    return torch.from_numpy(grey)


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
            f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x}): save it as UTF-8"
        ) from err


def check_duplicates(path: Path, rows: list[Row], warn: Warn) -> list[Row]:
    """Rows with each file once: a file listed twice with one label is counted once (one
    warning line); listed with two labels it is a contradiction and refused. Duplicates by
    content, in every source, are found after decoding (``attnlab.data.dedup``)."""
    first: dict[str, Row] = {}
    again: dict[str, list[int]] = {}
    for name, label, line, group in rows:
        key = os.path.normpath(name)
        if key not in first:
            first[key] = (name, label, line, group)
        elif first[key][1] != label:
            raise UserError(
                f"{path}:{line}: {name!r} is labelled {short(label)} here but "
                f"{short(first[key][1])} on line {first[key][2]}"
            )
        else:
            again.setdefault(key, [first[key][2]]).append(line)
    for key, lines in again.items():
        listed = ", ".join(map(str, lines))
        warn(f"{path}: {first[key][0]!r} is listed on lines {listed}: counted once")
    return list(first.values())


def missing_image(folder: Path, name: str) -> str | None:
    """Why ``folder/name`` cannot be read as an image file, if it cannot: not there, or there
    but not a regular file (a FIFO would block the read forever)."""
    file = folder / name
    if file.is_file():
        return None
    if file.exists():
        return f"image file {name!r} in {folder} is not a regular file (a pipe, device or folder)"
    return f"image file {name!r} not found in {folder}"


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
        raise UserError(f"{folder}: no such folder")
    if not path.is_file():
        raise UserError(f"{path}: missing (a strip folder needs labels.csv: filename,label)")
    rows = []
    reader = csv.reader(io.StringIO(labels_text(path), newline=""))
    try:
        header = next(reader, None)
        columns = [h.strip() for h in header or []]
        if columns not in (["filename", "label"], ["filename", "label", "group"]):
            raise UserError(
                f"{path}:1: header must be 'filename,label' (a third column: group), got {header}"
            )
        end = reader.line_num
        for row in reader:
            line, end = end + 1, reader.line_num  # the record's first line, then its last
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(columns):
                raise UserError(
                    f"{path}:{line}: expected {len(columns)} fields ({','.join(columns)}), "
                    f"got {len(row)}"
                )
            name, label = row[0].strip(), row[1].strip()
            if digits_only and (not label.isdigit() or not label.isascii()):
                raise UserError(
                    f"{path}:{line}: label {short(label)} is not a string of digits 0-9"
                )
            if outside(folder, name) and not allow_outside:
                raise UserError(
                    f"{path}:{line}: {name!r} lies outside {folder} (eval.allow_outside=true "
                    f"reads such files)"
                )
            why = missing_image(folder, name)
            if why:
                raise UserError(f"{path}:{line}: {why}")
            group = row[2].strip() or None if len(row) == 3 else None  # blank: checked later
            rows.append((name, label, line, group))
    except csv.Error as err:
        raise UserError(f"{path}:{reader.line_num}: not CSV ({err})") from err
    if not rows:
        raise UserError(f"{path}: no strips listed")
    return check_duplicates(path, rows, warn)


def load_folder(
    folder: Path | str,
    height: int,
    warn: Warn = warn_stderr,
    crop: bool = False,
    allow_outside: bool = False,
) -> tuple[StripBatch, list[str]]:
    """All strips of a folder (glyph spans unknown: zero) and their file names; ``crop`` as
    in ``load_image``, ``allow_outside`` as in ``read_labels``."""
    folder = Path(folder)
    rows = read_labels(folder, warn, allow_outside)
    images = []
    for name, _, line, _ in rows:
        where = f"{folder / LABELS}:{line}"
        try:
            images.append(
                load_image(folder / name, height, lambda m, w=where: warn(f"{w}: {m}"), crop)
            )
        except UserError as err:
            raise UserError(f"{where}: {err}") from err
    labels = [row[1] for row in rows]
    spans = torch.zeros(len(rows), max(len(s) for s in labels), 2, dtype=torch.long)
    return pad_strips(images, labels, spans), [row[0] for row in rows]
