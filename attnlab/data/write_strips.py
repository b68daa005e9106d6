"""Strips written to disk as a folder the loaders read back (``attnlab data export``): one
PNG per strip, cropped to its width, plus ``labels.csv`` (``filename,label``; the format of
``attnlab.data.folder``)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from attnlab.data.folder import LABELS, labels_text
from attnlab.data.strips import StripBatch
from attnlab.errors import UserError
from attnlab.io import atomic_write, csv_rows, write_text


def export_folder(batch: StripBatch, out: Path | str, force: bool = False) -> Path:
    """Write strips as PNG files (cropped to their width) plus labels.csv. Files of an
    earlier export are refused before anything is written, unless ``force``: then they are
    replaced, and those this export does not write again are removed once its labels.csv is
    written, so the folder holds exactly what labels.csv lists (``_earlier_export``)."""
    from PIL import Image

    out = Path(out)
    digits = len(str(len(batch)))
    names = [f"strip_{i:0{digits}d}_{label}.png" for i, label in enumerate(batch.labels)]
    taken = [n for n in [LABELS, *names] if (out / n).exists()]
    stale = _earlier_export(out) - {LABELS, *names} if force else set()
    if taken and not force:
        raise UserError(
            f"export.out={out}: {taken[0]} exists (an earlier export?); choose another folder "
            f"or add --force to replace its files"
        )
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (label, name) in enumerate(zip(batch.labels, names, strict=True)):
        pixels = batch.images[i, :, : int(batch.widths[i])].numpy()
        image = Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L")
        atomic_write(out / name, lambda p, im=image: im.save(p, format="PNG"))
        rows.append([name, label])
    write_text(out / LABELS, csv_rows(["filename", "label"], rows))
    for name in sorted(stale):
        (out / name).unlink(missing_ok=True)
    return out


def _earlier_export(out: Path) -> set[str]:
    """The files an earlier export left in ``out``: those its labels.csv lists (plain names,
    no sub-folders), its strips by their names (``strip_<i>_<label>.png``, also when its
    labels.csv is gone) and an LMDB's data.mdb and lock.mdb. Anything else is not ours."""
    if not out.is_dir():
        return set()
    found = {p.name for p in out.glob("strip_*_*.png") if p.is_file()}
    found |= {n for n in ("data.mdb", "lock.mdb") if (out / n).is_file()}
    try:
        listed = list(csv.reader(labels_text(out / LABELS).splitlines()))[1:]
    except (OSError, UserError, csv.Error):
        return found
    return found | {
        row[0] for row in listed if row and "/" not in row[0] and (out / row[0]).is_file()
    }
