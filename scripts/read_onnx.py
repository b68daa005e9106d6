"""Read strips through an attnlab ONNX export with NumPy, Pillow and onnxruntime alone (no
torch, no attnlab): what ``attnlab read --onnx OUT IMAGE...`` prints, for every export (a
step-wise reader's encoder and step graphs, or a CTC reader's one graph: model=ctc, model=crnn,
the packaged reader ``pretrained``), greedy (``attnlab read``'s default, ``--beam 1``).

    python scripts/read_onnx.py OUT IMAGE...      # file, reading, confidence per line

It follows the sidecar's input contract (``attnlab-onnx.json``, ``pixels``) step by step,
with the constants of attnlab.data.pixels copied below: every image mode attnlab reads
(8-bit, 1-bit, palette, grey and RGB with alpha composited over white paper, 16-bit, 32-bit
and float samples scaled by their range), EXIF orientation, the first frame; an image that
holds nothing to read (blank, all dark, a few pixels) is refused, as attnlab refuses it;
then invert, crop, resize; ``images`` (N, height, W) float32, paper 1.0 and ink 0.0, padded
on the right with paper, ``widths`` (N,) int64, in batches of similar width as attnlab
reads them. A file it cannot read is one line on stderr (the others are still read, and it
exits with status 2). tests/test_export_readme.py runs it in an environment without torch
and attnlab and compares its output and its pixels with attnlab's.
"""

import json
import os
import stat
import sys
import warnings

import numpy as np
from PIL import Image, ImageOps

# attnlab.data.pixels (tests/test_export_readme.py checks that these are its values)
PLAIN = {"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr", "HSV"}
ALPHA = {"LA", "PA", "RGBA", "RGBa"}
DEEP = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}
DEPTHS = (8, 10, 12, 14, 16, 24, 32)
FLOAT_WHITE = 1.5
NO_CONTRAST = 2 / 255
MIN_ROWS, MIN_COLS = 5, 3
SPAN, INVERT_CONTRAST = (0.1, 99.9), 0.2
INK_MASS, INK_HEIGHT, INK_CENTRE, SIDE_MARGIN = (0.05, 0.95), 0.55, 0.55, 0.19
PAPER_PERCENTILE, CONTRAST, INK_COLUMN = 90, 0.1, 0.02
BATCH = 64  # strips per batch, sorted by width (attnlab.export.runtime.Export.read_strips)


class Refused(Exception):
    """An image the contract does not read: one line, naming it."""


def shown(name):
    """A file name as a terminal shows it, as attnlab prints it (attnlab.data.notes.shown)."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "backslashreplace")
    text = raw.decode("utf-8", "backslashreplace")
    return text if text.isprintable() else repr(text)


def full_scale(top, is_float):  # white of deep samples: the smallest usual depth holding them
    if is_float and top <= FLOAT_WHITE:
        return 1.0
    return float(next((2**b - 1 for b in DEPTHS[:-1] if top <= 2**b - 1), 2 ** DEPTHS[-1] - 1))


def grey(path):
    """meta["pixels"]["grey"]: an image file's first frame -> (H, W) float32, 1.0 = paper."""
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        raise Refused("not a regular file (a pipe, device or folder is not read)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(path)
        with im:
            im.load()
            im = ImageOps.exif_transpose(im)
    except FileNotFoundError:
        raise Refused("no such image") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise Refused(f"image too large (over {Image.MAX_IMAGE_PIXELS} pixels)") from None
    except Exception as err:
        raise Refused(f"not a readable image ({type(err).__name__})") from None
    if im.mode in DEEP:
        a = np.asarray(im).astype(np.float64)
        if not np.isfinite(a).all():
            raise Refused("float image with NaN or infinite pixels")
        scale = full_scale(float(a.max(initial=0.0)), im.mode == "F")
        return np.clip(a / scale, 0.0, 1.0).astype(np.float32)
    if im.mode in ALPHA or (im.mode in PLAIN and "transparency" in im.info):
        im = Image.alpha_composite(Image.new("RGBA", im.size, "white"), im.convert("RGBA"))
    elif im.mode not in PLAIN:
        raise Refused(f"image mode {im.mode} is not supported (save it as grey or RGB)")
    return np.asarray(im.convert("L"), dtype=np.float32) / 255.0


def check_readable(x):  # meta["pixels"]["refused"]
    h, w = x.shape
    if h < MIN_ROWS or w < MIN_COLS:
        raise Refused(f"{w}x{h} pixels, too small to hold a digit: nothing to read")
    if float(x.max() - x.min()) < NO_CONTRAST:
        raise Refused("no contrast (blank or all dark): nothing to read")


def invert(x):  # meta["pixels"]["invert"]: light ink on dark paper
    lo, hi = (float(v) for v in np.percentile(x, list(SPAN)))
    border = np.concatenate([x[0], x[-1], x[:, 0], x[:, -1]])
    mid = (lo + hi) / 2
    flip = hi - lo > INVERT_CONTRAST and np.median(x) < mid and np.median(border) < mid
    return 1.0 - x if flip else x


def crop(x):  # meta["pixels"]["crop"]: the ink placed as the generator places it
    paper, dark = float(np.percentile(x, PAPER_PERCENTILE)), float(x.min())
    if paper - dark < CONTRAST:
        return x
    ink = x < (paper + dark) / 2
    count = ink.sum(0)
    cols = np.flatnonzero(count >= max(1, INK_COLUMN * count.max()))
    if len(cols) == 0:
        return x
    mass = np.cumsum(ink.sum(1)) / max(1, int(ink.sum()))
    top = int(np.searchsorted(mass, INK_MASS[0]))
    bottom = max(top + 1, int(np.searchsorted(mass, INK_MASS[1])) + 1)
    h = (bottom - top) / INK_HEIGHT
    y0, m = round((top + bottom) / 2 - INK_CENTRE * h), round(SIDE_MARGIN * h)
    y1, x0, x1 = y0 + max(1, round(h)), cols[0] - m, cols[-1] + 1 + m
    out = np.full((y1 - y0, x1 - x0), paper, dtype=np.float32)
    a, b, c, d = max(0, y0), min(x.shape[0], y1), max(0, x0), min(x.shape[1], x1)
    out[a - y0 : b - y0, c - x0 : d - x0] = x[a:b, c:d]
    return out


def strip(path, height):
    """An image file -> (height, W) float32 as ``attnlab read`` prepares it: grey, refused
    when it holds nothing to read, invert, crop, resize (meta["pixels"])."""
    x = grey(path)
    check_readable(x)
    x = crop(invert(x))
    size = (max(1, round(x.shape[1] * height / x.shape[0])), height)
    return np.array(Image.fromarray(x).resize(size, Image.BILINEAR))


def pad(strips, padding=1.0):
    """Strips -> images (N, height, W) float32 padded on the right, widths (N,) int64."""
    widths = np.array([s.shape[1] for s in strips], np.int64)
    images = np.full((len(strips), strips[0].shape[0], widths.max()), padding, np.float32)
    for i, s in enumerate(strips):
        images[i, :, : s.shape[1]] = s
    return images, widths


def log_softmax(x):
    x = x.astype(np.float32)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def read_stepwise(meta, run, images, widths):
    """Greedy step-wise decoding: one step per encoder column, then EOS; PAD and BOS never."""
    tok, first = meta["tokens"], meta["tokens"]["first_char"]
    mem = run["encoder"]({"images": images, "widths": widths})
    state = mem.pop("state")
    limit = mem["mask"].sum(1).astype(np.int64) + 1
    n = len(widths)
    prev, done = np.full(n, tok["bos"], np.int64), np.zeros(n, bool)
    logp, text = np.zeros(n, np.float32), [""] * n
    for t in range(int(limit.max())):
        out = run["step"]({**mem, "state": state, "prev": prev})
        lp, state = log_softmax(out["logits"]), out["next_state"]
        lp[:, [tok["pad"], tok["bos"]]] = -np.inf
        lp[t >= limit - 1] = np.where(np.arange(lp.shape[1]) == tok["eos"], 0, -np.inf)
        best = lp.argmax(1)
        logp += np.where(done, np.float32(0), np.take_along_axis(lp, best[:, None], 1)[:, 0])
        prev = np.where(done, tok["pad"], best)
        done |= prev == tok["eos"]
        text = [
            s + meta["charset"][p - first] if p >= first else s
            for s, p in zip(text, prev, strict=True)
        ]
        if done.all():
            break
    return text, np.exp(logp)


def ctc_log_prob(logp, labels, blank):
    """log P(labels | columns) over every alignment (the forward algorithm)."""
    ext = np.full(2 * len(labels) + 1, blank, dtype=np.int64)
    ext[1::2] = labels
    u = len(ext)
    if len(logp) == 0:
        return np.float32(0.0 if u == 1 else -np.inf)
    skip = np.zeros(u, dtype=bool)
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    alpha = np.full(u, -np.inf)
    alpha[: min(2, u)] = logp[0, ext[: min(2, u)]]
    for i in range(1, len(logp)):
        one = np.concatenate([[-np.inf], alpha[:-1]])
        two = np.where(skip, np.concatenate([[-np.inf, -np.inf], alpha[:-2]])[:u], -np.inf)
        alpha = np.logaddexp(np.logaddexp(alpha, one), two) + logp[i, ext]
    return np.float32(np.logaddexp(alpha[-1], alpha[-2]) if u > 1 else alpha[-1])


def read_ctc(meta, run, images, widths):
    """Best path: the likeliest class per real column, repeats merged, blanks (the last
    class) dropped; its confidence sums every alignment of the reading."""
    out = run["ctc"]({"images": images, "widths": widths})
    logp, cols = out["log_probs"], out["columns"].astype(np.int64)
    b, t, c = logp.shape
    path = np.where(np.arange(t)[None] < cols[:, None], logp.argmax(-1), c - 1)
    texts, conf = [], np.zeros(b, dtype=np.float32)
    for i in range(b):
        prev = np.concatenate([[c - 1], path[i, :-1]])
        labels = path[i][(path[i] != c - 1) & (path[i] != prev)]
        texts.append("".join(meta["charset"][j] for j in labels))
        conf[i] = ctc_log_prob(logp[i, : cols[i]], labels, c - 1)
    return texts, np.exp(conf)


def graph(folder, entry):
    """One graph of the export as a function: feeds (its inputs taken from them, by the
    sidecar's names) -> its outputs by name."""
    import onnxruntime as ort

    path = os.path.join(folder, entry["file"])
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])

    def run(feeds):
        got = session.run(entry["outputs"], {k: feeds[k] for k in entry["inputs"]})
        return dict(zip(entry["outputs"], got, strict=True))

    return run


def main(folder, files):
    meta = json.load(open(os.path.join(folder, "attnlab-onnx.json"), encoding="utf-8"))
    run = {name: graph(folder, g) for name, g in meta["graphs"].items()}
    strips, names, bad = [], [], 0
    for f in files:
        try:
            strips.append(strip(f, meta["height"]))
            names.append(f)
        except Refused as err:
            print(f"read_onnx.py: error: {shown(f)}: {err}", file=sys.stderr)
            bad += 1
    read = read_ctc if meta["kind"] == "ctc" else read_stepwise
    texts, conf = [""] * len(strips), np.zeros(len(strips))
    order = np.argsort([s.shape[1] for s in strips], kind="stable")
    for start in range(0, len(strips), BATCH):
        idx = order[start : start + BATCH]
        images, widths = pad([strips[i] for i in idx], meta["pixels"]["padding"])
        for i, text, p in zip(idx, *read(meta, run, images, widths), strict=True):
            texts[i], conf[i] = text, p
    for f, text, p in zip(names, texts, conf, strict=True):
        print(shown(f), text or "(empty)", f"{p:.3f}")
    return 2 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python scripts/read_onnx.py EXPORT_FOLDER IMAGE...")
    sys.exit(main(sys.argv[1], sys.argv[2:]))
