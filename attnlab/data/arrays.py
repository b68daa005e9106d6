"""In-memory images (a Pillow image, a 2-D or 3-D NumPy array) -> grey, as a file of the same
pixels is decoded (attnlab.data.folder), so that ``attnlab.load(...).read`` of an array gives
the reading ``attnlab read`` gives of the file."""

from __future__ import annotations

import numpy as np

from attnlab.data.folder import full_scale, to_grey
from attnlab.errors import UserError

LUMA = np.array([0.299, 0.587, 0.114])  # Pillow's convert("L") weights (ITU-R 601-2)


def pil_grey(image, name: str) -> np.ndarray:
    """A Pillow image -> (H, W) float32 in [0, 1], turned upright by its EXIF as a file is."""
    from PIL import ImageOps

    return to_grey(ImageOps.exif_transpose(image), name)


def array_grey(array: np.ndarray, name: str) -> np.ndarray:
    """A (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) array -> (H, W) float32 in [0, 1].

    uint8 and bool arrays go through Pillow, as a PNG of those pixels would; deeper integer
    and float samples are scaled as the folder loader scales deep files (``full_scale``);
    a fourth channel is alpha, composited over white paper."""
    from PIL import Image

    a = np.asarray(array)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)) or 0 in a.shape:
        raise UserError(
            f"{name}: an array of shape {a.shape} is not an image (H x W, or H x W x 1, 3 or 4)"
        )
    if a.dtype == np.uint8 or a.dtype == np.bool_:
        return to_grey(Image.fromarray(np.ascontiguousarray(a)), name)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise UserError(f"{name}: arrays of {a.dtype} are not images (use integers or floats)")
    v = a.astype(np.float64)
    if not np.isfinite(v).all():
        raise UserError(f"{name}: float image with NaN or infinite pixels")
    v = np.clip(v / full_scale(float(v.max(initial=0.0)), a.dtype.kind == "f"), 0.0, 1.0)
    if v.ndim == 3:
        rgb = v[:, :, :3] @ LUMA  # (H, W)
        v = rgb if a.shape[2] == 3 else rgb * v[:, :, 3] + (1.0 - v[:, :, 3])
    return v.astype(np.float32)
