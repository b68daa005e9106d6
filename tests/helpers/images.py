"""Small strip images written by hand for the data and CLI tests."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

from helpers.readers import strips


def strip_png(path: Path, inverted: bool = False) -> None:
    a = np.full((32, 60), 230, np.uint8)
    a[8:24, 10:20] = 20
    a[8:24, 30:40] = 20
    Image.fromarray(255 - a if inverted else a).save(path)


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims width x height pixels (8-bit grey) and holds none."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def write_folder(folder: Path, n: int = 12, seed: int = 9, invert: bool = False) -> Path:
    """Generated strips as PNG files plus labels.csv (as ``attnlab data export`` writes)."""
    s = strips([1 + i % 6 for i in range(n)], seed=seed)
    folder.mkdir(parents=True)
    rows = ["filename,label"]
    for i, label in enumerate(s.labels):
        a = np.round(s.images[i, :, : int(s.widths[i])].numpy() * 255).astype(np.uint8)
        Image.fromarray(255 - a if invert else a).save(folder / f"s{i:02d}.png")
        rows.append(f"s{i:02d}.png,{label}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    return folder
