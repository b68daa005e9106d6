"""User strip folders: export then read back through the loader ``attnlab eval --folder`` uses
(``attnlab.data.recorded.folder_strips``), and clear errors on bad input."""

import pytest
import torch
from PIL import Image

from attnlab.config import DataConfig
from attnlab.data.folder import load_image
from attnlab.data.recorded import folder_strips
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder
from attnlab.errors import UserError

DATA = DataConfig()  # height 32, the ten digits


@pytest.fixture()
def exported(tmp_path):
    gen = torch.Generator().manual_seed(5)
    strips = StripSynth(DataConfig()).sample(torch.tensor([1, 4, 7, 10, 3]), gen)
    return strips, export_folder(strips, tmp_path / "strips")


def test_export_then_read_back_gives_the_same_labels_and_pixels(exported):
    strips, folder = exported
    assert (folder / "labels.csv").read_text().splitlines()[0] == "filename,label"
    back, names = folder_strips(folder, DATA, crop=False)
    assert back.labels == strips.labels
    assert torch.equal(back.widths, strips.widths)
    assert torch.allclose(back.images, strips.images, atol=0.5 / 255 + 1e-6)
    assert len(names) == 5 and all((folder / n).is_file() for n in names)
    with Image.open(folder / names[0]) as im:  # dark ink on light paper, as a scan
        assert im.mode == "L"


def test_any_size_or_mode_is_resized_to_the_model_height(tmp_path):
    im = Image.new("RGB", (300, 64), "white")
    im.paste((200, 200, 200), (100, 20, 110, 44))  # a faint stroke: something to read
    im.save(tmp_path / "wide.jpg")
    x = load_image(tmp_path / "wide.jpg", 32)
    assert x.shape == (32, 150) and float(x.min()) > 0.7


def write_labels(folder, text):
    folder.mkdir(exist_ok=True)
    (folder / "labels.csv").write_text(text)


def test_missing_labels_file(tmp_path):
    (tmp_path / "f").mkdir()
    with pytest.raises(UserError, match=r"f: neither a strip folder \(labels\.csv\)"):
        folder_strips(tmp_path / "f", DATA, crop=False)


def test_missing_image_names_file_and_line(exported):
    _, folder = exported
    with (folder / "labels.csv").open("a") as f:
        f.write("ghost.png,123\n")
    with pytest.raises(UserError, match=r"labels\.csv:7: image file 'ghost\.png' not found"):
        folder_strips(folder, DATA, crop=False)


def test_non_digit_label_names_line(exported):
    _, folder = exported
    text = (
        (folder / "labels.csv")
        .read_text()
        .replace(",", ",x", 2)
        .replace("filename,xlabel", "filename,label")
    )
    (folder / "labels.csv").write_text(text)
    with pytest.raises(UserError, match=r"labels\.csv:2: label 'x.*' outside data\.charset"):
        folder_strips(folder, DATA, crop=False)


def test_unreadable_image_names_it(tmp_path):
    folder = tmp_path / "f"
    write_labels(folder, "filename,label\nbad.png,12\n")
    (folder / "bad.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(UserError, match=r"labels\.csv:2: .*bad\.png: not a readable image"):
        folder_strips(folder, DATA, crop=False)


def test_bad_header(tmp_path):
    folder = tmp_path / "f"
    write_labels(folder, "file,text\na.png,1\n")
    with pytest.raises(UserError, match="header must be 'filename,label'"):
        folder_strips(folder, DATA, crop=False)
