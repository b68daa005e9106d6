"""The ONNX consumer the README's export section points to (scripts/read_onnx.py), run as it
is in a virtual environment that has NumPy, Pillow and onnxruntime and neither torch nor
attnlab: it reads strips as ``attnlab read --onnx`` does, following the sidecar's pixel
contract."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.exports import export_checkpoint, export_reader
from helpers.readers import tiny_config, tiny_reader
from PIL import Image

from attnlab.data import pixels
from attnlab.export.sidecar import SIDECAR

ROOT = Path(__file__).resolve().parents[1]
# what the example imports, and the compiled libraries their wheels ship beside them
PACKAGES = ("numpy", "PIL", "onnxruntime")
LIBS = ("numpy.libs", "pillow.libs")


SCRIPT = ROOT / "scripts" / "read_onnx.py"


def test_the_readme_points_to_the_script_and_embeds_no_copy():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "scripts/read_onnx.py" in text
    assert "ort.InferenceSession" not in text  # one copy of the consumer: the script


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A venv's python with only PACKAGES (a .pth naming a folder of links to this
    environment's copies): no torch, no attnlab, no network needed."""
    root = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root / "venv"], check=True)
    python = str(root / "venv" / "bin" / "python")
    links = root / "links"
    links.mkdir()
    for name in PACKAGES:
        folder = Path(importlib.util.find_spec(name).origin).parent
        (links / name).symlink_to(folder)
        for lib in LIBS:
            if (folder.parent / lib).is_dir() and not (links / lib).exists():
                (links / lib).symlink_to(folder.parent / lib)
    site = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "links.pth").write_text(f"{links}\n")
    return python


def _images(folder: Path) -> list[Path]:
    """Generated strips as files, and the branches of the pixel contract: light ink on dark
    paper (invert), wide margins (crop), RGB, another height (resize)."""
    from helpers.readers import strips

    s = strips([3, 8], seed=4)
    paths = []
    for i, label in enumerate(s.labels):
        a = np.round(s.images[i, :, : int(s.widths[i])].numpy() * 255).astype(np.uint8)
        made = {
            "plain": Image.fromarray(a),
            "inverted": Image.fromarray(255 - a),
            "margins": Image.fromarray(np.pad(a, ((20, 6), (30, 12)), constant_values=a.max())),
            "rgb": Image.fromarray(np.stack([a, a, a], -1)).resize((a.shape[1] * 2, 64)),
        }
        for kind, im in made.items():
            paths.append(folder / f"{i}_{label}_{kind}.png")
            im.save(paths[-1])
    return paths


def test_the_sidecar_states_the_pixel_contract(tmp_path):
    torch.manual_seed(0)
    folder = export_reader(tiny_reader("attention"), tiny_config("attention"), tmp_path / "x")
    contract = json.loads((folder / SIDECAR).read_text())["pixels"]
    assert contract == pixels.CONTRACT and contract["paper"] == 1.0 and contract["ink"] == 0.0
    for key in ("images", "widths", "scale", "polarity", "grey", "invert", "crop", "resize"):
        assert contract[key], key
    assert "int64" in contract["widths"] and "float32" in contract["images"]


def test_read_onnx_script_reads_as_read_onnx_without_torch_or_attnlab(
    trained, bare_python, tmp_path, attnlab_run
):
    """The session's trained attention run (tiny: its readings mean little, but they and
    their confidences differ from strip to strip), exported as ``attnlab export`` writes."""
    out = export_checkpoint(trained["attention"], "best", tmp_path / "out")
    height = json.loads((out / SIDECAR).read_text())["height"]
    files = _images(tmp_path)
    script = SCRIPT
    for module in ("torch", "attnlab"):
        res = subprocess.run([bare_python, "-I", "-c", f"import {module}"], cwd=tmp_path,
                             capture_output=True, text=True)  # fmt: skip
        assert f"No module named '{module}'" in res.stderr
    names = [f.name for f in files]
    # the example as a script (its prints), its batch kept for the pixel comparison below
    driver = (
        "import runpy, sys, numpy as np\n"
        f"sys.argv = [{str(script)!r}, *sys.argv[1:]]\n"
        f"g = runpy.run_path({str(script)!r}, run_name='__main__')\n"
        "np.save('images.npy', g['images']); np.save('widths.npy', g['widths'])\n"
    )
    res = subprocess.run([bare_python, "-I", "-c", driver, out, *names], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    theirs = attnlab_run("read", "--onnx", out, *names, cwd=tmp_path)
    assert theirs.returncode == 0, theirs.stderr
    ours = [line.split() for line in res.stdout.splitlines()]
    want = [line.split() for line in theirs.stdout.splitlines()[1:]]
    assert ours == want and len(ours) == len(files)
    assert len({tuple(r[1:]) for r in want}) > 1  # the strips do not all read alike
    # the pixels it fed are those of `attnlab read --onnx`, exactly
    images, widths = pixels.pad([pixels.load_image(f, height, crop=True) for f in files])
    assert np.array_equal(np.load(tmp_path / "images.npy"), images)
    assert np.array_equal(np.load(tmp_path / "widths.npy"), widths)
