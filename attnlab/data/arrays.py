"""In-memory images (a Pillow image, a 2-D or 3-D NumPy array) -> grey, as a file of the same
pixels is decoded (attnlab.data.pixels), then prepared as every strip is (``pixels.prepare``),
so that ``attnlab.load(...).read`` of an array gives the reading ``attnlab read`` gives of the
file. Torch-free: ``image_strip`` gives NumPy strips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from attnlab.data import pixels
from attnlab.data.pixels import TALL, Warn, full_scale, to_grey, warn_stderr
from attnlab.errors import UserError

LUMA = np.array([0.299, 0.587, 0.114])  # Pillow's convert("L") weights (ITU-R 601-2)
# How far below 0 float samples may reach and still be read as 0-1 (or 0-255) grey:
# resampling's undershoot beside a black stroke, as 1.02 is its overshoot on the paper. Any
# lower, and the array is on another scale (-1..1, int8): refused, as clipping it would
# turn half of its grey levels black without a word.
UNDERSHOOT = 0.05
DEEPEST = 2**32 - 1  # the white of the deepest samples read (32-bit); brighter is refused
# An array this many times taller than wide is read, with a warning: a strip is (H, W).
TALLER = 2.0


def image_strip(
    image: Any, i: int, height: int, crop: bool, warn: Warn = warn_stderr
) -> tuple[np.ndarray, str]:
    """One image of ``attnlab.load(...).read`` (a path, a Pillow image or a NumPy array) ->
    its strip (height, W) float32 as ``attnlab read`` prepares a file, and its name (the
    path, or ``<image i>``)."""
    from PIL import Image

    if isinstance(image, (str, Path)):
        return pixels.load_image(Path(image), height, crop=crop, warn=warn), str(image)
    name = f"<image {i}>"
    if isinstance(image, Image.Image):
        try:
            grey = pil_grey(image, name)
        except (ValueError, OSError) as err:  # closed, or its file gone or unreadable
            raise UserError(f"{name}: the PIL image cannot be read ({err})") from err
    elif isinstance(image, np.ndarray):
        grey = array_grey(image, name)
        check_orientation(grey.shape, height, name, warn)
    else:
        raise UserError(
            f"{name}: a {type(image).__name__} is not an image (give a path, a PIL image "
            "or a NumPy array)"
        )
    return pixels.prepare(grey, height, crop=crop, name=name, warn=warn), name


def pil_grey(image, name: str) -> np.ndarray:
    """A Pillow image -> (H, W) float32 in [0, 1], turned upright by its EXIF as a file is."""
    from PIL import ImageOps

    return to_grey(ImageOps.exif_transpose(image), name)


def array_grey(array: np.ndarray, name: str) -> np.ndarray:
    """A (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) array -> (H, W) float32 in [0, 1].

    The scale is decided from the dtype and the values (``array_scale``); a fourth channel is
    alpha, composited over white paper. An image with no contrast once scaled (blank, or a
    mask read on the wrong scale) is refused, by the rule of every path
    (``pixels.check_readable``), its dtype and values named."""
    from PIL import Image

    a = given = np.asarray(array)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)) or 0 in a.shape:
        raise UserError(
            f"{name}: an array of shape {a.shape} is not an image (H x W, or H x W x 1, 3 or 4)"
        )
    numeric = np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)
    if not (a.dtype == np.bool_ or numeric):
        raise UserError(f"{name}: arrays of {a.dtype} are not images (use integers or floats)")
    if a.dtype == np.bool_:  # False ink, True paper: as a PNG of 0/255 pixels
        a = a.astype(np.uint8) * np.uint8(255)
    scale = array_scale(a, name)
    if scale is None:  # uint8 and bool: through Pillow, as a PNG of those pixels would be
        grey = to_grey(Image.fromarray(np.ascontiguousarray(a)), name)
    else:
        v = np.clip(a.astype(np.float64) / scale, 0.0, 1.0)
        if v.ndim == 3:
            rgb = v[:, :, :3] @ LUMA  # (H, W)
            v = rgb if a.shape[2] == 3 else rgb * v[:, :, 3] + (1.0 - v[:, :, 3])
        grey = v.astype(np.float32)
    pixels.check_readable(grey, name, f", from {given.dtype} values {_range(given)}")
    return grey


def array_scale(a: np.ndarray, name: str) -> float | None:
    """White of an array's samples, from its dtype and its values (None: Pillow's, for
    uint8 and bool, as a PNG of the pixels).

    - bool: False ink, True paper;
    - integers of only 0 and 1 (a thresholded mask, ``(u8 > 128).astype(int)``): 0/1;
    - other uint8: 0-255; deeper integers: 0..2**b-1, the smallest usual depth b that holds
      the brightest value (``full_scale``);
    - floats whose brightest value is at most 1.5: 0-1, overshoot (1.02 after resampling)
      clipped; brighter floats: 0-255 (or deeper, as integers).
    """
    if a.dtype == np.bool_:
        return None
    if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
        raise UserError(f"{name}: float image with NaN or infinite pixels")
    is_float = np.issubdtype(a.dtype, np.floating)
    top, low = float(a.max(initial=0)), float(a.min(initial=0))
    if top > DEEPEST:
        raise UserError(
            f"{name}: {a.dtype} values {_range(a)} reach above {DEEPEST} (32-bit white, the "
            "deepest samples read): rescale to 0-1 floats or 0-255 integers"
        )
    if not is_float and top <= 1 and low >= 0:
        scale = 1.0
    elif a.dtype == np.uint8:
        return None
    else:
        scale = full_scale(top, is_float)
    if low < (-UNDERSHOOT * scale if is_float else 0):
        raise UserError(
            f"{name}: {a.dtype} values {_range(a)} go below 0 (black): grey levels are 0 (ink) "
            f"to {scale:g} (paper); rescale them (e.g. (a + 1) / 2 for -1..1)"
        )
    return scale


def _range(a: np.ndarray) -> str:
    lo, hi = a.min(), a.max()
    return f"{lo:g}..{hi:g}" if np.issubdtype(a.dtype, np.floating) else f"{int(lo)}..{int(hi)}"


def check_orientation(
    shape: tuple[int, ...], height: int, name: str, warn: Warn = warn_stderr
) -> None:
    """Refuse an array that cannot be a strip the right way up: a strip is one row of
    digits, so it is refused when it is over TALL times taller than wide, or when it is
    taller than wide with its width a multiple of the reader's height and its height not (a
    (W, H) strip made for this reader, or at 2 or 3 times its height, transposed). A narrow
    strip of one digit (taller than wide, but not as wide as the reader is high) is read;
    one over TALLER times taller than wide is read with a warning that says so."""
    h, w = shape[:2]
    transposed = h > w and w % height == 0 and h % height != 0
    if transposed or h > TALL * w:
        why = (
            f"its width is {_times(w // height)}the reader's height ({height}): a (W, H) "
            "strip, transposed?"
            if transposed
            else f"{h / w:.1f} times taller than wide: a strip is one row of digits"
        )
        raise UserError(
            f"{name}: an array of {h} rows x {w} columns is not a strip the right way up "
            f"({why}); give it as (H, W)"
        )
    if h > TALLER * w:
        warn(
            f"{name}: an array of {h} rows x {w} columns, {h / w:.1f} times "
            "taller than wide, is read as it is (a strip is (H, W): if it is transposed, give "
            "its .T)"
        )


def _times(k: int) -> str:
    return "" if k == 1 else f"{k} times "
