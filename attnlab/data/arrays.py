"""In-memory images (a Pillow image, a 2-D or 3-D NumPy array) -> grey, as a file of the same
pixels is decoded (attnlab.data.folder), so that ``attnlab.load(...).read`` of an array gives
the reading ``attnlab read`` gives of the file."""

from __future__ import annotations

import numpy as np

from attnlab.data.folder import TALL, full_scale, to_grey
from attnlab.errors import UserError

LUMA = np.array([0.299, 0.587, 0.114])  # Pillow's convert("L") weights (ITU-R 601-2)
# Grey levels an image must span to hold anything readable: 2 of 255, under any scanner's
# faintest stroke and over the 1/255 of a 0/1 mask read as 0-255.
NO_CONTRAST = 2 / 255


def pil_grey(image, name: str) -> np.ndarray:
    """A Pillow image -> (H, W) float32 in [0, 1], turned upright by its EXIF as a file is."""
    from PIL import ImageOps

    return to_grey(ImageOps.exif_transpose(image), name)


def array_grey(array: np.ndarray, name: str) -> np.ndarray:
    """A (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) array -> (H, W) float32 in [0, 1].

    The scale is decided from the dtype and the values (``array_scale``); a fourth channel is
    alpha, composited over white paper. An image with no contrast (every pixel within
    NO_CONTRAST of the others once scaled: blank, or a mask read on the wrong scale) is
    refused, as nothing in it can be read."""
    from PIL import Image

    a = np.asarray(array)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)) or 0 in a.shape:
        raise UserError(
            f"{name}: an array of shape {a.shape} is not an image (H x W, or H x W x 1, 3 or 4)"
        )
    if not (a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer)
            or np.issubdtype(a.dtype, np.floating)):  # fmt: skip
        raise UserError(f"{name}: arrays of {a.dtype} are not images (use integers or floats)")
    scale = array_scale(a, name)
    if scale is None:  # uint8 and bool: through Pillow, as a PNG of those pixels would be
        grey = to_grey(Image.fromarray(np.ascontiguousarray(a)), name)
    else:
        v = np.clip(a.astype(np.float64) / scale, 0.0, 1.0)
        if v.ndim == 3:
            rgb = v[:, :, :3] @ LUMA  # (H, W)
            v = rgb if a.shape[2] == 3 else rgb * v[:, :, 3] + (1.0 - v[:, :, 3])
        grey = v.astype(np.float32)
    if float(grey.max() - grey.min()) < NO_CONTRAST:
        raise UserError(
            f"{name}: no contrast (every pixel {float(grey.mean()):.3f} on the 0-1 scale, "
            f"from {a.dtype} values {_range(a)}): nothing to read"
        )
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
    top = float(a.max(initial=0))
    if np.issubdtype(a.dtype, np.integer):
        if top <= 1 and int(a.min(initial=0)) >= 0:
            return 1.0
        return None if a.dtype == np.uint8 else full_scale(top, False)
    if not np.isfinite(a).all():
        raise UserError(f"{name}: float image with NaN or infinite pixels")
    return full_scale(top, True)


def _range(a: np.ndarray) -> str:
    lo, hi = a.min(), a.max()
    return f"{lo:g}..{hi:g}" if np.issubdtype(a.dtype, np.floating) else f"{int(lo)}..{int(hi)}"


def check_orientation(shape: tuple[int, ...], height: int, name: str) -> None:
    """Refuse an array that cannot be a strip the right way up: a strip is one row of
    digits, so it is refused when it is over TALL times taller than wide, or when it is
    taller than wide with its width exactly the reader's height and its height not (a
    (W, H) strip made for this reader, transposed). A narrow strip of one digit (taller
    than wide, but not as wide as the reader is high) is read."""
    h, w = shape[:2]
    transposed = h > w and w == height and h != height
    if transposed or h > TALL * w:
        why = (
            f"its width is the reader's height ({height}): a (W, H) strip, transposed?"
            if transposed
            else f"{h / w:.1f} times taller than wide: a strip is one row of digits"
        )
        raise UserError(
            f"{name}: an array of {h} rows x {w} columns is not a strip the right way up "
            f"({why}); give it as (H, W)"
        )
