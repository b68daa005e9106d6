"""The glyph bank is the same bit for bit on every x86-64 CPU (attnlab.data.warp): its
warping and blurring are float64, one elementwise step at a time, rounded to uint8 once, so
that torch's kernel choice (ATen's scalar, AVX2 or AVX-512 kernels, oneDNN's and MKL's
dispatch) and the thread count cannot move a pixel. Issue 50: torch's float32 kernels gave
three digests of the default bank on three kernel sets, and a fresh machine failed the pin.
And the bank's modules import downwards only: bank_cache (the cache, the bank's key and
GlyphBank) never imports glyphs (the drawing), nor the digit forms (attnlab.data.forms)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.data import warp

# ReportLab's twelve faces: every step of the drawing (elastic warps, old-style figures among
# them), in a fifth of a second; the kernels, not the faces, are what the runs vary.
TINY = (
    "DataConfig(fonts=['reportlab'], font_sizes=[26], stroke_widths=[0], variants=3, "
    "elastic=2.0, oldstyle=0.5)"
)
DIGEST = (
    "from attnlab.config import DataConfig\n"
    "from attnlab.data.bank_cache import content_digest\n"
    "from attnlab.data.glyphs import glyph_bank\n"
    f"print(content_digest(glyph_bank({TINY})))\n"
)
# What each run varies: torch's kernel set, oneDNN's and MKL's instruction sets, threads.
KERNELS = [
    {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"},
    {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2"},
    {"ATEN_CPU_CAPABILITY": "avx512", "OMP_NUM_THREADS": "1"},
    {"ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "OMP_NUM_THREADS": "2"},
]


@pytest.mark.slow  # four processes that build a bank each (about 2 s each, torch's import)
def test_the_bank_is_the_same_whichever_cpu_kernels_torch_uses():
    digests = []
    for extra in KERNELS:
        env = {**os.environ, "ATTNLAB_CACHE": "off", **extra}
        out = subprocess.run(
            [sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, check=True
        )
        digests.append(out.stdout.strip())
    assert len(digests[0]) == 32 and digests == [digests[0]] * len(KERNELS), digests


def test_the_exact_kernels_compute_what_torchs_compute():
    """Each float64 step is the torch operation it replaces, to float32's precision."""
    gen = torch.Generator().manual_seed(0)
    glyphs = torch.rand(3, 20, 30, generator=gen, dtype=torch.float64)
    p = warp.variant_params(3, 4, (0.8, 1.1), (0.9, 1.2), (-0.2, 0.2), (-5, 5), 2, gen)
    fields = warp.elastic_fields(3, 4, 1.5, gen)
    got = warp.affine_variants(glyphs.numpy(), p, fields)
    pt, ft = torch.from_numpy(p), torch.from_numpy(fields)  # torch's way, as before (float64)
    scale, shear, rot, wide = pt[..., 0], pt[..., 1], torch.deg2rad(pt[..., 2]), pt[..., 4]
    cos, sin, zero, aspect = torch.cos(rot), torch.sin(rot), torch.zeros_like(scale), 30 / 20
    row1 = torch.stack([cos / scale / wide, (-sin + shear) / scale / aspect / wide, zero], -1)
    row2 = torch.stack([sin / scale * aspect, cos / scale, -2.0 * pt[..., 3] / 20], -1)
    theta = torch.stack([row1, row2], -2).reshape(12, 2, 3)
    grid = F.affine_grid(theta, [12, 1, 20, 30], align_corners=False)
    field = F.interpolate(ft.reshape(12, 2, 4, 4), (20, 30), mode="bicubic", align_corners=True)
    grid = grid + (field * torch.tensor([2 / 30, 2 / 20]).view(1, 2, 1, 1)).permute(0, 2, 3, 1)
    src = glyphs[:, None].expand(3, 4, 20, 30).reshape(12, 1, 20, 30)
    want = F.grid_sample(src, grid, align_corners=False).reshape(3, 4, 20, 30)
    assert np.abs(got - want.numpy()).max() < 1e-6  # torch takes some steps in float32
    small = F.interpolate(glyphs[None, :1], size=(13, 17), mode="bilinear", align_corners=False)
    assert np.abs(warp.resize_linear(glyphs[0].numpy(), 13, 17) - small[0, 0].numpy()).max() < 1e-9
    blurred = warp.gaussian_blur(glyphs.numpy(), 0.8)  # radius 2: five taps each way
    x = torch.arange(-2, 3, dtype=torch.float64)
    k = torch.exp(-(x**2) / (2 * 0.8**2))
    k = k / k.sum()
    want = F.conv2d(glyphs[:, None], k.view(1, 1, 1, -1), padding=(0, 2))
    want = F.conv2d(want, k.view(1, 1, -1, 1), padding=(2, 0))[:, 0]
    assert np.abs(blurred - want.numpy()).max() < 1e-12
    ink = warp.to_ink(np.array([-0.1, 0.25, 0.5, 1.2]))  # clipped, then rounded once
    assert ink.tolist() == [0, 64, 128, 255]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_the_bank_cache_imports_neither_the_drawing_nor_the_forms():
    data = Path(attnlab.__file__).parent / "data"
    below = {"attnlab.data.glyphs", "attnlab.data.forms"}
    assert not _imports(data / "bank_cache.py") & below
    assert not _imports(data / "forms.py") & {"attnlab.data.glyphs", "attnlab.data.bank_cache"}
    assert not _imports(data / "warp.py") & (below | {"attnlab.data.bank_cache"})
    assert "attnlab.data.bank_cache" in _imports(data / "glyphs.py")
    from attnlab.data import forms, glyphs

    assert not hasattr(glyphs, "_stem") and callable(forms.footless_one)
