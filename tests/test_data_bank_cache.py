"""The glyph bank kept on disk between processes (attnlab.data.bank_cache): a loaded bank is
the built one, anything it depends on names another file, and the cache never fails a
command (unreadable file or a bank of another shape rebuilt, unwritable folder passed over,
ATTNLAB_CACHE=off), and its files get the umask's mode."""

from __future__ import annotations

import logging
import os
import shutil
import stat

import pytest
import torch

from attnlab.config import DataConfig
from attnlab.data import bank_cache, glyphs
from attnlab.data.bank_cache import cache_dir
from attnlab.data.fonts import resolve_fonts

# Three faces at one size: banks of a fraction of a second.
SMALL = {"fonts": ["reportlab"], "font_sizes": [26], "stroke_widths": [0], "variants": 1}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, and no bank kept in this process."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNLAB_CACHE", str(folder))
    glyphs._bank.cache_clear()
    yield folder
    glyphs._bank.cache_clear()


def banks(folder):
    return sorted(folder.glob("glyph-bank-*.pt"))


def same(a: glyphs.GlyphBank, b: glyphs.GlyphBank) -> bool:
    return (
        torch.equal(a.columns, b.columns) and torch.equal(a.widths, b.widths)
        and a.renderings == b.renderings and a.blur_levels == b.blur_levels
    )  # fmt: skip


def test_a_loaded_bank_is_the_built_one(cache):
    data = DataConfig(**SMALL)
    built = glyphs.glyph_bank(data)
    (kept,) = banks(cache)
    glyphs._bank.cache_clear()  # a new process, as far as the bank goes
    loaded = glyphs.glyph_bank(data)
    assert loaded is not built and same(loaded, built)
    assert same(built, glyphs.build_bank(bank_cache.bank_key(data)))
    assert banks(cache) == [kept]


def test_another_data_key_or_font_file_is_another_bank(cache, tmp_path):
    glyphs.glyph_bank(DataConfig(**SMALL))
    glyphs.glyph_bank(DataConfig(**{**SMALL, "variants": 2}))
    assert len(banks(cache)) == 2
    font = tmp_path / "font.ttf"
    shutil.copy(next(f for f in resolve_fonts(DataConfig()) if os.path.isfile(f)), font)
    data = DataConfig(**{**SMALL, "fonts": [str(font)]})
    glyphs.glyph_bank(data)
    assert len(banks(cache)) == 3
    os.utime(font, ns=(0, 10**18))  # the same path, another file as far as anyone can tell
    glyphs._bank.cache_clear()
    glyphs.glyph_bank(data)
    assert len(banks(cache)) == 4


def test_an_unreadable_bank_is_built_again_and_replaced(cache):
    data = DataConfig(**SMALL)
    built = glyphs.glyph_bank(data)
    (kept,) = banks(cache)
    for bad in (b"", b"not a bank", None):
        if bad is None:  # a readable file of another layout
            torch.save({"columns": torch.zeros(2, 2), "widths": torch.zeros(2)}, kept)
        else:
            kept.write_bytes(bad)
        glyphs._bank.cache_clear()
        assert same(glyphs.glyph_bank(data), built)
        assert banks(cache) == [kept] and kept.stat().st_size > 1000  # written whole again


def test_off_and_unwritable_never_fail(tmp_path, monkeypatch, cache):
    data = DataConfig(**SMALL)
    monkeypatch.setenv("ATTNLAB_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() is None
    built = glyphs.glyph_bank(data)
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ATTNLAB_CACHE", str(blocker / "cache"))  # cannot be a folder
    glyphs._bank.cache_clear()
    assert same(glyphs.glyph_bank(data), built)
    assert list(tmp_path.glob("**/.glyph-bank-*")) == []  # no temporary file left


def test_the_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNLAB_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "attnlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache_dir() == tmp_path / "h" / ".cache" / "attnlab"


def test_the_least_recently_used_banks_go_first(cache, monkeypatch):
    """The cache keeps the most recently used banks within KEEP_BYTES in all: three banks of
    one size (rotations differ, not shapes) where two fit, and storing the third removes the
    least recently used."""
    from attnlab.data import bank_cache

    first, second, third = (DataConfig(**{**SMALL, "rotation": [-r, r]}) for r in (1.0, 2.0, 3.0))
    glyphs.glyph_bank(first)
    glyphs.glyph_bank(second)
    (older, newer) = sorted(banks(cache), key=lambda p: p.stat().st_mtime_ns)
    assert older.stat().st_size == newer.stat().st_size
    monkeypatch.setattr(bank_cache, "KEEP_BYTES", 2 * older.stat().st_size + 1)
    os.utime(newer, ns=(1, 1))  # `second` used long ago; now `first` is used again
    glyphs._bank.cache_clear()
    glyphs.glyph_bank(first)
    glyphs.glyph_bank(third)  # a third bank: the least recently used one (second's) goes
    assert len(banks(cache)) == 2 and older in banks(cache) and newer not in banks(cache)


def test_banks_are_kept_by_their_bytes_not_their_number(cache, monkeypatch):
    """Many small banks stored after a large one leave it in the cache while their sum fits
    (a cap of 8 banks once pushed the 100-MB default bank out of a test session's cache, to
    be built again); one more beyond the sum, and the least recently used (the large) goes."""
    from attnlab.data import bank_cache

    glyphs.glyph_bank(DataConfig(**{**SMALL, "variants": 4}))
    (large,) = banks(cache)
    small = [DataConfig(**{**SMALL, "rotation": [-r / 4, r / 4]}) for r in range(1, 12)]
    glyphs.glyph_bank(small[0])
    size = next(p for p in banks(cache) if p != large).stat().st_size
    assert size < large.stat().st_size / 4
    monkeypatch.setattr(bank_cache, "KEEP_BYTES", large.stat().st_size + 10 * size)
    for data in small[1:10]:
        glyphs.glyph_bank(data)
    assert len(banks(cache)) == 11 and large in banks(cache)  # more than 8, within the bytes
    glyphs.glyph_bank(small[10])
    assert len(banks(cache)) == 11 and large not in banks(cache)  # the eleven small ones


@pytest.mark.parametrize(
    "other, said",
    [
        ({"charset": "012345678"}, "characters (data.charset) 9, not 10"),
        ({"height": 24}, "glyph height 24, not 32"),
        ({"variants": 2}, "variants 2, not 1"),
        ({"blur": [0.0, 0.0]}, "blur levels (0.0,), not (0.0, 0.4, 0.8)"),
        ({"font_sizes": [22]}, "are not the config's fonts"),
    ],
)
def test_a_stored_bank_of_another_shape_is_built_again(cache, caplog, other, said):
    """A real bank of another config stored under this config's name (#32, class 9): never
    used (fewer characters crashed drawing; another height drew every glyph cut off), built
    again with one warning line, and replaced."""
    data = DataConfig(**SMALL)
    built = glyphs.glyph_bank(data)
    (kept,) = banks(cache)
    wrong = glyphs.build_bank(bank_cache.bank_key(DataConfig(**{**SMALL, **other})))
    torch.save(bank_cache.to_dict(wrong), kept)
    glyphs._bank.cache_clear()
    with caplog.at_level(logging.INFO, logger="attnlab.data"):
        again = glyphs.glyph_bank(data)
    assert same(again, built)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "holds another bank" in line and said in line and str(kept) in line
    want = bank_cache.shape_of(bank_cache.bank_key(data))
    assert same(bank_cache.from_dict(torch.load(kept, weights_only=True), want), built)
    caplog.clear()
    glyphs._bank.cache_clear()
    assert same(glyphs.glyph_bank(data), built) and not caplog.records  # read, no warning


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_stored_bank_gets_the_umasks_mode(cache, umask):
    old = os.umask(umask)
    try:
        glyphs.glyph_bank(DataConfig(**SMALL))
    finally:
        os.umask(old)
    (kept,) = banks(cache)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o666 & ~umask


CHILD = """
import sys, time
from attnlab.config import DataConfig
from attnlab.data import glyphs
built = glyphs.build_bank
def counted(key):
    with open(sys.argv[1], "a") as f:
        f.write("built\\n")
    time.sleep(1.0)  # a slow build: the others start while it runs
    return built(key)
glyphs.build_bank = counted
bank = glyphs.glyph_bank(DataConfig(**{SMALL!r}))
print(tuple(bank.columns.shape))
"""


def test_processes_that_want_the_same_bank_at_once_build_it_once(cache, tmp_path):
    """A sweep's jobs (or a test run's workers) starting on a fresh cache: one builds the
    bank, the others wait for its lock and load it; every one gets the same bank."""
    import subprocess
    import sys

    marker = tmp_path / "builds.txt"
    script = CHILD.replace("{SMALL!r}", repr(SMALL))
    env = {**os.environ, "ATTNLAB_CACHE": str(cache)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(marker)], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    assert marker.read_text() == "built\n"  # once, not three times
    assert len({out for out, _ in outs}) == 1 and len(banks(cache)) == 1
    assert [p.suffix for p in cache.glob("glyph-bank-*.lock")] == [".lock"]
