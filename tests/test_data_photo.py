"""Augmentation for real images (data.augment, attnlab.data.photo): each operation does what
its name says on a strip whose answer is known, draws are seeded and none is drawn for an
operation that is not named, padding stays paper, and the config refuses what cannot apply."""

from __future__ import annotations

import pytest
import torch
from helpers.cli import run_cli
from helpers.readers import tiny_config

from attnlab.config.data import AUGMENT_NAMES
from attnlab.data import photo
from attnlab.data.source_stream import SourceStream
from attnlab.data.sources import open_source
from attnlab.data.strip_cache import decode_all
from attnlab.data.strips import StripSynth
from attnlab.data.write_strips import export_folder

TINY = ["train", "preset=tiny", "train.progress=plain"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """40 synthetic strips (lengths 1-3) written as a labels.csv folder."""
    cfg = tiny_config("attention")
    gen = torch.Generator().manual_seed(5)
    batch = StripSynth(cfg.data).sample(torch.randint(1, 4, (40,), generator=gen), gen)
    return export_folder(batch, tmp_path_factory.mktemp("photo") / "folder")


def _bar(b: int = 8, h: int = 32, w: int = 96) -> torch.Tensor:
    """Ink (B, H, W): one vertical bar 4 px wide at columns 40-43, rows 6-25."""
    ink = torch.zeros(b, h, w)
    ink[:, 6:26, 40:44] = 1.0
    return ink


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_named_operations_are_the_configs():
    assert photo.NAMES == AUGMENT_NAMES
    assert set(photo.INK) | set(photo.PIXELS) == set(AUGMENT_NAMES)


def test_erode_and_dilate_thin_and_thicken_strokes_by_one_pixel():
    ink = _bar(1)
    thin = photo._morph(ink, thicker=False)
    thick = photo._morph(ink, thicker=True)
    assert int(thin[0, 16].sum()) == 2  # 4 px wide -> 2
    assert int(thick[0, 16].sum()) == 6  # 4 px wide -> 6
    assert int(thin.sum()) < int(ink.sum()) < int(thick.sum())


def test_affine_and_perspective_move_ink_a_little_and_keep_most_of_it():
    ink = _bar()
    for op in (photo.affine, photo.perspective):
        out = op(ink, _gen(1))
        assert out.shape == ink.shape
        assert not torch.equal(out, ink)
        kept = out.sum(dim=(1, 2)) / ink.sum(dim=(1, 2))
        assert bool(((kept > 0.75) & (kept < 1.3)).all()), (op.__name__, kept)
        centre = (out.sum(1) * torch.arange(96.0)).sum(1) / out.sum(dim=(1, 2))  # (B,)
        assert bool(((centre - 41.5).abs() < 6).all()), (op.__name__, centre)  # near the bar


def test_perspective_of_unmoved_corners_is_the_identity():
    corners = torch.tensor([[[0.0, 0.0], [95.0, 0.0], [95.0, 31.0], [0.0, 31.0]]])
    h = photo._homographies(corners, corners)
    assert torch.allclose(h[0], torch.eye(3, dtype=torch.float64), atol=1e-9)


def test_pixel_operations_stay_in_range_and_change_what_they_name():
    pixels = 1.0 - 0.8 * _bar()
    for op in (photo.contrast, photo.blur, photo.noise):
        out = op(pixels.clone(), _gen(2))
        assert out.shape == pixels.shape and float(out.min()) >= 0 and float(out.max()) <= 1
        assert not torch.equal(out, pixels), op.__name__
    blurred = photo.blur(pixels.clone(), _gen(2))
    assert float(blurred[:, 16, 39].min()) < 1.0  # ink spreads into the paper beside it
    assert torch.allclose(blurred[:, :, :10], pixels[:, :, :10])  # paper far away stays paper


@pytest.mark.parametrize("names", [["affine"], ["perspective", "noise"], list(AUGMENT_NAMES)])
def test_the_draws_are_seeded_and_nothing_is_drawn_for_what_is_not_named(names):
    ink = _bar()
    a = photo.vary_pixels(photo.vary_ink(ink.clone(), names, _gen(3)), names, _gen(4))
    b = photo.vary_pixels(photo.vary_ink(ink.clone(), names, _gen(3)), names, _gen(4))
    assert torch.equal(a, b)
    g = _gen(5)
    same = photo.vary_pixels(photo.vary_ink(ink.clone(), [], g), [], g)
    assert torch.equal(same, ink)
    assert torch.equal(g.get_state(), _gen(5).get_state())  # no draw when nothing is named
    # A strip is changed by a named operation with chance CHANCE: over 8 strips and all
    # operations, some strips change.
    assert not torch.equal(a, ink)


def test_the_order_named_does_not_change_the_draws():
    ink = _bar()
    a = photo.vary_ink(ink.clone(), ["dilate", "affine"], _gen(6))
    b = photo.vary_ink(ink.clone(), ["affine", "dilate"], _gen(6))
    assert torch.equal(a, b)


def test_a_folder_stream_with_augment_changes_batches_repeats_for_a_seed_and_pads_with_paper(
    folder,
):
    d = tiny_config("attention").data
    cache = decode_all(open_source(folder), d.height, d.crop)

    def batches(names):
        data = d.copy()
        data.augment = names
        s = SourceStream(cache, 16, seed=3, data=data)
        return [s.next() for _ in range(3)]

    plain, on, again = batches([]), batches(list(AUGMENT_NAMES)), batches(list(AUGMENT_NAMES))
    assert any(not torch.equal(a.images, b.images) for a, b in zip(plain, on, strict=True))
    for a, b in zip(on, again, strict=True):
        assert torch.equal(a.images, b.images) and a.labels == b.labels
        outside = torch.arange(a.images.shape[-1])[None] >= a.widths[:, None]  # (B, W)
        assert bool((a.images.permute(1, 0, 2)[:, outside] == 1.0).all())


@pytest.mark.parametrize(
    "override, words",
    [
        ("data.augment=[blur,sharpen]", "sharpen"),
        ("data.augment=[blur,blur]", "once"),
    ],
)
def test_a_bad_augment_list_is_refused_in_one_line(folder, tmp_path, override, words):
    r = run_cli(*TINY, "data=folder", f"data.path={folder}", override, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "data.augment" in r.stderr and words in r.stderr


def test_augment_with_synthetic_strips_is_refused(tmp_path):
    r = run_cli(*TINY, "data.augment=[blur]", cwd=tmp_path)
    assert r.returncode == 2 and "data=folder" in r.stderr, r.stderr
