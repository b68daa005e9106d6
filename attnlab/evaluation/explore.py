"""``explore.json``: the strips of an evaluation that the report's explorer shows.

For the first ``eval.explore_n`` strips of each length (the same indices for every run that
reads the same fixed set, so every reader's reading of a strip can be shown side by side)
it keeps what the evaluation already holds in memory: the strip image, its glyph spans, the
truth, the reading and its confidence, and the attention rows over the strip's real columns
when the reader has weights. The per-step confidences are one teacher-forced pass of the
sample's own readings (``Reader.digit_probs``), the probability of each read digit and then
of EOS given the reading before it: for greedy decoding their product is the confidence.

Compact by construction: a 16-level grey PNG per strip (base64), the attention rows as
uint8 that sum to exactly 255 per row (largest-remainder rounding: a row still sums to 1
when decoded), probabilities rounded to 4 decimals. Nothing here reads a strip from disk.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from attnlab.io import write_text
from attnlab.runs.jsonfiles import RunFileError

if TYPE_CHECKING:  # the report reads explore.json without torch (attnlab.report.explorer)
    from attnlab.data.strips import StripBatch
    from attnlab.evaluation.inference import Readings

VERSION = 1
WEIGHT_SCALE = 255  # a stored attention row sums to exactly this


GREY_LEVELS = 16  # the strip images keep 16 grey levels: half the bytes of 256, same look


def png_base64(image: np.ndarray) -> str:
    """(H, W) float image, 1 = paper -> a 4-bit grey PNG (``GREY_LEVELS`` levels), base64."""
    top = GREY_LEVELS - 1
    index = np.clip(np.rint(np.asarray(image, dtype=np.float64) * top), 0, top).astype(np.uint8)
    png = Image.fromarray(index, mode="P")
    png.putpalette([round(i * 255 / top) for i in range(GREY_LEVELS) for _ in range(3)])
    buf = io.BytesIO()
    png.save(buf, format="PNG", optimize=True, bits=4)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def quantise_rows(weights: np.ndarray) -> np.ndarray:
    """(S, T) rows of weights (each summing to 1) -> uint8 rows summing to exactly 255.

    Largest-remainder rounding: each row is floored, then the units it still lacks go to
    the columns with the largest remainders. A row of zeros stays zeros."""
    w = np.clip(np.asarray(weights, dtype=np.float64), 0, None)
    sums = w.sum(-1, keepdims=True)
    scaled = np.divide(w, sums, out=np.zeros_like(w), where=sums > 0) * WEIGHT_SCALE
    out = np.floor(scaled)
    lack = np.where(sums[:, 0] > 0, WEIGHT_SCALE - out.sum(-1), 0).astype(int)
    order = np.argsort(-(scaled - out), axis=-1, kind="stable")
    for row, k in enumerate(lack):
        out[row, order[row, :k]] += 1
    return out.astype(np.uint8)


def encode_rows(weights: np.ndarray) -> str:
    return base64.b64encode(quantise_rows(weights).tobytes()).decode("ascii")


def decode_rows(text: str, steps: int, columns: int) -> np.ndarray:
    """explore.json's ``weights`` -> (steps, columns) float rows, each summing to 1."""
    raw = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
    return raw.reshape(steps, columns).astype(np.float64) / WEIGHT_SCALE


def strip_digest(image: np.ndarray, truth: str) -> str:
    """Names a strip by its pixels and label: two runs showed the same strip when equal."""
    grey = np.clip(np.rint(np.asarray(image, dtype=np.float64) * 255), 0, 255).astype(np.uint8)
    h = hashlib.sha1(truth.encode("utf-8") + b"\0" + str(grey.shape).encode() + grey.tobytes())
    return h.hexdigest()[:16]


def step_confidences(reader, device, strips: StripBatch, texts: list[str]) -> np.ndarray | None:
    """(N, Lmax + 1) probability of each read digit and then EOS, or None when the reader
    cannot say (``digit_probs`` not implemented)."""
    import torch

    try:
        with torch.no_grad():
            p = reader.digit_probs(strips.images.to(device), strips.widths.to(device), texts)
    except NotImplementedError:
        return None
    return p.float().cpu().numpy()


def sample(
    reader,
    device,
    sets: dict[int, tuple[StripBatch, list[str]]],
    readings: dict[int, tuple[StripBatch, Readings]],
    n: int,
    stride: int,
    known_spans: bool = True,
) -> dict[str, Any]:
    """explore.json's content: the first ``n`` strips of every length that was read."""
    strips_out = []
    for length, (strips, r) in readings.items():
        chosen = list(range(min(n, len(strips))))
        if not chosen:
            continue
        sources = sets[length][1]
        steps = step_confidences(
            reader, device, strips.select(chosen), [r.texts[i] for i in chosen]
        )
        for j, i in enumerate(chosen):
            width = int(strips.widths[i])
            image = strips.images[i, :, :width].numpy()
            truth, reading = strips.labels[i], r.texts[i]
            entry: dict[str, Any] = {
                "length": int(length),
                "index": i,
                "source": str(sources[i]),
                "truth": truth,
                "reading": reading,
                "confidence": float(r.confidence[i]),
                "steps": None
                if steps is None
                else [round(float(p), 4) for p in steps[j, : len(reading) + 1]],
                "width": width,
                "spans": strips.spans[i, : len(truth)].tolist() if known_spans else None,
                "digest": strip_digest(image, truth),
                "image": png_base64(image),
                "columns": None,
                "weights": None,
            }
            if r.weights is not None and r.weights[i] is not None:
                w = np.asarray(r.weights[i])
                entry["columns"] = int(w.shape[1])
                entry["weights"] = encode_rows(w)
                entry["weight_steps"] = int(w.shape[0])
            strips_out.append(entry)
    return {
        "version": VERSION,
        "reader": reader.name,
        "stride": int(stride),
        "height": int(next(iter(readings.values()))[0].images.shape[1]) if readings else 0,
        "explore_n": int(n),
        "has_weights": any(s["weights"] is not None for s in strips_out),
        "strips": strips_out,
    }


def write(path: Path, content: dict[str, Any]) -> Path:
    return write_text(path, json.dumps(content, separators=(",", ":")) + "\n")


def read(path: Path) -> dict[str, Any]:
    """explore.json, checked for the fields the report uses; RunFileError when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise RunFileError(f"no {Path(path).name}") from err
    except (OSError, ValueError) as err:
        raise RunFileError(f"unreadable {Path(path).name}: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("strips"), list):
        raise RunFileError(f"unreadable {Path(path).name}: no strips")
    if data.get("version") != VERSION:
        raise RunFileError(f"{Path(path).name}: version {data.get('version')!r}, not {VERSION}")
    need = ("length", "index", "truth", "reading", "confidence", "width", "digest", "image")
    for s in data["strips"]:
        if not isinstance(s, dict) or any(k not in s for k in need):
            raise RunFileError(f"{Path(path).name}: a strip lacks {', '.join(need)}")
    return data
