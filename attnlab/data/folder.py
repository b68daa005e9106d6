"""User strips on disk: a folder of images plus ``labels.csv`` (``filename,label``).

``attnlab data export`` writes this format; any folder in it (images of any size or mode,
dark ink on light background) is readable as a dataset, resized to the model height.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import torch

from attnlab.data.strips import StripBatch, pad_strips
from attnlab.errors import UserError
from attnlab.io import atomic_write, write_text

LABELS = "labels.csv"


def load_image(path: Path | str, height: int) -> torch.Tensor:
    """Any image file -> (height, W) float in [0, 1], 1 = paper, aspect ratio kept."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            im.load()
            grey = im.convert("L")
    except FileNotFoundError as err:
        raise UserError(f"{path}: no such image") from err
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise UserError(f"{path}: not a readable image ({type(err).__name__})") from err
    w = max(1, round(grey.width * height / max(1, grey.height)))
    grey = grey.resize((w, height), Image.BILINEAR)
    return torch.from_numpy(np.asarray(grey, dtype=np.float32) / 255.0)


def read_labels(folder: Path) -> list[tuple[str, str, int]]:
    """(filename, label, line number) rows of ``folder/labels.csv``, checked."""
    path = folder / LABELS
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder")
    if not path.is_file():
        raise UserError(f"{path}: missing (a strip folder needs labels.csv: filename,label)")
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:2]] != ["filename", "label"]:
            raise UserError(f"{path}:1: header must be 'filename,label', got {header}")
        for row in reader:
            line = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != 2:
                raise UserError(
                    f"{path}:{line}: expected 2 fields (filename,label), got {len(row)}"
                )
            name, label = row[0].strip(), row[1].strip()
            if not label.isdigit() or not label.isascii():
                raise UserError(f"{path}:{line}: label {label!r} is not a string of digits 0-9")
            if not (folder / name).is_file():
                raise UserError(f"{path}:{line}: image file {name!r} not found in {folder}")
            rows.append((name, label, line))
    if not rows:
        raise UserError(f"{path}: no strips listed")
    return rows


def load_folder(folder: Path | str, height: int) -> tuple[StripBatch, list[str]]:
    """All strips of a folder (glyph spans unknown: zero) and their file names."""
    folder = Path(folder)
    rows = read_labels(folder)
    images = []
    for name, _, line in rows:
        try:
            images.append(load_image(folder / name, height))
        except UserError as err:
            raise UserError(f"{folder / LABELS}:{line}: {err}") from err
    labels = [label for _, label, _ in rows]
    spans = torch.zeros(len(rows), max(len(s) for s in labels), 2, dtype=torch.long)
    return pad_strips(images, labels, spans), [name for name, _, _ in rows]


def export_folder(batch: StripBatch, out: Path | str) -> Path:
    """Write strips as PNG files (cropped to their width) plus labels.csv."""
    from PIL import Image

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    digits = len(str(len(batch)))
    lines = ["filename,label"]
    for i, label in enumerate(batch.labels):
        name = f"strip_{i:0{digits}d}_{label}.png"
        pixels = batch.images[i, :, : int(batch.widths[i])].numpy()
        image = Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L")
        atomic_write(out / name, lambda p, im=image: im.save(p, format="PNG"))
        lines.append(f"{name},{label}")
    write_text(out / LABELS, "\n".join(lines) + "\n")
    return out
