"""The preprocessing of ``attnlab read`` in NumPy and Pillow alone, for the reference loop.

``attnlab.data.folder`` (the loader of ``attnlab read`` and ``attnlab eval --folder``)
returns torch tensors and imports torch; this is its NumPy part written again so that a
deployment needs no torch: decode (grey by image mode, 16-bit and float samples scaled,
alpha over white paper, EXIF orientation), invert light ink on dark paper, place the ink as
the generator places it (``crop``), resize to the model's height (bilinear, in float), pad a
batch with paper. ``tests/test_export.py`` checks it gives the loader's pixels exactly.
"""

from __future__ import annotations

import stat
import warnings
from pathlib import Path

import numpy as np

from attnlab.errors import UserError

PLAIN = {"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr", "HSV"}
ALPHA = {"LA", "PA", "RGBA", "RGBa"}
DEEP = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}
INK_MASS = (0.05, 0.95)
INK_HEIGHT, INK_CENTRE, SIDE_MARGIN = 0.55, 0.55, 0.19
INK_COLUMN, CONTRAST, INVERT_CONTRAST = 0.02, 0.1, 0.2
PAPER, INK = 1.0, 0.0

# The sidecar's ``pixels``: what the graphs take and how ``attnlab read`` makes it from an
# image file, step by step (``prepare``), so that a reader without attnlab can feed them.
CONTRACT = {
    "images": "float32 (N, height, W): N strips, each `height` rows; W = the widest strip's "
    "width, narrower strips padded on the right with `padding`",
    "widths": "int64 (N,): each strip's own width in pixels, before padding",
    "scale": [INK, PAPER],
    "polarity": "dark ink on light paper: 1.0 is paper (white), 0.0 the darkest ink",
    "paper": PAPER,
    "ink": INK,
    "padding": PAPER,
    "grey": "8-bit samples / 255 of Pillow's convert('L') (ITU-R 601-2 luma), after EXIF "
    "orientation and alpha composited over white; 16-bit, 32-bit and float samples / the "
    "smallest 2^b - 1 (b = 8, 10, 12, 14, 16, 32) at least their maximum (float samples all "
    "<= 1.5: as they are), clipped to [0, 1]",
    "invert": f"1 - x when p99.9 - p0.1 > {INVERT_CONTRAST} and both the median of the image "
    "and the median of its border pixels are below (p0.1 + p99.9) / 2 (light ink on dark paper)",
    "crop": f"paper = p90, dark = min; skipped when paper - dark < {CONTRAST}. Ink: pixels below "
    f"(paper + dark) / 2. Ink columns: at least max(1, {INK_COLUMN} x the inkiest column's "
    f"count) ink pixels (none: skipped). c = cumulative ink per row / all ink; top = first row "
    f"where c >= {INK_MASS[0]}, bottom = max(top + 1, first row where c >= {INK_MASS[1]}, + 1); "
    f"h = (bottom - top) / {INK_HEIGHT}; rows y0 = round((top + bottom) / 2 - {INK_CENTRE} h) "
    f"to y0 + max(1, round(h)); columns first ink column - m to last + 1 + m, m = "
    f"round({SIDE_MARGIN} h); outside the image: paper (attnlab read --no-crop: no crop)",
    "resize": "Pillow Image.fromarray(float32 grey).resize((max(1, round(W * height / H)), "
    "height), Image.BILINEAR) of the (H, W) cropped strip",
}


def full_scale(top: float, is_float: bool) -> float:
    if is_float and top <= 1.5:
        return 1.0
    return float(next((2**b - 1 for b in (8, 10, 12, 14, 16) if top <= 2**b - 1), 2**32 - 1))


def to_grey(im, name: str) -> np.ndarray:
    """A Pillow image -> (H, W) float32 in [0, 1], 1 = paper."""
    from PIL import Image

    if im.mode in DEEP:
        a = np.asarray(im).astype(np.float64)
        if not np.isfinite(a).all():
            raise UserError(f"{name}: float image with NaN or infinite pixels")
        return np.clip(a / full_scale(float(a.max(initial=0.0)), im.mode == "F"), 0, 1).astype(
            np.float32
        )
    if im.mode in ALPHA or (im.mode in PLAIN and "transparency" in im.info):
        im = Image.alpha_composite(Image.new("RGBA", im.size, "white"), im.convert("RGBA"))
    elif im.mode not in PLAIN:
        raise UserError(f"{name}: image mode {im.mode} is not supported (save it as grey or RGB)")
    return np.asarray(im.convert("L"), dtype=np.float32) / 255.0


def decode(path: Path | str) -> np.ndarray:
    """An image file's first frame as grey (H, W); every failure one UserError line."""
    from PIL import Image, ImageOps

    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise UserError(f"{path}: not a regular file (a pipe, device or folder is not read)")
    except OSError as err:
        raise UserError(f"{path}: no such image") from err
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(path)
        with im:
            im.load()
            im = ImageOps.exif_transpose(im)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise UserError(f"{path}: image too large (Pillow's decompression-bomb guard)") from err
    except Exception as err:
        raise UserError(f"{path}: not a readable image ({type(err).__name__})") from err
    return to_grey(im, str(path))


def is_inverted(grey: np.ndarray) -> bool:
    lo, hi = (float(v) for v in np.percentile(grey, [0.1, 99.9]))
    edges = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    mid = (lo + hi) / 2
    dark = float(np.median(grey)) < mid and float(np.median(edges)) < mid
    return hi - lo > INVERT_CONTRAST and dark


def crop_to_ink(grey: np.ndarray) -> np.ndarray:
    """The strip cut or padded with its paper so its ink sits where the generator's does."""
    paper, dark = float(np.percentile(grey, 90)), float(grey.min())
    if paper - dark < CONTRAST:
        return grey
    ink = grey < (paper + dark) / 2
    col_count = ink.sum(0)
    cols = np.flatnonzero(col_count >= max(1, INK_COLUMN * col_count.max()))
    if len(cols) == 0:
        return grey
    cum = np.cumsum(ink.sum(1)) / max(1, int(ink.sum()))
    top = int(np.searchsorted(cum, INK_MASS[0]))
    bottom = max(top + 1, int(np.searchsorted(cum, INK_MASS[1])) + 1)
    h = (bottom - top) / INK_HEIGHT
    y0 = round((top + bottom) / 2 - INK_CENTRE * h)
    margin = round(SIDE_MARGIN * h)
    y1 = y0 + max(1, round(h))
    x0, x1 = cols[0] - margin, cols[-1] + 1 + margin
    out = np.full((y1 - y0, x1 - x0), paper, dtype=np.float32)
    sy0, sy1 = max(0, y0), min(grey.shape[0], y1)
    sx0, sx1 = max(0, x0), min(grey.shape[1], x1)
    out[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = grey[sy0:sy1, sx0:sx1]
    return out


def prepare(grey: np.ndarray, height: int, crop: bool = True) -> np.ndarray:
    """Grey (H, W) in [0, 1] -> (height, W') float32, as ``attnlab read`` prepares it."""
    from PIL import Image

    if is_inverted(grey):
        grey = 1.0 - grey
    if crop:
        grey = crop_to_ink(grey)
    h, w = grey.shape
    width = max(1, round(w * height / h))
    return np.array(Image.fromarray(grey).resize((width, height), Image.BILINEAR))


def load_image(path: Path | str, height: int, crop: bool = True) -> np.ndarray:
    return prepare(decode(path), height, crop)


def pad(images: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Strips (height, W_i) -> a batch (B, height, max W) padded with paper, widths (B,)."""
    widths = np.array([im.shape[1] for im in images], dtype=np.int64)
    out = np.full((len(images), images[0].shape[0], int(widths.max())), PAPER, dtype=np.float32)
    for i, im in enumerate(images):
        out[i, :, : im.shape[1]] = im
    return out, widths
