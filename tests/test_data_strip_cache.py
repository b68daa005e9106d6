"""attnlab.data.strip_cache: a source decoded whole is kept for the next decode of the very
same strips in this process (``_DECODED``): handed back with its warnings said again; a
changed image byte, label, height or crop decodes again; a decode of some strips only is
never kept."""

from __future__ import annotations

from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import pytest
from helpers.images import write_folder
from PIL import Image

from attnlab.data import strip_cache
from attnlab.data.sources import open_source
from attnlab.data.strip_cache import decode_all


@pytest.fixture
def decoded(monkeypatch) -> Counter[str]:
    """Each image file's decodes in this test, from an empty store."""
    calls: Counter[str] = Counter()
    real = strip_cache.decode

    def counted(file, *args):
        calls[Path(file).name] += 1
        return real(file, *args)

    monkeypatch.setattr(strip_cache, "decode", counted)
    monkeypatch.setattr(strip_cache, "_DECODED", OrderedDict())
    return calls


def _read(folder: Path, height: int = 32, crop: bool = True, only=None):
    said: list[str] = []
    cache = decode_all(open_source(folder, said.append), height, crop, said.append, only=only)
    return cache, said


def test_the_same_strips_are_decoded_once_and_their_warnings_said_again(tmp_path, decoded):
    folder = write_folder(tmp_path / "f", n=6, invert=True)  # light ink on dark paper
    first, said = _read(folder)
    again, said_again = _read(folder)
    assert again is first and set(decoded.values()) == {1} and len(decoded) == 6
    assert said and said_again == said  # what the decode said, said again


def test_a_changed_byte_label_height_or_crop_decodes_again(tmp_path, decoded):
    folder = write_folder(tmp_path / "f", n=6)
    first, _ = _read(folder)
    grey = np.array(Image.open(folder / "s00.png"))
    grey[0, 0] = 255 - grey[0, 0]  # one pixel: same name, same size on disk or not
    Image.fromarray(grey).save(folder / "s00.png")
    changed, _ = _read(folder)
    assert changed is not first and decoded["s00.png"] == 2
    assert not np.array_equal(changed.images[0].numpy(), first.images[0].numpy())
    labels = (folder / "labels.csv").read_text()
    (folder / "labels.csv").write_text(labels.replace("s01.png,", "s01.png,7", 1))
    relabelled, _ = _read(folder)
    assert relabelled is not changed and relabelled.labels[1] == "7" + changed.labels[1]
    assert _read(folder, height=48)[0].images[0].shape[0] == 48
    assert decoded["s03.png"] == 4  # first, changed, relabelled, 48 px
    assert _read(folder, crop=False)[0] is not relabelled and decoded["s03.png"] == 5


def test_some_strips_only_are_never_kept_and_the_oldest_source_is_dropped(tmp_path, decoded):
    folders = [write_folder(tmp_path / f"f{i}", n=3, seed=i) for i in range(3)]
    _read(folders[0], only=[0, 1])
    _read(folders[0], only=[0, 1])
    assert decoded["s00.png"] == 2 and len(strip_cache._DECODED) == 0
    kept = [_read(f)[0] for f in folders]  # three sources, KEEP of them kept
    assert len(strip_cache._DECODED) == strip_cache.KEEP == 2
    assert _read(folders[2])[0] is kept[2] and _read(folders[0])[0] is not kept[0]
