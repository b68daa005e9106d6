"""Synthetic strips: determinism, spans where the ink is, masks, fixed sets."""

import sys
from pathlib import Path

import pytest
import torch
from helpers.readers import clean_data

from attnlab.config import DataConfig
from attnlab.data.fonts import (
    FONT_PACKAGES,
    FONT_SETS,
    PYMUPDF_FONTS,
    REPORTLAB_FONTS,
    bundled_fonts,
    reportlab_fonts,
    resolve_fonts,
)
from attnlab.data.glyphs import glyph_bank, render_digits
from attnlab.data.strips import StripSynth, TrainStream, fixed_set

CLEAN = clean_data()


def sample(cfg: DataConfig, lengths, seed: int, augment: bool = False):
    gen = torch.Generator().manual_seed(seed)
    return StripSynth(cfg).sample(torch.tensor(lengths), gen, augment)


def test_same_seed_same_strips_and_other_seed_other_strips():
    a = sample(DataConfig(), [1, 4, 8, 12], seed=3)
    b = sample(DataConfig(), [1, 4, 8, 12], seed=3)
    c = sample(DataConfig(), [1, 4, 8, 12], seed=4)
    assert a.labels == b.labels
    assert torch.equal(a.images, b.images) and torch.equal(a.spans, b.spans)
    assert a.labels != c.labels
    assert [len(s) for s in a.labels] == [1, 4, 8, 12]


def test_strips_are_grey_images_with_paper_padding_and_a_column_mask():
    s = sample(DataConfig(), [2, 9, 5], seed=0)
    b, h, w = s.images.shape
    assert (b, h) == (3, 32) and w == int(s.widths.max())
    assert 0.0 <= float(s.images.min()) and float(s.images.max()) <= 1.0
    mask = s.mask
    assert mask.shape == (3, w) and torch.equal(mask.sum(1), s.widths)
    # Columns past a strip's own width are white paper.
    assert torch.all(s.images.permute(0, 2, 1)[~mask] == 1.0)
    # Longer strings make wider strips.
    assert s.widths[1] > s.widths[2] > s.widths[0]


def test_spans_cover_the_ink_and_nothing_else_on_clean_strips():
    s = sample(CLEAN, [6, 3, 8], seed=1)
    for i, label in enumerate(s.labels):
        ink = (s.images[i] < 0.5).any(0)  # (W,) columns holding ink
        covered = torch.zeros_like(ink)
        for start, end in s.spans[i, : len(label)].tolist():
            assert 0 <= start < end <= int(s.widths[i])
            assert ink[start:end].any(), "every glyph span holds ink"
            covered[start:end] = True
        assert not (ink & ~covered).any(), "no ink outside the glyph spans"
        # Spans go left to right, one per digit.
        starts = s.spans[i, : len(label), 0]
        assert torch.all(starts[1:] > starts[:-1])


def test_same_digit_same_glyph_in_a_clean_strip():
    gen = torch.Generator().manual_seed(0)
    synth = StripSynth(CLEAN)
    s = synth.render(torch.tensor([[7, 7, 1]]), gen)
    (a0, a1), (b0, b1) = s.spans[0, 0].tolist(), s.spans[0, 1].tolist()
    assert torch.equal(s.images[0, :, a0:a1], s.images[0, :, b0:b1])
    assert s.labels == ["771"]


def test_fixed_sets_are_identical_for_every_caller_and_differ_by_purpose():
    synth = StripSynth(DataConfig())
    a, b = fixed_set(synth, "test", 5, 16), fixed_set(synth, "test", 5, 16)
    assert a.labels == b.labels and torch.equal(a.images, b.images)
    assert fixed_set(synth, "val", 5, 16).labels != a.labels
    assert all(len(s) == 5 for s in a.labels)


@pytest.mark.parametrize("by_length", [False, True])
def test_train_stream_draws_only_seen_lengths_and_resumes_exactly(by_length):
    synth = StripSynth(DataConfig())
    stream = TrainStream(synth, [2, 5], batch_size=64, seed=1, by_length=by_length)
    batches = [stream.next() for _ in range(40)]
    per_batch = [{len(s) for s in b.labels} for b in batches]
    assert set().union(*per_batch) == {2, 5}
    if by_length:  # one length per batch, in proportion to its tokens: 3 : 6
        assert all(len(k) == 1 for k in per_batch)
        assert 6 <= sum(k == {2} for k in per_batch) <= 21
        # no column past the longest strip of the batch: padding is what the widths differ by
        assert all(int(b.widths.max()) == b.images.shape[-1] for b in batches)
    else:
        assert all(k == {2, 5} for k in per_batch)
    state = stream.state()
    nxt = stream.next()
    stream.load_state(state)
    again = stream.next()
    assert nxt.labels == again.labels and torch.equal(nxt.images, again.images)


def test_bundled_fonts_render_all_digits_and_skip_symbol_fonts():
    fonts = bundled_fonts()
    assert fonts[0] == "pillow:default"
    assert not any("cmsy10" in f or "cmex10" in f for f in fonts)
    bank = glyph_bank(DataConfig(font_sizes=[26], stroke_widths=[0], variants=2))
    names = {r.split("@")[0] for r in bank.renderings}
    assert {"DejaVuSans", "cmr10", "STIXGeneral", "pillow:default"} <= names
    assert bank.columns.shape[2] == 10  # ten digits for every rendering
    assert int(bank.widths.min()) >= 2  # no blank glyphs
    # Every listed font draws its digits (a display font's placeholder boxes are not listed,
    # so a benchmark that renders text in "every bundled font" never draws blank strips).
    assert len(bank.renderings) == len(resolve_fonts(DataConfig()))
    assert not any("Display" in f for f in fonts)


def test_reportlab_fonts_are_default_training_fonts_and_draw_ten_distinct_digits():
    fonts = reportlab_fonts()
    assert len(fonts) == sum(len(s) for s in REPORTLAB_FONTS.values()) == 12
    assert set(fonts) <= set(resolve_fonts(DataConfig()))  # in the default data
    assert not set(fonts) & set(resolve_fonts(DataConfig(fonts=["bundled"])))
    for font in fonts:
        glyphs = render_digits(font, 26, 0, 32)
        assert glyphs is not None, font
        assert len({tuple(g.flatten().tolist()) for g in glyphs}) == 10, font  # no placeholders
    times = resolve_fonts(DataConfig(fonts=["reportlab"], exclude_fonts=["_e"]))
    assert len(times) == 8  # a set's fonts are left out by file name like any other


def test_font_package_sets_are_default_training_fonts_and_draw_ten_distinct_digits():
    default = set(resolve_fonts(DataConfig()))
    sizes = {"pymupdf-fonts": len(PYMUPDF_FONTS), **{k: len(v) for k, v in FONT_PACKAGES.items()}}
    assert sizes == {"pymupdf-fonts": 26, "font-lato": 4, "font-source-serif-pro": 4}
    for name, n in sizes.items():
        fonts = FONT_SETS[name]()
        assert len(fonts) == n and set(fonts) <= default, name
        for font in fonts:
            glyphs = render_digits(font, 26, 0, 32)
            assert glyphs is not None, font
            assert len({tuple(g.flatten().tolist()) for g in glyphs}) == 10, font
    # Left out by name like any other font (pymupdf-fonts' sources are not files).
    left = resolve_fonts(DataConfig(fonts=["pymupdf-fonts"], exclude_fonts=["SpaceMono"]))
    assert len(left) == 22 and not any("SpaceMono" in f for f in left)


def test_a_font_package_missing_a_file_or_not_installed_is_one_clear_error(monkeypatch):
    import pytest

    from attnlab.data import fonts
    from attnlab.errors import UserError

    monkeypatch.setitem(fonts.FONT_PACKAGES, "font-lato", ("Lato-Regular", "Lato-Nonesuch"))
    with pytest.raises(UserError, match="font-lato lacks Lato-Nonesuch.ttf"):
        fonts.package_fonts("font-lato")
    monkeypatch.setitem(fonts.FONT_PACKAGES, "font-nonesuch", ("X",))
    with pytest.raises(UserError, match="font-nonesuch is not installed"):
        fonts.package_fonts("font-nonesuch")
    monkeypatch.setitem(sys.modules, "pymupdf_fonts", None)  # as if it were not installed
    with pytest.raises(UserError, match=r"pymupdf-fonts is not installed \(pip install"):
        resolve_fonts(DataConfig(fonts=["pymupdf-fonts"]))
    with pytest.raises(UserError, match="matches 'pymupdf' .font sets: bundled, reportlab, pymu"):
        resolve_fonts(DataConfig(fonts=["pymupdf"]))  # a set's name mistyped


def test_excluded_fonts_are_left_out():
    bank = glyph_bank(
        DataConfig(font_sizes=[26], stroke_widths=[0], variants=1, exclude_fonts=["DejaVu"])
    )
    assert not any(r.startswith("DejaVu") for r in bank.renderings)


WARPED = clean_data(
    ink_level=[-0.5, 0.4], strip_scale=[0.75, 1.25], strip_shift=3.0, wave=2.5,
    resample=[0.5, 1.0], shading=0.3,
)  # fmt: skip


def test_whole_strip_variation_is_deterministic_per_seed_and_varies_the_strips():
    a = sample(WARPED, [3, 7, 5, 2], seed=5, augment=True)
    b = sample(WARPED, [3, 7, 5, 2], seed=5, augment=True)
    assert torch.equal(a.images, b.images) and torch.equal(a.spans, b.spans)
    c = sample(WARPED, [3, 7, 5, 2], seed=6, augment=True)
    assert not torch.equal(a.images[:, :, :20], c.images[:, :, :20])
    digits = torch.tensor([[1, 2, 3, 4]])  # the same string, unvaried and varied:
    plain = StripSynth(CLEAN).render(digits, torch.Generator().manual_seed(0))
    varied = StripSynth(WARPED).render(digits, torch.Generator().manual_seed(0), augment=True)
    assert torch.equal(plain.spans, varied.spans) and torch.equal(plain.widths, varied.widths)
    assert (plain.images - varied.images).abs().max() > 0.3


def ink_rows(strip: torch.Tensor) -> tuple[int, int]:
    rows = torch.nonzero((strip < 0.5).any(1)).flatten()
    return int(rows[0]), int(rows[-1])


def test_warps_keep_glyph_spans_on_the_ink_and_move_the_string_vertically():
    # Vertical geometry and resampling only move ink within its columns (resampling blurs
    # a pixel at most): spans still hold the ink, and nothing lies outside them.
    s = sample(WARPED, [6, 3, 8, 5, 4, 7], seed=1, augment=True)
    tops = []
    for i, label in enumerate(s.labels):
        ink = (s.images[i] < 0.5).any(0)
        seen = (s.images[i] < 0.75).any(0)  # a thin face thinned by ink_level stays this dark
        near = torch.zeros_like(ink)
        for start, end in s.spans[i, : len(label)].tolist():
            assert seen[start:end].any(), "every glyph span holds ink"
            near[max(0, start - 1) : end + 1] = True
        assert not (ink & ~near).any(), "no ink more than a pixel outside the glyph spans"
        tops.append(ink_rows(s.images[i])[0])
    assert len(set(tops)) > 2  # the string sits at different heights


def test_elastic_warps_bend_the_glyph_variants_and_spans_stay_on_the_ink():
    plain, bent = clean_data(variants=4), clean_data(variants=4, elastic=2.0)
    a, b = glyph_bank(plain), glyph_bank(bent)
    w = min(a.columns.shape[-2], b.columns.shape[-2])
    # Variant 0 is each glyph as drawn; the others are bent, each its own way.
    assert torch.equal(a.widths[..., 0], b.widths[..., 0])
    assert torch.equal(a.columns[..., 0, :w, :], b.columns[..., 0, :w, :])
    moved = (a.columns[..., 1:, :w, :].int() - b.columns[..., 1:, :w, :].int()).abs()
    assert float(moved.float().mean()) > 1.0  # grey levels out of 255, over every glyph
    # Deterministic: the bank is part of the data definition.
    one, two = sample(bent, [6, 3, 8, 7], seed=1), sample(bent, [6, 3, 8, 7], seed=1)
    assert torch.equal(one.images, two.images) and torch.equal(one.spans, two.spans)
    for i, label in enumerate(one.labels):  # spans are measured on the bent ink
        ink = (one.images[i] < 0.5).any(0)
        covered = torch.zeros_like(ink)
        for start, end in one.spans[i, : len(label)].tolist():
            assert ink[start:end].any(), "every glyph span holds ink"
            covered[start:end] = True
        assert not (ink & ~covered).any(), "no ink outside the glyph spans"


def test_jpeg_is_what_pillows_encoder_leaves_and_a_share_of_training_strips_get_it():
    import io

    import numpy as np
    from PIL import Image

    from attnlab.data.augment import jpeg

    strips = sample(DataConfig(), [6, 3, 8], seed=2).images
    for q in (15, 30, 85):
        ours = jpeg(strips, torch.full((3,), q))
        for i in range(3):
            buf = io.BytesIO()
            Image.fromarray((strips[i].numpy() * 255).round().astype("uint8")).save(
                buf, "JPEG", quality=q
            )
            pil = torch.from_numpy(np.asarray(Image.open(buf)).astype("float32") / 255)
            # Within rounding of Pillow's (libjpeg's integer DCT); at low quality that is far
            # closer than the original is.
            off, loss = (ours[i] - pil).abs().mean(), (strips[i] - pil).abs().mean()
            assert float(off) < 0.006 and (q > 30 or float(off) < 0.3 * float(loss))
    # In the stream: the share asked for, deterministic per seed, spans still on the ink.
    on = clean_data(jpeg=1.0, jpeg_quality=[15.0, 15.0])
    a, b = sample(on, [6, 3, 8], seed=1, augment=True), sample(on, [6, 3, 8], seed=1, augment=True)
    plain = sample(CLEAN, [6, 3, 8], seed=1, augment=True)
    assert torch.equal(a.images, b.images) and torch.equal(a.spans, plain.spans)
    assert all(not torch.equal(a.images[i], plain.images[i]) for i in range(3))
    assert not torch.equal(sample(on, [6, 3, 8], seed=1).images, a.images)  # fixed sets: none
    # A share: about that many strips change, the same ones for the same seed.
    half = clean_data(jpeg=0.5, jpeg_quality=[15.0, 15.0])
    plain64 = sample(CLEAN, [5] * 64, seed=3, augment=True).images
    changed = [
        (sample(half, [5] * 64, seed=3, augment=True).images != plain64).flatten(1).any(1)
        for _ in range(2)
    ]
    assert torch.equal(changed[0], changed[1]) and 16 <= int(changed[0].sum()) <= 48
    for i, label in enumerate(a.labels):
        ink = (a.images[i] < 0.5).any(0)
        near = torch.zeros_like(ink)
        for start, end in a.spans[i, : len(label)].tolist():
            assert ink[start:end].any(), "every glyph span holds ink"
            near[max(0, start - 1) : end + 1] = True
        assert not (ink & ~near).any(), "no ink more than a pixel outside the glyph spans"


def test_dilation_and_ink_levels_thicken_or_thin_the_strokes():
    def ink(cfg) -> float:
        gen = torch.Generator().manual_seed(0)
        s = StripSynth(cfg).render(torch.tensor([[0, 4, 8, 1]]), gen, augment=True)
        return float((1 - s.images).sum())

    base = ink(CLEAN)
    assert ink(clean_data(dilate=1.0)) > 1.2 * base
    assert ink(clean_data(ink_level=[-0.5, -0.5])) < 0.9 * base
    assert ink(clean_data(ink_level=[0.4, 0.4])) > 1.05 * base


def test_shading_darkens_the_paper_towards_one_end():
    s = sample(clean_data(shading=0.5), [5] * 8, seed=2, augment=True)
    left, right = s.images[:, 0, 0], s.images[:, 0, s.widths - 1].diagonal()
    assert float((left - right).abs().max()) > 0.1
    assert float(s.images.max()) <= 1.0


def test_augmented_share_varies_that_share_of_training_strips_deterministically():
    def shaded(share: float, seed: int = 2) -> torch.Tensor:
        s = sample(clean_data(shading=0.5, augmented=share), [4] * 64, seed=seed, augment=True)
        left, right = s.images[:, 0, 0], s.images[:, 0, s.widths - 1].diagonal()
        return (left - right).abs() > 1e-4  # (B,) the paper is shaded: the strip is varied

    assert not shaded(0.0).any()
    assert int(shaded(1.0).sum()) >= 60  # a ramp of [0, 0.5]: all but the faintest
    half = shaded(0.5)
    assert 16 <= int(half.sum()) <= 48
    assert torch.equal(half, shaded(0.5)) and not torch.equal(half, shaded(0.5, seed=3))


def test_only_the_training_stream_is_augmented_and_fixed_sets_stay_put():
    synth, plain = StripSynth(WARPED), StripSynth(CLEAN)
    # Fixed sets (validation, test, probes) do not depend on the augmentation settings.
    assert torch.equal(fixed_set(synth, "test", 4, 8).images, fixed_set(plain, "test", 4, 8).images)
    stream, same = TrainStream(synth, [4], 8, seed=1), TrainStream(plain, [4], 8, seed=1)
    a, b = stream.next(), same.next()
    assert a.labels == b.labels and torch.equal(a.spans, b.spans)
    assert not torch.equal(a.images, b.images)


def test_marked_zeros_get_ink_in_their_counter_and_oldstyle_figures_move():
    from attnlab.data.forms import mark_zero, oldstyle_figures

    sans = next(f for f in bundled_fonts() if f.endswith("DejaVuSans.ttf"))
    glyphs = render_digits(sans, 30, 0, 32)
    zero = glyphs[0]
    rows = torch.nonzero(zero.amax(1) > 0.5).flatten()
    cy, cx = (int(rows[0]) + int(rows[-1])) // 2, zero.shape[1] // 2
    assert float(zero[cy, cx]) < 0.1  # a plain zero's counter is paper
    for how in ("dot", "slash"):
        marked = mark_zero(zero, how)
        assert float(marked[cy - 1 : cy + 2, cx - 1 : cx + 2].max()) > 0.5
        assert float(marked.sum()) > float(zero.sum())

    def rows_of(g):
        r = torch.nonzero(g.amax(1) > 0.5).flatten()
        return int(r[0]), int(r[-1])

    old = oldstyle_figures(glyphs, baseline=round(0.8 * 32))
    assert rows_of(old[1])[0] > rows_of(glyphs[1])[0] + 3  # a small 1: its top comes down
    assert rows_of(old[7])[1] > rows_of(glyphs[7])[1] + 3  # a descending 7: its foot drops
    assert torch.equal(old[8], glyphs[8])  # 6 and 8 keep their full height


def test_footless_ones_keep_their_stem_and_lose_only_the_foot():
    from attnlab.data.forms import footless_one

    by_name = {Path(f).name: f for f in resolve_fonts(DataConfig())}
    for name in (
        "DejaVuSans.ttf",
        "DejaVuSerif-Bold.ttf",
        "DejaVuSans-Oblique.ttf",
        "cob_____.pfb",
    ):
        one = render_digits(by_name[name], 30, 0, 32)[1]
        rows = torch.nonzero(one.amax(1) > 0.5).flatten()
        bottom = int(rows[-1])
        plain = footless_one(one)
        assert plain.shape == one.shape and float((plain - one).max()) <= 0  # ink only removed
        stem = int((one[(int(rows[0]) + bottom) // 2] > 0.5).sum())  # its width at half height
        assert int((one[bottom] > 0.5).sum()) > stem + 3, name  # this one stands on a foot
        assert 1 <= int((plain[bottom] > 0.5).sum()) <= stem + 3, name  # the stem, not the foot
        assert torch.equal(plain[: bottom - 8], one[: bottom - 8])  # above the foot: unchanged
    arial = render_digits(by_name["_a______.pfb"], 30, 0, 32)[1]
    assert torch.equal(footless_one(arial), arial)  # Arial's one has no foot to lose
    # The form is drawn for a share of renderings, from a seed of its own: on for some.
    bank = glyph_bank(DataConfig(font_sizes=[26], stroke_widths=[0], variants=1))
    none = glyph_bank(DataConfig(font_sizes=[26], stroke_widths=[0], variants=1, footless_ones=0.0))
    changed = (bank.columns[:, :, 1] != none.columns[:, :, 1]).flatten(1).any(1)
    assert 0 < int(changed.sum()) < len(changed)
    assert torch.equal(bank.columns[:, :, 0], none.columns[:, :, 0])  # other digits as before


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("jpeg", 1.5),
        ("jpeg_quality", [10.0, 120.0]),
        ("jpeg_quality", [0.0, 50.0]),
        ("elastic", -1.0),
    ],
)
def test_out_of_range_jpeg_and_elastic_settings_name_the_key(key, value):
    from attnlab.errors import UserError

    with pytest.raises(UserError, match=f"data.{key}"):
        DataConfig.check(DataConfig(**{key: value}))


def test_a_slant_of_synthetic_strips_is_refused_and_one_out_of_range_is_named():
    """data.slant leans real strips only: with synthetic strips it would change nothing."""
    from attnlab.errors import UserError

    with pytest.raises(UserError, match=r"data.slant=0.2: .*needs data=folder"):
        DataConfig.check(DataConfig(slant=0.2))
    folder = {"source": "folder", "path": "strips"}
    DataConfig.check(DataConfig(**folder, slant=0.2))
    for value in (1.5, -0.1, float("nan")):  # out of range with real strips too
        with pytest.raises(UserError, match=r"data.slant=.*must be in \[0, 1\]"):
            DataConfig.check(DataConfig(**folder, slant=value))
