"""Faults in reading user images and strip folders: modes that used to become all paper or all
ink, labels.csv encodings and duplicates, decompression bombs, doubtful images, and the crop
that places the ink as the generator does (``attnlab read`` on awkward paths and clashing map
names is in test_faults_cli.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.images import png_header
from PIL import Image

from attnlab.config import DataConfig
from attnlab.data.folder import load_image
from attnlab.data.recorded import folder_strips
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.errors import UserError

TOL = 1.5 / 255  # one 8-bit step, plus rounding
DATA = DataConfig()  # height 32, the ten digits: what folder_strips reads at


def ref_tensor(a8: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(a8.astype(np.float32) / 255)


def collect():
    said: list[str] = []
    return said, said.append


# --- 1. modes --------------------------------------------------------------------------------


def grey16(a):
    return Image.fromarray(a.astype(np.uint16) * 257)  # I;16


def grey16_big_endian(a):
    return Image.frombytes("I;16B", (a.shape[1], a.shape[0]), (a.astype(">u2") * 257).tobytes())


def int32_16bit_range(a):
    return Image.fromarray(a.astype(np.int32) * 257)  # I


def int32_8bit_range(a):
    return Image.fromarray(a.astype(np.int32))  # I


def float_0_1(a):
    return Image.fromarray(a.astype(np.float32) / 255)  # F


def float_0_255(a):
    return Image.fromarray(a.astype(np.float32))  # F


def rgba_ink_on_transparent(a):
    """Black ink whose darkness is its opacity; the transparent background's colour is black."""
    zero = Image.new("L", (a.shape[1], a.shape[0]), 0)
    return Image.merge("RGBA", [zero, zero, zero, Image.fromarray(255 - a)])


def la_ink_on_transparent(a):
    zero = Image.new("L", (a.shape[1], a.shape[0]), 0)
    return Image.merge("LA", [zero, Image.fromarray(255 - a)])


def palette_with_transparent_paper(a):
    """Index v is grey v, except index 255: black, and the transparent one."""
    im = Image.fromarray(a).convert("P")  # the grey palette, then ours
    im.putpalette([v for i in range(256) for v in ((i, i, i) if i < 255 else (0, 0, 0))])
    im.info["transparency"] = 255
    return im


def cmyk(a):
    return Image.fromarray(a).convert("CMYK")


MODES = {  # maker, file format, the mode Pillow opens it in
    "I;16 png": (grey16, "png", "I;16"),
    "I;16B tiff": (grey16_big_endian, "tif", "I;16B"),
    "I 0..65535 tiff": (int32_16bit_range, "tif", "I"),
    "I 0..255 tiff": (int32_8bit_range, "tif", "I"),
    "F 0..1 tiff": (float_0_1, "tif", "F"),
    "F 0..255 tiff": (float_0_255, "tif", "F"),
    "RGBA png": (rgba_ink_on_transparent, "png", "RGBA"),
    "LA png": (la_ink_on_transparent, "png", "LA"),
    "P+transparency png": (palette_with_transparent_paper, "png", "P"),
    "CMYK tiff": (cmyk, "tif", "CMYK"),
}


@pytest.mark.parametrize("kind", list(MODES))
def test_every_mode_matches_the_8bit_rendering(kind, ref8, tmp_path):
    make, ext, mode = MODES[kind]
    path = tmp_path / f"strip.{ext}"
    make(ref8).save(path)
    with Image.open(path) as im:
        assert im.mode == mode  # the file really is in the mode under test
    said, warn = collect()
    x = load_image(path, ref8.shape[0], warn)
    assert x.shape == ref8.shape
    assert torch.allclose(x, ref_tensor(ref8), atol=TOL), float((x - ref_tensor(ref8)).abs().max())
    assert said == []


def test_a_12bit_scan_in_a_16bit_png_is_scaled_by_its_range(ref8, tmp_path):
    Image.fromarray((ref8.astype(np.int64) * 4095 // 255).astype(np.uint16)).save(
        tmp_path / "s.png"
    )
    x = load_image(tmp_path / "s.png", ref8.shape[0])
    assert torch.allclose(x, ref_tensor(ref8), atol=TOL)


def test_multi_frame_image_reads_the_first_frame_and_says_so(ref8, tmp_path):
    path = tmp_path / "pages.tif"
    Image.fromarray(ref8).save(path, save_all=True, append_images=[Image.fromarray(ref8 // 2)])
    said, warn = collect()
    x = load_image(path, ref8.shape[0], warn)
    assert torch.allclose(x, ref_tensor(ref8), atol=TOL)
    assert len(said) == 1 and "pages.tif" in said[0] and "2 frames" in said[0]


def test_unsupported_mode_is_refused_in_one_line(tmp_path):
    Image.new("LAB", (40, 32)).save(tmp_path / "lab.tif")
    with pytest.raises(UserError, match=r"lab\.tif: image mode LAB is not supported") as err:
        load_image(tmp_path / "lab.tif", 32)
    assert "\n" not in str(err.value)


def test_float_image_with_nan_is_refused(tmp_path):
    a = np.ones((32, 40), np.float32)
    a[3, 4] = np.nan
    Image.fromarray(a).save(tmp_path / "nan.tif")
    with pytest.raises(UserError, match=r"nan\.tif: float image with NaN"):
        load_image(tmp_path / "nan.tif", 32)


# --- 2. labels.csv ---------------------------------------------------------------------------


@pytest.fixture()
def folder(tmp_path, ref8) -> Path:
    out = tmp_path / "strips"
    out.mkdir()
    for name in ("a.png", "b.png", "café.png"):
        Image.fromarray(ref8).save(out / name)
    return out


def test_latin1_labels_name_the_file_and_say_utf8(folder):
    (folder / "labels.csv").write_bytes("filename,label\na.png,1\ncafé.png,12\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"labels\.csv:3: not UTF-8 text .*save it as UTF-8"):
        folder_strips(folder, DATA, crop=False)


def test_utf8_bom_is_accepted(folder):
    (folder / "labels.csv").write_bytes("\ufefffilename,label\ncafé.png,12\n".encode())
    batch, names = folder_strips(folder, DATA, crop=False)
    assert names == ["café.png"] and batch.labels == ["12"]


def test_a_row_listed_twice_counts_once_with_one_warning(folder):
    text = "filename,label\na.png,1\nb.png,2\na.png,1\n./a.png,1\n"
    (folder / "labels.csv").write_text(text, encoding="utf-8")
    said, warn = collect()
    batch, names = folder_strips(folder, DATA, crop=False, warn=warn)
    assert names == ["a.png", "b.png"] and batch.labels == ["1", "2"]
    assert said == [f"{folder / 'labels.csv'}: 'a.png' is listed on lines 2, 4, 5: counted once"]


def test_a_file_listed_with_two_labels_is_refused(folder):
    (folder / "labels.csv").write_text("filename,label\na.png,1\nb.png,2\na.png,7\n")
    with pytest.raises(UserError, match=r"labels\.csv:4: 'a\.png' is labelled '7' here but '1' on"):
        folder_strips(folder, DATA, crop=False)


def test_a_csv_the_csv_module_rejects_is_one_line(folder):
    (folder / "labels.csv").write_text("filename,label\na.png," + "1" * 200_000 + "\n")
    with pytest.raises(UserError, match=r"labels\.csv:2: not CSV"):
        folder_strips(folder, DATA, crop=False)


# --- 3. decompression bombs ------------------------------------------------------------------


def test_a_20000x20000_png_is_one_line_naming_it(tmp_path):
    (tmp_path / "huge.png").write_bytes(png_header(20_000, 20_000))
    with pytest.raises(UserError, match=r"huge\.png: image too large") as err:
        load_image(tmp_path / "huge.png", 32)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("limit", [1000, 2000])  # Pillow errors over 2x its limit, warns over 1x
def test_over_pillows_pixel_limit_is_refused(limit, monkeypatch, tmp_path, recwarn):
    Image.new("L", (100, 32), 255).save(tmp_path / "big.png")  # 3200 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", limit)
    with pytest.raises(UserError, match=rf"big\.png: image too large \(over {limit} pixels"):
        load_image(tmp_path / "big.png", 32)
    assert not [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)]


def test_a_bomb_in_a_folder_names_labels_line_and_file(folder):
    (folder / "huge.png").write_bytes(png_header(20_000, 20_000))
    (folder / "labels.csv").write_text("filename,label\na.png,1\nhuge.png,22\n")
    with pytest.raises(UserError, match=r"labels\.csv:3: .*huge\.png: image too large"):
        folder_strips(folder, DATA, crop=False)


# --- 4. doubtful images: one warning line each -----------------------------------------------


def test_light_ink_on_dark_paper_is_inverted_with_a_warning(ref8, tmp_path):
    Image.fromarray(255 - ref8).save(tmp_path / "neg.png")
    said, warn = collect()
    x = load_image(tmp_path / "neg.png", ref8.shape[0], warn)
    assert torch.allclose(x, ref_tensor(ref8), atol=TOL)
    assert len(said) == 1 and "neg.png" in said[0] and "inverted" in said[0]


def test_synthetic_strips_are_not_taken_for_inverted(tmp_path):
    gen = torch.Generator().manual_seed(11)
    strips = StripSynth(DataConfig()).sample(torch.arange(1, 13).repeat(3), gen)
    said, warn = collect()
    folder_strips(export_folder(strips, tmp_path / "s"), DATA, crop=False, warn=warn)
    assert said == []


def test_blank_paper_is_refused_not_inverted(tmp_path):
    Image.new("L", (90, 32), 40).save(tmp_path / "grey.png")  # no ink: nothing to decide on
    said, warn = collect()
    with pytest.raises(UserError, match=r"grey\.png: no contrast .*nothing to read$"):
        load_image(tmp_path / "grey.png", 32, warn)
    assert said == []


def test_tall_images_say_so(tmp_path):
    a = np.full((100, 20), 255, np.uint8)
    a[40:60, 8:12] = 0  # a stroke: something to read
    Image.fromarray(a).save(tmp_path / "odd.png")
    said, warn = collect()
    x = load_image(tmp_path / "odd.png", 32, warn)
    assert x.shape[0] == 32 and x.shape[1] >= 1
    assert len(said) == 1 and "odd.png" in said[0] and "5.0 times" in said[0]


@pytest.mark.parametrize("size", [(1, 40), (40, 1), (2, 40), (40, 4)])
def test_images_too_small_for_a_digit_are_refused(size, tmp_path):
    a = np.full(size[::-1], 255, np.uint8)
    a.flat[0] = 0  # contrast: the size alone refuses it
    Image.fromarray(a).save(tmp_path / "odd.png")
    w, h = size
    with pytest.raises(UserError, match=rf"odd\.png: {w}x{h} pixels, too small to hold a digit"):
        load_image(tmp_path / "odd.png", 32)


def test_several_doubts_are_one_line_on_stderr(ref8, tmp_path, capsys):
    column = np.concatenate([ref8, ref8], axis=1).T  # (2W, 32): a column of digits
    Image.fromarray(255 - column).save(tmp_path / "col.png")  # light ink on dark paper
    load_image(tmp_path / "col.png", 32)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"attnlab: warning: {tmp_path / 'col.png'}: ")
    assert "taller than wide" in err[0] and "inverted" in err[0]


def test_folder_warnings_name_the_labels_line(folder, ref8):
    Image.fromarray(255 - ref8).save(folder / "neg.png")
    (folder / "labels.csv").write_text("filename,label\na.png,1\nneg.png,2\n")
    said, warn = collect()
    folder_strips(folder, DATA, crop=False, warn=warn)
    assert len(said) == 1 and said[0].startswith(f"{folder / 'labels.csv'}:3: {folder / 'neg.png'}")


# --- placing the ink as the generator does ---------------------------------------------------


def ink_box(x: torch.Tensor) -> tuple[int, int, int, int]:
    ink = x < 0.5
    rows, cols = torch.nonzero(ink.any(1)).flatten(), torch.nonzero(ink.any(0)).flatten()
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def test_the_ink_height_the_crop_measures_is_the_same_in_short_and_long_generator_strips():
    # Each glyph's vertical jitter widens a long strip's outermost ink rows; the rows of the
    # middle of its ink stay put, so reading does not shrink long strips (it did, by ~15%).
    from attnlab.config import DataConfig
    from attnlab.data.pixels import INK_CENTRE, INK_HEIGHT, ink_of, ink_rows
    from attnlab.data.strips import StripSynth

    synth = StripSynth(DataConfig())

    def box(length: int) -> tuple[float, float]:
        batch = synth.sample(torch.full((96,), length), torch.Generator().manual_seed(length))
        strips = zip(batch.images, batch.widths.tolist(), strict=True)
        rows = [ink_rows(ink_of(im[:, :w].numpy())) for im, w in strips]
        return (
            float(np.mean([(b - t) / 32 for t, b in rows])),
            float(np.mean([(t + b) / 2 / 32 for t, b in rows])),
        )

    (h1, c1), (h8, c8) = box(1), box(8)
    assert abs(h1 - h8) < 0.03, (h1, h8)
    assert abs((h1 + h8) / 2 - INK_HEIGHT) < 0.03 and abs((c1 + c8) / 2 - INK_CENTRE) < 0.03


@pytest.mark.parametrize("border", [0, 40])
def test_crop_places_the_ink_where_the_generator_does_whatever_the_margins(ref8, tmp_path, border):
    from attnlab.data.pixels import INK_CENTRE, INK_HEIGHT, ink_rows

    framed = np.full((ref8.shape[0] + 3 * border, ref8.shape[1] + 2 * border), 255, np.uint8)
    h, w = ref8.shape
    framed[border : border + h, border : border + w] = ref8
    top, bottom, left, right = ink_box(ref_tensor(ref8))
    tight = framed[border + top : border + bottom, border + left : border + right]
    Image.fromarray(framed).save(tmp_path / "framed.png")
    Image.fromarray(tight).save(tmp_path / "tight.png")
    for name in ("framed.png", "tight.png"):
        x = load_image(tmp_path / name, 32, crop=True)
        _, _, lft, r = ink_box(x)
        t, b = ink_rows((x < 0.5).numpy())
        assert abs((b - t) / 32 - INK_HEIGHT) < 0.08, (name, t, b)
        assert abs((t + b) / 2 / 32 - INK_CENTRE) < 0.08, (name, t, b)
        assert 3 <= lft <= 10 and 3 <= x.shape[1] - r <= 10, (name, lft, x.shape[1] - r)
    # The same strip framed or tightly cut reads as nearly the same image.
    a, b = (
        load_image(tmp_path / "framed.png", 32, crop=True),
        load_image(tmp_path / "tight.png", 32, crop=True),
    )
    assert abs(a.shape[1] - b.shape[1]) <= 2


def test_an_inverted_framed_strip_is_inverted_then_cropped(ref8, tmp_path):
    framed = np.full((ref8.shape[0] * 3, ref8.shape[1] + 60), 255, np.uint8)
    framed[32:64, 30 : 30 + ref8.shape[1]] = ref8
    Image.fromarray(255 - framed).save(tmp_path / "neg.png")
    said, warn = collect()
    x = load_image(tmp_path / "neg.png", 32, warn, crop=True)
    assert "inverted" in said[0]
    assert float(x[:, :3].mean()) > 0.8  # paper at the sides, not the black of the file
    t, b, _, _ = ink_box(x)
    assert 16 <= b - t <= 28


def test_crop_leaves_an_image_too_faint_to_find_ink_alone(tmp_path):
    a = np.full((32, 50), 250, np.uint8)
    a[10:20, 20:24] = 240  # a stroke under the crop's CONTRAST: ink not told from paper
    Image.fromarray(a).save(tmp_path / "faint.png")
    x = load_image(tmp_path / "faint.png", 32, crop=True)
    assert x.shape == (32, 50)


def test_a_blank_noisy_scan_is_not_taken_for_inverted(tmp_path):
    rng = np.random.default_rng(0)
    noisy = np.clip(rng.normal(120, 6, (48, 160)), 0, 255).astype(np.uint8)
    Image.fromarray(noisy).save(tmp_path / "noise.png")
    said, warn = collect()
    load_image(tmp_path / "noise.png", 32, warn)
    assert said == []
