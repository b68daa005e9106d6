"""Captcha-like clutter (data.clutter, attnlab.data.clutter): a share of the synthetic
training strips drawn with bent, overlapping glyphs on cluttered paper with noise curves,
dots and damage; seeded, on each strip's own columns, never in a fixed set, and a stream
without it exactly as it was."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch
from helpers.cli import run_cli

from attnlab.config import DataConfig
from attnlab.data import clutter, clutter_glyphs
from attnlab.data.strips import StripSynth, TrainStream, fixed_set
from attnlab.errors import UserError

# A small bank (one size, one stroke, two variants) keeps these tests to seconds.
SMALL = {"font_sizes": [26], "stroke_widths": [0], "variants": 2}


def _data(**keys) -> DataConfig:
    return DataConfig(**{**SMALL, **keys})


def _stream(seed: int = 7, **keys) -> TrainStream:
    return TrainStream(StripSynth(_data(**keys)), [1, 2, 3, 4], 16, seed=seed)


def _digest(stream: TrainStream, batches: int = 2) -> str:
    """What a stream's first batches are made of that no CPU can round differently: labels,
    widths and spans (integers) and the generator's state after them (every draw counted)."""
    h = hashlib.sha256()
    for _ in range(batches):
        b = stream.next()
        h.update(",".join(b.labels).encode())
        h.update(b.widths.numpy().tobytes())
        h.update(b.spans.numpy().tobytes())
    h.update(stream.state().numpy().tobytes())
    return h.hexdigest()[:16]


# The stream of _stream(jpeg=0.5) as drawn before data.clutter existed (the code of commit
# 09335ec); it moves only when the glyph bank moves (lock-pins.toml's glyph_bank says when).
BEFORE_CLUTTER = "22ddc0795aba65b4"


def test_clutter_off_leaves_the_stream_exactly_as_it_was():
    assert DataConfig().clutter == 0.0
    assert _digest(_stream(jpeg=0.5)) == BEFORE_CLUTTER
    assert _digest(_stream(jpeg=0.5, clutter=0.0)) == BEFORE_CLUTTER
    plain, off = _stream(jpeg=0.5).next(), _stream(jpeg=0.5, clutter=0.0).next()
    assert torch.equal(plain.images, off.images)
    assert _digest(_stream(jpeg=0.5, clutter=0.5)) != BEFORE_CLUTTER


def test_the_same_seed_draws_the_same_cluttered_strips_and_another_seed_others():
    a, b = _stream(seed=3, clutter=1.0).next(), _stream(seed=3, clutter=1.0).next()
    assert torch.equal(a.images, b.images) and a.labels == b.labels
    assert torch.equal(a.spans, b.spans) and torch.equal(a.widths, b.widths)
    c = _stream(seed=4, clutter=1.0).next()
    assert not torch.equal(a.images[:, :, :8], c.images[:, :, :8])


def test_fixed_sets_are_never_cluttered():
    synth, cluttered = StripSynth(_data()), StripSynth(_data(clutter=1.0))
    for purpose in ("val", "test"):
        a, b = fixed_set(synth, purpose, 4, 8), fixed_set(cluttered, purpose, 4, 8)
        assert torch.equal(a.images, b.images) and a.labels == b.labels


def test_a_share_of_strips_is_cluttered_and_the_rest_drawn_plainly():
    gen = torch.Generator().manual_seed(0)
    lay = clutter_glyphs.draw_layout(4000, 3, 32, 0.3, gen)
    assert abs(float(lay.rows.float().mean()) - 0.3) < 0.03
    assert (
        float(lay.gaps.min()) == clutter_glyphs.GAP[0]
        and float(lay.gaps.max()) == clutter_glyphs.GAP[1]
    )
    assert float(lay.rotation.abs().max()) <= math.radians(clutter_glyphs.ROTATION)
    assert float(lay.slant.abs().max()) <= clutter_glyphs.SLANT
    assert bool((lay.slant == lay.slant[:, :1]).all())  # one lean along a strip
    # Plain strips on white paper keep it; cluttered ones are mostly on grey paper.
    plain = _stream(seed=1, background=[1.0, 1.0], noise=[0.0, 0.0], shading=0.0).next()
    cluttered = _stream(seed=1, clutter=1.0, background=[1.0, 1.0], noise=[0.0, 0.0]).next()
    corner = [
        torch.stack([b.images[i, :2, :2].mean() for i in range(16)]) for b in (plain, cluttered)
    ]
    assert float(corner[0].min()) > 0.999 and float(corner[1].median()) < 0.95


def _bank_glyphs(n: int = 6):
    synth = StripSynth(_data())
    bank = synth.bank
    r, k, c, v, wg, h = bank.columns.shape
    glyphs = bank.columns[0, 0, :n, 0]  # (n, Wg, H) digits 0..n-1 of one rendering
    widths = bank.widths[0, 0, :n, 0][None]  # (1, n)
    return glyphs, widths, h


def _layout(n: int, **values) -> clutter_glyphs.Layout:
    """A layout of one cluttered strip of n glyphs with the given values (else: unchanged)."""
    keys = {"rotation": 0.0, "slant": 0.0, "scale": 1.0, "lift": 0.0, "tone": 1.0}
    keys.update(values)
    full = {k: torch.full((1, n), float(v)) for k, v in keys.items()}
    return clutter_glyphs.Layout(
        rows=torch.tensor([True]),
        margins=torch.zeros(1, 2, dtype=torch.long),
        gaps=torch.zeros(1, n, dtype=torch.long),
        field=torch.zeros(1, n, 2, 4, 4),
        **full,
    )


def test_bending_nothing_leaves_each_glyph_as_it_was():
    glyphs, widths, h = _bank_glyphs()
    valid = torch.ones_like(widths, dtype=torch.bool)
    out, new_w = clutter_glyphs.bend(glyphs, widths, valid, _layout(len(glyphs)))
    assert torch.equal(new_w, widths)
    wg = glyphs.shape[1]
    assert torch.allclose(out[:, :wg], glyphs.float(), atol=1e-3)
    assert float(out[:, wg:].abs().max()) == 0.0


def test_bent_glyphs_start_at_their_first_inked_column_and_end_at_their_width():
    glyphs, widths, h = _bank_glyphs()
    valid = torch.ones_like(widths, dtype=torch.bool)
    for values in ({"rotation": 0.4}, {"slant": 0.25, "scale": 0.85}, {"lift": 2.0}):
        out, new_w = clutter_glyphs.bend(glyphs, widths, valid, _layout(len(glyphs), **values))
        inked = out.amax(2) > clutter_glyphs.INKED  # (G, Wp)
        for g in range(len(glyphs)):
            cols = torch.nonzero(inked[g]).flatten()
            assert int(cols[0]) == 0 and int(cols[-1]) == int(new_w[0, g]) - 1
    # A slant of s columns per row widens a glyph by about s times its height in ink.
    plain = clutter_glyphs.bend(glyphs, widths, valid, _layout(len(glyphs)))[1]
    leaning = clutter_glyphs.bend(glyphs, widths, valid, _layout(len(glyphs), slant=0.25))[1]
    assert bool((leaning >= plain + 2).all())


def test_a_cluttered_strip_is_painted_alike_alone_and_on_a_wider_canvas():
    gen = torch.Generator().manual_seed(0)
    ink = (torch.rand(3, 32, 60, generator=gen) > 0.8).float()
    widths = torch.tensor([60, 45, 30])
    for seed in range(4):
        alone = clutter.paint(ink.clone(), widths, torch.Generator().manual_seed(seed))
        wide = torch.nn.functional.pad(ink, (0, 37))
        beside = clutter.paint(wide, widths, torch.Generator().manual_seed(seed))
        for i, w in enumerate(widths.tolist()):
            assert torch.allclose(alone[i, :, :w], beside[i, :, :w], atol=1e-5)
            assert bool((beside[i, :, w:] == 1.0).all())  # the padding stays paper


def test_cluttered_paper_ink_curves_and_dots_stay_on_the_strips_own_columns():
    gen = torch.Generator().manual_seed(2)
    widths = torch.tensor([40, 90, 64] * 20)
    curves = clutter._curves(widths, 32, 100, gen)
    dots = clutter._dots(widths, 32, 100, gen)
    for noise in (curves, dots):
        for i, w in enumerate(widths.tolist()):
            assert float(noise[i, :, w + 2 :].abs().max()) == 0.0  # (3 x 3 dots: 1 px over)
    assert float(curves.amax()) == 1.0 and float(dots.amax()) == 1.0  # some of each drawn


def test_glyph_ink_is_darker_than_the_paper_around_it():
    ink = torch.zeros(64, 32, 80)
    ink[:, 8:24, 20:28] = 1.0  # a bar
    widths = torch.full((64,), 80)
    px = clutter.paint(ink, widths, torch.Generator().manual_seed(1))
    bar, paper = px[:, 12:20, 22:26].mean((1, 2)), px[:, 12:20, 60:70].mean((1, 2))
    assert float((paper - bar).min()) > 0.1  # the glyph stays legible on every strip


def test_a_cluttered_stream_keeps_its_spans_inside_its_strips():
    batch = _stream(seed=2, clutter=1.0).next()
    for i, label in enumerate(batch.labels):
        spans = batch.spans[i, : len(label)]
        assert bool((spans[:, 0] >= 0).all()) and bool((spans[:, 1] <= batch.widths[i]).all())
        assert bool((spans[:, 1] > spans[:, 0]).all())
    assert float(batch.images.min()) >= 0.0 and float(batch.images.max()) <= 1.0


def test_data_clutter_is_checked_in_one_line():
    with pytest.raises(UserError, match=r"data\.clutter"):
        DataConfig.check(DataConfig(clutter=1.5))
    with pytest.raises(UserError, match=r"data\.clutter.*data\.mix"):
        DataConfig.check(DataConfig(clutter=0.5, source="folder", path="x"))
    DataConfig.check(DataConfig(clutter=0.5, source="folder", path="x", mix=0.3))


def test_a_refused_clutter_exits_2_naming_the_key(tmp_path):
    got = run_cli("train", "preset=tiny", "data.clutter=2", cwd=tmp_path)
    assert got.returncode == 2
    assert "data.clutter" in got.stderr and "Traceback" not in got.stderr


def test_a_tiny_run_trains_on_cluttered_strips(tmp_path):
    run = tmp_path / "run"
    got = run_cli(
        "train", "preset=tiny", "model=ctc", "data.clutter=0.5", "train.threads=1",
        "train.steps=10", "train.progress=plain", f"hydra.run.dir={run}", cwd=tmp_path,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert (run / "checkpoints" / "best.pt").is_file()


def test_a_folder_run_clutters_its_synthetic_share(tmp_path):
    from attnlab.data.write_strips import export_folder

    gen = torch.Generator().manual_seed(5)
    batch = StripSynth(_data()).sample(torch.randint(1, 4, (40,), generator=gen), gen)
    folder = export_folder(batch, tmp_path / "folder")
    run = tmp_path / "run"
    args = ["data=folder", f"data.path={folder}", "model=ctc", "data.val_share=0.2"]
    got = run_cli(
        "train", "preset=tiny", *args, "data.mix=0.5", "data.clutter=0.5", "train.steps=6",
        "train.threads=1", "train.progress=plain", f"hydra.run.dir={run}", cwd=tmp_path,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    refused = run_cli("train", "preset=tiny", *args, "data.clutter=0.5", cwd=tmp_path)
    assert refused.returncode == 2 and "data.clutter" in refused.stderr
    assert "data.mix" in refused.stderr and "Traceback" not in refused.stderr
