"""The ONNX consumer the README's export section points to (scripts/read_onnx.py), run as it
is in a virtual environment that has NumPy, Pillow and onnxruntime and neither torch nor
attnlab: it reads strips as ``attnlab read --onnx`` does, following the sidecar's pixel
contract."""

from __future__ import annotations

import importlib.util
import json
import os
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
    # the script as it is run (its prints), and its batch kept for the pixel comparison below
    res = subprocess.run([bare_python, "-I", script, out, *names], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    driver = (
        "import runpy, sys, numpy as np\n"
        f"g = runpy.run_path({str(script)!r})\n"
        f"strips = [g['strip'](f, {height}) for f in sys.argv[1:]]\n"
        "images, widths = g['pad'](strips)\n"
        "np.save('images.npy', images); np.save('widths.npy', widths)\n"
    )
    made = subprocess.run([bare_python, "-I", "-c", driver, *names], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stderr
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


# --- every image mode, every export kind (issue 57, items 7 and 9) ---------------------------


def _script():
    """scripts/read_onnx.py as a module (it reads an export only when run)."""
    spec = importlib.util.spec_from_file_location("read_onnx", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mode_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """Generated strips saved in the modes attnlab reads beyond 8-bit grey (16-bit PNG, a
    12-bit scan in one, RGBA and grey+alpha ink on transparent paper, palette with and
    without a transparent index, 1-bit, a 32-bit TIFF of 24-bit values, light ink on dark
    paper, a file name that is not UTF-8); and files both refuse (blank, all black, 3x3)."""
    from helpers.readers import strips

    s = strips([2, 5], seed=4)
    folder.mkdir()
    read = []
    for i, label in enumerate(s.labels):
        a = np.round(s.images[i, :, : int(s.widths[i])].numpy() * 255).astype(np.uint8)
        zero = Image.new("L", a.shape[::-1], 0)
        trans = Image.fromarray(a).convert("P")
        trans.info["transparency"] = int(a.max())  # the paper's index: transparent
        made = {
            "16.png": Image.fromarray(a.astype(np.uint16) * 257),
            "12in16.png": Image.fromarray((a.astype(np.int64) * 4095 // 255).astype(np.uint16)),
            "rgba.png": Image.merge("RGBA", [zero, zero, zero, Image.fromarray(255 - a)]),
            "la.png": Image.merge("LA", [zero, Image.fromarray(255 - a)]),
            "p.png": Image.fromarray(a).convert("P"),
            "ptrans.png": trans,
            "1bit.png": Image.fromarray(a).convert("1"),
            "i32.tif": Image.fromarray(a.astype(np.int32) * 65793),  # 0..2**24-1
            "neg.png": Image.fromarray(255 - a),
        }
        for kind, im in made.items():
            read.append(folder / f"{i}_{label}_{kind}")
            im.save(read[-1])
    read.append(Path(os.fsdecode(os.fsencode(folder) + b"/n\xffme.png")))
    Image.fromarray(a).save(read[-1])
    refused = [folder / n for n in ("blank.png", "black.png", "tiny.png")]
    Image.new("L", (90, 32), 255).save(refused[0])
    Image.new("L", (90, 32), 0).save(refused[1])
    Image.fromarray(np.array([[0, 255, 0], [255, 0, 255], [0, 255, 0]], np.uint8)).save(refused[2])
    return read, refused


@pytest.fixture(scope="module")
def mode_files(tmp_path_factory) -> tuple[list[Path], list[Path]]:
    return _mode_files(tmp_path_factory.mktemp("modes") / "strips")


@pytest.fixture(scope="module")
def kinds_exported(trained, tmp_path_factory) -> dict[str, Path]:
    """An export of every kind: the trained attention run (step-wise), tiny ctc and crnn
    readers (CTC graphs), and the packaged reader ``pretrained`` (CTC, trained: its readings
    mean something)."""
    root = tmp_path_factory.mktemp("kinds")
    out = {"attention": export_checkpoint(trained["attention"], "best", root / "attention")}
    for name in ("ctc", "crnn"):
        out[name] = export_reader(tiny_reader(name, seed=3), tiny_config(name), root / name)
    out["pretrained"] = export_checkpoint(Path("pretrained"), "best", root / "pretrained")
    return out


def test_the_script_keeps_the_pixel_constants():
    script = _script()
    for name in ("PLAIN", "ALPHA", "DEEP", "DEPTHS", "FLOAT_WHITE", "NO_CONTRAST", "MIN_ROWS",
                 "MIN_COLS", "SPAN", "INVERT_CONTRAST", "INK_MASS", "INK_HEIGHT", "INK_CENTRE",
                 "SIDE_MARGIN", "PAPER_PERCENTILE", "CONTRAST", "INK_COLUMN"):  # fmt: skip
        assert getattr(script, name) == getattr(pixels, name), name


def test_the_script_prepares_every_mode_as_attnlab(mode_files):
    script, (read, refused) = _script(), mode_files
    for f in read:
        assert np.array_equal(script.strip(f, 32), pixels.load_image(f, 32, crop=True)), f.name
    for f in refused:
        with pytest.raises(script.Refused, match="nothing to read"):
            script.strip(f, 32)


@pytest.mark.parametrize("kind", ["attention", "ctc", "crnn", "pretrained"])
def test_the_script_prints_what_read_onnx_prints(
    kind, kinds_exported, mode_files, bare_python, attnlab_run
):
    read, refused = mode_files
    files, folder = [*read, *refused], read[0].parent
    names = [os.fsdecode(f.name) for f in files]
    res = subprocess.run([bare_python, "-I", SCRIPT, kinds_exported[kind], *names], cwd=folder,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    theirs = attnlab_run("read", "--onnx", kinds_exported[kind], *names, cwd=folder)
    assert "Traceback" not in res.stderr and res.returncode == theirs.returncode == 2, res.stderr
    ours = [line.split() for line in res.stdout.splitlines()]
    want = [line.split() for line in theirs.stdout.splitlines()[1:]]
    assert ours == want and len(ours) == len(read)
    assert ours[-1][0] == "n\\xffme.png"  # as a terminal shows the name, as attnlab prints it
    errors = res.stderr.splitlines()
    assert [e.split(": ")[2] for e in errors] == [f.name for f in refused]
    assert all(e.endswith("nothing to read") for e in errors)
    if kind == "pretrained":  # a trained reader: each strip reads alike in every mode
        assert len({r[1] for r in ours[:9]}) == 1 and len({r[1] for r in ours[9:18]}) == 1
