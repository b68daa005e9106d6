"""Attention-map pictures: written whole, readable size, no crash on mismatched readings."""

import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from attnlab.evaluation.figures.maps import draw_attention_map, draw_attention_summary
from attnlab.evaluation.metrics import per_length_table

STRIDE = 4


def _strip(n_glyphs: int, glyph_w: int = 18, gap: int = 6, h: int = 32):
    """White strip with dark rectangles as glyphs; pixel spans of each glyph."""
    w = gap + n_glyphs * (glyph_w + gap)
    image = np.ones((h, w))
    spans = np.array(
        [[gap + i * (glyph_w + gap), gap + i * (glyph_w + gap) + glyph_w] for i in range(n_glyphs)]
    )
    for a, b in spans:
        image[6:26, a + 2 : b - 2] = 0.1
    return image, spans


def _weights(n_steps: int, n_cols: int, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).random((n_steps, n_cols)) + 5 * np.eye(n_steps, n_cols)
    return w / w.sum(axis=1, keepdims=True)


def _check_png(path, min_w=400, max_w=1700):
    assert path.exists() and path.stat().st_size > 0
    with Image.open(path) as im:
        assert im.format == "PNG"
        w, h = im.size
    assert min_w <= w <= max_w and 200 <= h <= 1500
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


@pytest.mark.parametrize(
    ("truth", "reading", "n_cols_delta"),
    [
        ("12345", "12345", 0),
        ("12345", "12845", -1),  # weight columns cover slightly less than the strip
        ("12345", "123", 2),  # reading shorter than truth, columns cover a bit more
        ("12345", "", 0),  # empty reading: only the EOS row
        ("123", "1234567", 0),  # reading longer than truth
    ],
)
def test_draw_attention_map(tmp_path, truth, reading, n_cols_delta):
    image, spans = _strip(len(truth))
    n_cols = image.shape[1] // STRIDE + n_cols_delta
    weights = _weights(len(reading) + 1, n_cols)
    path = tmp_path / "map.png"
    draw_attention_map(path, image, weights, STRIDE, truth, reading, 0.81, spans, 0.2)
    _check_png(path)


def test_draw_attention_map_fewer_weight_rows_than_reading(tmp_path):
    image, spans = _strip(30)  # long strip: width capped
    weights = _weights(10, image.shape[1] // STRIDE)
    path = tmp_path / "long.png"
    draw_attention_map(path, image, weights, STRIDE, "1" * 30, "1" * 29, math.nan, spans, 1 / 30)
    _check_png(path)


def _table(with_attention: bool) -> pd.DataFrame:
    rows = []
    for length in range(3, 10):
        for j in range(4):
            truth = "7" * length
            reading = truth if j else truth[:-1]
            rows.append(
                {
                    "length": length,
                    "truth": truth,
                    "reading": reading,
                    "confidence": 0.9,
                    "align_hits": (length - (length > 6)) * with_attention,
                    "align_steps": length * with_attention,
                    "entropy": 0.1 * length if with_attention else math.nan,
                }
            )
    return per_length_table(pd.DataFrame(rows), seen=range(3, 7), n_boot=20)


@pytest.mark.parametrize("with_attention", [True, False])
def test_draw_attention_summary(tmp_path, with_attention):
    path = tmp_path / "summary.png"
    draw_attention_summary(path, _table(with_attention), seen=[3, 4, 5, 6])
    _check_png(path)
