"""Read strips through an attnlab ONNX export with NumPy, Pillow and onnxruntime alone (no
torch, no attnlab): what ``attnlab read --onnx OUT IMAGE...`` prints, for a step-wise
reader's export (a CTC export: see attnlab/export/runtime.py).

    python scripts/read_onnx.py OUT IMAGE...      # file, reading, confidence per line

It follows the sidecar's input contract (``attnlab-onnx.json``, ``pixels``): ``images``
(N, height, W) float32, paper 1.0 and ink 0.0 (light ink on dark paper inverted first),
padded on the right with paper; ``widths`` (N,) int64, each strip's own width; a file gets
there by grey, invert, crop, resize. tests/test_export_readme.py runs it in an environment
without torch and attnlab and compares its output and its pixels with attnlab's.
"""

import json
import sys

import numpy as np
import onnxruntime as ort
from PIL import Image, ImageOps

folder, files = sys.argv[1], sys.argv[2:]  # an export of a step-wise reader; 8-bit images
meta = json.load(open(f"{folder}/attnlab-onnx.json"))
H, tok, g = meta["height"], meta["tokens"], meta["graphs"]
run = {k: ort.InferenceSession(f"{folder}/{v['file']}").run for k, v in g.items()}


def strip(path):  # meta["pixels"]: grey, invert, crop, resize; 1.0 = paper, 0.0 = ink
    x = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("L"), np.float32) / 255
    lo, hi = np.percentile(x, [0.1, 99.9])
    border = np.concatenate([x[0], x[-1], x[:, 0], x[:, -1]])
    if hi - lo > 0.2 and max(np.median(x), np.median(border)) < (lo + hi) / 2:
        x = 1 - x
    paper, dark = float(np.percentile(x, 90)), float(x.min())
    ink = x < (paper + dark) / 2
    cols = np.flatnonzero(ink.sum(0) >= max(1, 0.02 * ink.sum(0).max()))
    if paper - dark >= 0.1 and len(cols):
        mass = np.cumsum(ink.sum(1)) / ink.sum()
        top = int(np.searchsorted(mass, 0.05))
        bottom = max(top + 1, int(np.searchsorted(mass, 0.95)) + 1)
        h = (bottom - top) / 0.55
        y0, m = round((top + bottom) / 2 - 0.55 * h), round(0.19 * h)
        y1, x0, x1 = y0 + max(1, round(h)), cols[0] - m, cols[-1] + 1 + m
        a, b, c, d = max(0, y0), min(x.shape[0], y1), max(0, x0), min(x.shape[1], x1)
        out = np.full((y1 - y0, x1 - x0), paper, np.float32)
        out[a - y0 : b - y0, c - x0 : d - x0] = x[a:b, c:d]
        x = out
    size = (max(1, round(x.shape[1] * H / x.shape[0])), H)
    return np.array(Image.fromarray(x).resize(size, Image.BILINEAR))


strips = [strip(f) for f in files]
widths = np.array([s.shape[1] for s in strips], np.int64)  # (N,) int64
images = np.full((len(strips), H, widths.max()), meta["pixels"]["padding"], np.float32)
for i, s in enumerate(strips):
    images[i, :, : s.shape[1]] = s  # (N, H, W) float32, padded on the right
mem = dict(
    zip(
        g["encoder"]["outputs"],
        run["encoder"](None, {"images": images, "widths": widths}),
        strict=True,
    )
)
limit = mem["mask"].sum(1) + 1  # one step per encoder column, then EOS
prev, done = np.full(len(strips), tok["bos"]), np.zeros(len(strips), bool)
logp, text = np.zeros(len(strips), np.float32), [""] * len(strips)
for t in range(int(limit.max())):  # greedy: PAD and BOS never, EOS at the step limit
    feeds = {k: v for k, v in {**mem, "prev": prev}.items() if k in g["step"]["inputs"]}
    logits, mem["state"] = run["step"](None, feeds)[:2]
    lp = logits - logits.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    lp[:, [tok["pad"], tok["bos"]]] = -np.inf
    lp[t >= limit - 1] = np.where(np.arange(lp.shape[1]) == tok["eos"], 0, -np.inf)
    prev = np.where(done, tok["pad"], lp.argmax(1))
    logp += np.where(done, 0, lp.max(1))
    done |= prev == tok["eos"]
    text = [
        s + meta["charset"][p - tok["first_char"]] if p >= tok["first_char"] else s
        for s, p in zip(text, prev, strict=True)
    ]
    if done.all():
        break
for f, s, p in zip(files, text, np.exp(logp), strict=True):
    print(f, s or "(empty)", f"{p:.3f}")
