"""A run records what drew it: the versions of the packages that move its numbers and the
digest of its glyph bank, in its checkpoints and metrics.json (attnlab.runs.drawn)."""

from __future__ import annotations

import json
from importlib import metadata

from attnlab.data.bank_cache import content_digest
from attnlab.data.glyphs import glyph_bank
from attnlab.runs import checkpoint, drawn


def test_a_trained_run_records_its_packages_and_glyph_bank(trained):
    run = trained["attention"]
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    ckpt = checkpoint.load(run / "checkpoints" / "last.pt")
    record = metrics["drawn_by"]
    assert record == ckpt.drawn_by == checkpoint.load(run / "checkpoints" / "best.pt").drawn_by
    assert record["packages"] == {name: metadata.version(name) for name in drawn.PACKAGES}
    fonts = {"reportlab", "pymupdf-fonts", "font-lato", "font-source-serif-pro"}
    assert set(record["packages"]) >= {"torch", "numpy", "pillow", "matplotlib", *fonts}
    # The bank of the run's own data config (preset=tiny), rebuilt from its checkpoint.
    assert record["glyph_bank"] == content_digest(glyph_bank(ckpt.run_config().data))


def test_a_bank_digest_moves_with_one_pixel_and_a_record_names_what_changed():
    from attnlab.config import DataConfig

    data = DataConfig(font_sizes=[26], stroke_widths=[0], variants=2)  # preset=tiny's bank
    bank = glyph_bank(data)
    columns = bank.columns.clone()
    columns.view(-1)[columns.numel() // 2] ^= 1  # one pixel, one bit
    other = type(bank)(columns, bank.widths, bank.renderings, bank.blur_levels)
    assert content_digest(bank) == content_digest(glyph_bank(data))
    assert content_digest(other) != content_digest(bank)
    before = {"packages": {"pillow": "12.0.0", "torch": "2.13.0"}, "glyph_bank": "a" * 32}
    now = {"packages": {"pillow": "13.0.0", "torch": "2.13.0"}, "glyph_bank": "b" * 32}
    assert drawn.changes(before, now) == [
        "pillow 12.0.0 -> 13.0.0",
        f"glyph bank {'a' * 32} -> {'b' * 32}",
    ]
    assert drawn.changes(before, before) == [] and drawn.changes(None, now) == []
    assert drawn.short(before) == drawn.short(json.loads(json.dumps(before))) != drawn.short(now)
