"""A strip image's pixels, the one way attnlab prepares them: NumPy and Pillow alone, no torch.

Every reader of an image goes through here: a folder or an LMDB record
(``attnlab.data.folder``, which makes torch tensors of the result), an in-memory image of the
Python API (``attnlab.data.arrays`` makes it grey, then ``prepare``), and an ONNX export's
reference loop (``attnlab.export.runtime``, ``attnlab read --onnx``), which needs no torch.
The steps: ``decode`` (grey by image mode, 16-bit and float samples scaled, alpha over white
paper, EXIF orientation), then ``prepare``: refuse what holds nothing to read
(``check_readable``: too small for a digit, or no contrast: blank or all dark), invert light
ink on dark paper (``is_inverted``), place the ink as the generator places it
(``crop_to_ink``), resize to the model's height (``resize``); ``pad`` makes a batch.
``CONTRACT`` says the same in words for an export's sidecar, written from the constants
below, so that the two cannot drift apart.
"""

from __future__ import annotations

import io
import stat
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from attnlab.data.notes import INVERTED, shown
from attnlab.errors import UserError

Warn = Callable[[str], None]
TALL = 4.0  # height / width above which an image is not a row of digits
PAPER, INK = 1.0, 0.0  # the grey scale: 1 is paper (white), 0 the darkest ink

# Pillow modes by how they become grey; any other mode (LAB, La, ...) is refused.
PLAIN = {"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr", "HSV"}  # Pillow converts these to L
ALPHA = {"LA", "PA", "RGBA", "RGBa"}  # composited over white paper first
DEEP = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}  # 16/32-bit integer or float samples
DEPTHS = (8, 10, 12, 14, 16, 24, 32)  # the usual bits of deep samples (``full_scale``)
FLOAT_WHITE = 1.5  # float samples none brighter than this are 0..1

# What holds nothing to read is refused (``check_readable``), on every path: an image whose grey
# levels all lie within NO_CONTRAST of each other (2 of 255: under any scanner's faintest
# stroke, over the 1/255 of a 0/1 mask read as 0-255), blank or all dark; and one under
# MIN_ROWS rows or MIN_COLS columns, too small for a digit (the smallest legible pixel font
# draws digits 3 wide and 5 high).
NO_CONTRAST = 2 / 255
MIN_ROWS, MIN_COLS = 5, 3

# Inversion: the percentiles that span a strip's grey levels, and the span under which it
# is blank (scanner noise, not ink) and left alone.
SPAN = (0.1, 99.9)
INVERT_CONTRAST = 0.2

# Where the generator puts a string, measured over its default strips (attnlab data export,
# 2,000 strips of lengths 1-8): the rows holding the middle INK_MASS of a strip's ink span
# 55% of the height (53-56% at every length), centred 55% of the way down, with about 19%
# of the height of paper left and right of the ink. The ink's outermost rows would not do:
# each glyph's own vertical jitter widens them with the string's length (58% of the height
# at length 1, 68% at length 8), so long strips were shrunk by up to 15% on reading.
INK_MASS = (0.05, 0.95)
INK_HEIGHT, INK_CENTRE, SIDE_MARGIN = 0.55, 0.55, 0.19
PAPER_PERCENTILE = 90  # a strip's paper level (a tight crop is mostly ink)
CONTRAST = 0.1  # paper - darkest pixel under which ink is not told from paper
INK_COLUMN = 0.02  # columns with fewer ink pixels than this share of the fullest's: specks


def warn_stderr(message: str) -> None:
    """The default warning: one line on stderr, like the one-line errors; written in one
    call, so that lines warned from the decoding threads (``strip_cache.decode_all``) do not
    interleave (``print`` writes the newline apart)."""
    sys.stderr.write(f"attnlab: warning: {message}\n")


def full_scale(top: float, is_float: bool) -> float:
    """White of deep samples, from the data, as the file records the type but not the range.

    Float samples whose brightest value is at most FLOAT_WHITE are 0..1 (overshoot clipped);
    any other deep samples are 0..2**b-1 for the smallest usual depth b in DEPTHS that holds
    the brightest value (a 12-bit scan in a 16-bit PNG, a float TIFF in 0..255).
    Paper is the brightest part of a strip, so it sits near the top of its range.
    """
    if is_float and top <= FLOAT_WHITE:
        return 1.0
    return float(next((2**b - 1 for b in DEPTHS[:-1] if top <= 2**b - 1), 2 ** DEPTHS[-1] - 1))


def to_grey(im, path: Path | str) -> np.ndarray:
    """A Pillow image of any supported mode -> (H, W) float32 in [0, 1], 1 = paper."""
    from PIL import Image

    if im.mode in DEEP:
        a = np.asarray(im).astype(np.float64)  # (H, W)
        if not np.isfinite(a).all():
            raise UserError(f"{shown(path)}: float image with NaN or infinite pixels")
        scale = full_scale(float(a.max(initial=0.0)), im.mode == "F")
        return np.clip(a / scale, 0.0, 1.0).astype(np.float32)
    if im.mode in ALPHA or (im.mode in PLAIN and "transparency" in im.info):
        paper = Image.new("RGBA", im.size, "white")
        im = Image.alpha_composite(paper, im.convert("RGBA"))
    elif im.mode not in PLAIN:
        raise UserError(
            f"{shown(path)}: image mode {im.mode} is not supported (save it as grey or RGB)"
        )
    return np.asarray(im.convert("L"), dtype=np.float32) / 255.0


def decode(path: Path | str, notes: list[str] | None = None, data: bytes | None = None):
    """The first frame of an image file as grey (H, W) float32; every failure is one
    UserError line. ``notes``: what is doubtful about the file is appended (more than one
    frame). ``data``: the file's bytes (an LMDB record), ``path`` then only names it."""
    from PIL import Image, ImageOps

    path, notes = Path(path), [] if notes is None else notes
    try:  # a FIFO or a device would block Pillow's read forever
        regular = data is not None or stat.S_ISREG(path.stat().st_mode)
    except OSError:
        regular = True  # missing: Pillow's open says so below
    if not regular:
        raise UserError(f"{shown(path)}: not a regular file (a pipe, device or folder is not read)")
    try:
        with warnings.catch_warnings():  # one limit: refuse what Pillow only warns about
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(path if data is None else io.BytesIO(data))
        with im:
            # MPO: a camera JPEG and its previews, one picture
            if getattr(im, "is_animated", False) and im.format != "MPO":
                notes.append(f"{im.n_frames} frames (pages): only the first is read")
            im.load()
            im = ImageOps.exif_transpose(im)  # a phone photo stands the way it was shot
    except FileNotFoundError as err:
        raise UserError(f"{shown(path)}: no such image") from err
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise UserError(
            f"{shown(path)}: image too large (over {Image.MAX_IMAGE_PIXELS} pixels, Pillow's guard "
            "against decompression bombs): crop or downscale it"
        ) from err
    except Exception as err:  # Pillow's decoders raise many types on a corrupt file
        raise UserError(f"{shown(path)}: not a readable image ({type(err).__name__})") from err
    return to_grey(im, path)


def shape_note(h: int, w: int) -> str | None:
    """Why an image of this size is unlikely to be a strip (a row of digits), if it is."""
    if h > TALL * w:
        return f"{h / w:.1f} times taller than wide: a strip is one row of digits"
    return None


def check_readable(grey: np.ndarray, name: Path | str, detail: str = "") -> None:
    """Refuse, in one line naming the image, a decoded grey image (H, W) that holds nothing
    to read: under MIN_ROWS rows or MIN_COLS columns, or no contrast (every pixel within
    NO_CONTRAST of the others: blank paper, all black). The one rule of every path (folders
    for training, validation and evaluation, ``attnlab read``, the API, an export's loop):
    read, such an image gives a reading ("(empty)" at 0.999, or a digit) without a word.
    ``detail``: how the pixels were scaled (the API's arrays)."""
    h, w = grey.shape
    if h < MIN_ROWS or w < MIN_COLS:
        raise UserError(
            f"{shown(name)}: {w}x{h} pixels, too small to hold a digit (a strip is at least "
            f"{MIN_COLS} pixels wide and {MIN_ROWS} high): nothing to read"
        )
    if float(grey.max() - grey.min()) < NO_CONTRAST:
        raise UserError(
            f"{shown(name)}: no contrast (every pixel {float(grey.mean()):.3f} on the 0-1 "
            f"scale{detail}; blank or all dark): nothing to read"
        )


def is_inverted(grey: np.ndarray) -> bool:
    """Light ink on dark paper: paper covers most of a strip and its edges, so both the median
    and the edges' median lie nearer the dark end than the light end (both: a tight crop of
    bold digits may be mostly ink). A blank image is left alone: one whose grey levels span
    under INVERT_CONTRAST between the SPAN percentiles (scanner noise, not ink)."""
    lo, hi = (float(v) for v in np.percentile(grey, list(SPAN)))
    edges = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])  # (2W + 2H,)
    mid = (lo + hi) / 2
    return (
        hi - lo > INVERT_CONTRAST and float(np.median(grey)) < mid and float(np.median(edges)) < mid
    )


def ink_of(grey: np.ndarray) -> np.ndarray | None:
    """(H, W) grey, 1 = paper -> (H, W) bool: what is darker than halfway from the strip's
    paper (its PAPER_PERCENTILE) to its darkest pixel. None: too little contrast (under
    CONTRAST) to tell ink from paper."""
    paper, dark = float(np.percentile(grey, PAPER_PERCENTILE)), float(grey.min())
    return None if paper - dark < CONTRAST else grey < (paper + dark) / 2


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
    with a speck or two of ink (under INK_COLUMN of the fullest) do not count.
    """
    ink = ink_of(grey)  # (H, W)
    if ink is None:
        return grey
    paper = float(np.percentile(grey, PAPER_PERCENTILE))
    col_count = ink.sum(0)
    cols = np.flatnonzero(col_count >= max(1, INK_COLUMN * col_count.max()))
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


def resize(grey: np.ndarray, height: int) -> np.ndarray:
    """(H, W) -> (height, W * height / H), bilinear in float (no 8-bit rounding)."""
    from PIL import Image

    h, w = grey.shape
    width = max(1, round(w * height / h))
    return np.array(Image.fromarray(grey).resize((width, height), Image.BILINEAR))


def prepare(
    grey: np.ndarray,
    height: int,
    *,
    crop: bool = False,
    name: Path | str = "image",
    warn: Warn | None = None,
    notes: list[str] | None = None,
) -> np.ndarray:
    """A decoded grey image (H, W) in [0, 1] -> (height, W') float32, 1 = paper, aspect ratio
    kept: light ink on dark paper inverted, the ink placed as the generator places it when
    ``crop`` (``crop_to_ink``), resized; refused (UserError) when it holds nothing to read
    (``check_readable``). What is doubtful about it (its shape, an inversion),
    after ``notes`` (the decoder's), goes to ``warn`` as one line naming it (None: unsaid)."""
    check_readable(grey, name)
    notes = list(notes or [])
    note = shape_note(*grey.shape)
    notes += [note] if note else []
    if is_inverted(grey):
        grey = 1.0 - grey
        notes.append(INVERTED)
    if crop:
        grey = crop_to_ink(grey)
    grey = resize(grey, height)  # (height, W')
    if notes and warn is not None:
        warn(f"{shown(name)}: {'; '.join(notes)}")
    return grey


def own_height(grey: np.ndarray, *, crop: bool = False) -> int:
    """A decoded grey image's height at its own resolution, as ``prepare`` would place it:
    the height of its ink's crop (``crop_to_ink``) with ``crop``, else the image's."""
    if is_inverted(grey):
        grey = 1.0 - grey
    return int((crop_to_ink(grey) if crop else grey).shape[0])


def load_image(
    path: Path | str,
    height: int,
    *,
    crop: bool = False,
    warn: Warn | None = None,
    data: bytes | None = None,
) -> np.ndarray:
    """Any image file -> (height, W) float32 in [0, 1] (``decode``, then ``prepare``).
    Raises one-line UserErrors; anything doubtful goes to ``warn`` as one line naming the
    file. ``data``: the image file's bytes (an LMDB record named ``path``)."""
    notes: list[str] = []
    grey = decode(path, notes, data)  # (H, W)
    return prepare(grey, height, crop=crop, name=path, warn=warn, notes=notes)


def pad(images: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Strips (height, W_i) -> a batch (B, height, max W) padded with paper, widths (B,)."""
    widths = np.array([im.shape[1] for im in images], dtype=np.int64)
    out = np.full((len(images), images[0].shape[0], int(widths.max())), PAPER, dtype=np.float32)
    for i, im in enumerate(images):
        out[i, :, : im.shape[1]] = im
    return out, widths


def _contract() -> dict:
    """What an export's graphs take and how ``prepare`` makes it from an image file, step by
    step, from the constants above: an export's sidecar holds it (``pixels``), so that a
    reader without attnlab can feed the graphs (scripts/read_onnx.py)."""
    lo, hi = (f"p{p:g}" for p in SPAN)
    depths = ", ".join(map(str, DEPTHS))
    return {
        "refused": f"an image under {MIN_ROWS} rows or {MIN_COLS} columns, or whose grey "
        f"pixels (below) all lie within {NO_CONTRAST:.6f} of each other (max - min: blank "
        "or all dark), is refused, not read",
        "images": "float32 (N, height, W): N strips, each `height` rows; W = the widest "
        "strip's width, narrower strips padded on the right with `padding`",
        "widths": "int64 (N,): each strip's own width in pixels, before padding",
        "scale": [INK, PAPER],
        "polarity": f"dark ink on light paper: {PAPER} is paper (white), {INK} the darkest ink",
        "paper": PAPER,
        "ink": INK,
        "padding": PAPER,
        "grey": "8-bit samples / 255 of Pillow's convert('L') (ITU-R 601-2 luma), after EXIF "
        "orientation and alpha composited over white; 16-bit, 32-bit and float samples / the "
        f"smallest 2^b - 1 (b = {depths}) at least their maximum (float samples all "
        f"<= {FLOAT_WHITE}: as they are), clipped to [0, 1]",
        "invert": f"1 - x when {hi} - {lo} > {INVERT_CONTRAST} and both the median of the "
        f"image and the median of its border pixels are below ({lo} + {hi}) / 2 (light ink "
        "on dark paper)",
        "crop": f"paper = p{PAPER_PERCENTILE}, dark = min; skipped when paper - dark < "
        f"{CONTRAST}. Ink: pixels below (paper + dark) / 2. Ink columns: at least max(1, "
        f"{INK_COLUMN} x the inkiest column's count) ink pixels (none: skipped). c = "
        f"cumulative ink per row / all ink; top = first row where c >= {INK_MASS[0]}, bottom "
        f"= max(top + 1, first row where c >= {INK_MASS[1]}, + 1); h = (bottom - top) / "
        f"{INK_HEIGHT}; rows y0 = round((top + bottom) / 2 - {INK_CENTRE} h) to y0 + max(1, "
        f"round(h)); columns first ink column - m to last + 1 + m, m = round({SIDE_MARGIN} "
        "h); outside the image: paper (attnlab read --no-crop: no crop)",
        "resize": "Pillow Image.fromarray(float32 grey).resize((max(1, round(W * height / H)), "
        "height), Image.BILINEAR) of the (H, W) cropped strip",
    }


# The sidecar's ``pixels`` (``attnlab.export.sidecar`` refuses a sidecar without this one).
CONTRACT = _contract()
