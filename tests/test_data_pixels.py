"""One pixel path: a strip image gives the same pixels through every reader of images (a
strip folder, a NumPy array given to ``attnlab.load(...).read``, an ONNX export's reference
loop and the stand-alone ONNX script), as all of them prepare it with attnlab.data.pixels;
that module needs no torch, and the sidecar's pixel contract is written from its constants."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attnlab.config import DataConfig
from attnlab.data import arrays, pixels
from attnlab.data.folder import LABELS
from attnlab.data.recorded import folder_strips
from attnlab.export import runtime, sidecar

ROOT = Path(__file__).resolve().parent.parent
HEIGHT = 32


def _strip() -> np.ndarray:
    """(50, 170) uint8: dark digits-like bars on light noisy paper, with wide uneven margins
    (so the crop moves the ink) and one bar set lower than the others."""
    rng = np.random.default_rng(3)
    a = np.full((50, 170), 225, np.uint8)
    for k, x in enumerate(range(30, 130, 11)):
        y = 14 + (4 if k == 5 else 0)
        a[y : y + 17, x : x + 4] = 25
    return np.clip(a + rng.integers(-10, 10, a.shape), 0, 255).astype(np.uint8)


def _images() -> dict[str, Image.Image]:
    a = _strip()
    return {
        "grey": Image.fromarray(a),
        "inverted_rgb": Image.fromarray(np.stack([255 - a, 255 - a // 2, 255 - a], -1)),
        "alpha": Image.fromarray(np.stack([a, a, a, np.full_like(a, 180)], -1)),
        "deep": Image.fromarray(a.astype(np.uint16) * 16).convert("I;16"),
    }


def _script_strip():
    """scripts/read_onnx.py's ``strip`` (the sidecar contract followed with NumPy and Pillow
    alone), from the script imported as a module (it reads an export only when run)."""
    spec = importlib.util.spec_from_file_location("read_onnx", ROOT / "scripts" / "read_onnx.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return lambda path: script.strip(path, HEIGHT)


@pytest.mark.parametrize("crop", [True, False])
@pytest.mark.parametrize("kind", sorted(_images()))
def test_one_image_gives_the_same_pixels_through_every_path(tmp_path, kind, crop):
    png = tmp_path / f"{kind}.png"
    _images()[kind].save(png)
    (tmp_path / LABELS).write_text(f"filename,label\n{png.name},0123456789\n")
    said: list[str] = []

    d = DataConfig(height=HEIGHT)
    batch, names = folder_strips(tmp_path, d, crop, warn=said.append)  # attnlab eval --folder
    folder = batch.images[0, :, : int(batch.widths[0])].numpy()
    with Image.open(png) as im:
        given = np.asarray(im)  # the file's samples, as a user would hand them to the API
    api, name = arrays.image_strip(given, 0, HEIGHT, crop, warn=said.append)  # .read(array)
    (onnx,) = runtime.load_strips([png], HEIGHT, crop)  # attnlab read --onnx, Export.read

    assert names == [png.name] and name == "<image 0>"
    assert folder.shape[0] == HEIGHT and folder.dtype == np.float32
    assert api.dtype == onnx.dtype == np.float32
    assert np.array_equal(api, onnx), kind
    # a folder's strips are decoded once and kept as 8-bit grey (strip_cache.StripCache), as
    # training keeps them: the same pixels to half an 8-bit step
    assert folder.shape == api.shape and np.allclose(folder, api, atol=0.5 / 255 + 1e-6), kind
    assert ("inverted" in " ".join(said)) == (kind == "inverted_rgb")
    if crop:  # the script reads every mode, cropped (attnlab read --onnx's default)
        assert np.array_equal(api, _script_strip()(png)), kind


def test_crop_and_polarity_do_change_the_pixels(tmp_path):
    """The comparison above is not of images that every step leaves alone."""
    grey = _strip().astype(np.float32) / 255
    plain = pixels.prepare(grey, HEIGHT)
    assert pixels.prepare(grey, HEIGHT, crop=True).shape != plain.shape
    said: list[str] = []
    flipped = pixels.prepare(1.0 - grey, HEIGHT, name="x", warn=said.append)
    assert np.allclose(flipped, plain, atol=1e-6)
    assert said == ["x: light ink on dark paper: inverted to read it"]


def test_pixels_and_the_array_path_import_without_torch():
    code = (
        "import sys\n"
        "import attnlab.data.pixels, attnlab.data.arrays, attnlab.export.runtime\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_the_sidecar_contract_is_written_from_the_constants(monkeypatch):
    assert sidecar.pixels is pixels  # the sidecar checks exports against this one contract
    contract = pixels.CONTRACT
    assert contract["paper"] == contract["padding"] == pixels.PAPER == 1.0
    assert contract["scale"] == [pixels.INK, pixels.PAPER]
    assert f"> {pixels.INVERT_CONTRAST} " in contract["invert"]
    assert f"{pixels.INK_COLUMN} x" in contract["crop"]
    assert f"c >= {pixels.INK_MASS[0]}" in contract["crop"]
    assert f"({pixels.SIDE_MARGIN} h)" in contract["crop"]
    monkeypatch.setattr(pixels, "INVERT_CONTRAST", 0.25)
    monkeypatch.setattr(pixels, "INK_HEIGHT", 0.6)
    monkeypatch.setattr(pixels, "DEPTHS", (8, 16))
    changed = pixels._contract()
    assert "> 0.25 " in changed["invert"] and "/ 0.6;" in changed["crop"]
    assert "(b = 8, 16)" in changed["grey"]
    assert changed != contract  # an edited constant would refuse older exports
