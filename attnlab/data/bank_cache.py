"""The glyph bank kept on disk between processes.

Building the default bank takes about 8 s on an idle core, twice that under load (every
character rendered in every font, size and stroke, then warped and blurred into its
variants), and every command that draws strips needs it: ``attnlab train``, ``eval``,
``probe``, ``data preview`` and ``export``, and each sweep job. Within a process it is built once
(``attnlab.data.glyphs.glyph_bank``); this module keeps it on disk so that the next process
loads it in a fraction of a second, and processes that want it at once (a sweep's jobs on a
fresh cache) build it once: one holds its lock file while it builds, the others wait and load.

A bank is stored in the cache folder (``$ATTNLAB_CACHE``, else ``$XDG_CACHE_HOME/attnlab``,
else ``~/.cache/attnlab``) under a name that hashes everything it depends on: the data keys
that define it, the source of the modules that draw it, the versions of torch, Pillow and
its FreeType, and each font file's path, size and modification time. Change any of them and
the bank is built anew, so a cached bank is always the one this code would build.
``ATTNLAB_CACHE=off`` never reads or writes one. A file that cannot be read (cut short,
another format), or that holds a bank of another shape than the config's (``Shape``: glyph
height, characters, variants, blur levels, renderings), is rebuilt and replaced, with one
warning line; a folder that cannot be written (read-only, full disk) is passed over: the
cache never fails a command, and never changes what it computes.
Its files are written whole (``attnlab.io.atomic_write``), with the mode the umask gives.
It holds the most recently used banks up to ``KEEP_BYTES`` in all (storing another removes
the least recently used first; the newest is always kept): a cap on their bytes, not their
number, because banks differ a thousandfold in size and cost. A cap of 8 banks let a few
small ones (a charset, a font) push out the default bank, 100 MB and 8-24 s to build again.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnlab.config import DataConfig
from attnlab.data.bank_keys import BANK_KEYS  # torch-free: the report reads them there
from attnlab.data.fonts import resolve_fonts
from attnlab.data.ranges import levels
from attnlab.io import WriteError, atomic_write

log = logging.getLogger("attnlab.data")

OFF = ("off", "0", "no", "false")
FORMAT = 1  # of the stored file; bump when its layout changes
KEEP_BYTES = 2**30  # the banks kept, in all (the default one is about 100 MB)


@dataclass(frozen=True)
class GlyphBank:
    """Every character of the charset (``data.charset``) in every font, size and stroke
    that renders all of them, in geometric variants and blur levels (built by
    ``attnlab.data.glyphs``).

    Stored column-major, (..., Wg, H), so that placing a glyph adds whole columns.
    """

    columns: torch.Tensor  # (R, K, C, V, Wg, H) uint8 ink, left-aligned on the first ink column
    widths: torch.Tensor  # (R, K, C, V) int64 ink width of each glyph
    renderings: tuple[str, ...]  # "font@size/stroke" for each of the R renderings
    blur_levels: tuple[float, ...]  # the K blur sigmas


_SHARES = ("marked_zeros", "oldstyle", "footless_ones", "elastic")  # 0 and 0.0 alike
_RANGES = ("font_sizes", "stroke_widths", "scale", "stretch", "shear", "rotation", "blur")


def bank_key(data: DataConfig) -> tuple:
    """The values of ``BANK_KEYS``, with the font files they resolve to: a bank's name in
    this process and (hashed, ``bank_digest``) on disk."""

    def value(name: str) -> Any:
        raw = getattr(data, name)
        if name == "fonts":
            return tuple(resolve_fonts(data))
        if name in _RANGES:
            return tuple(raw)
        return float(raw) if name in _SHARES else str(raw) if name == "charset" else raw

    return tuple(value(name) for name in BANK_KEYS)


def px(size: int, height: int) -> int:
    """A font size of data.font_sizes (px at height 32) at this strip height."""
    return max(6, round(size * height / 32))


def shape_of(key: tuple) -> Shape:
    """The shape of the bank of ``key`` (``bank_key``): what a stored one must have."""
    height, fonts, sizes, strokes, variants, blur, charset = (
        key[i] for i in (0, 1, 2, 3, 4, 10, 15)
    )
    names = {f"{Path(f).stem}@{px(s, height)}/{k}" for f in fonts for s in sizes for k in strokes}
    return Shape(height, len(charset), variants, tuple(levels(blur)), frozenset(names))


def cache_dir() -> Path | None:
    """The folder banks are kept in; None when ``ATTNLAB_CACHE`` turns the cache off."""
    chosen = os.environ.get("ATTNLAB_CACHE", "").strip()
    if chosen.lower() in OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "attnlab"


def bank_digest(key: tuple, modules: tuple[Any, ...], fonts: tuple[str, ...]) -> str:
    """What a bank depends on, hashed: ``key`` (the data keys), the source of ``modules``
    (the code that draws it), library versions and each font file's identity."""
    import PIL
    from PIL import features

    h = hashlib.sha256()
    h.update(repr((FORMAT, key)).encode())
    for module in modules:
        h.update(inspect.getsource(module).encode())
    h.update(f"torch {torch.__version__} pillow {PIL.__version__}".encode())
    h.update(f"freetype {features.version('freetype2')}".encode())
    for font in fonts:
        try:
            st = os.stat(font)
            h.update(f"{font} {st.st_size} {st.st_mtime_ns}".encode())
        except OSError:  # not a file (pillow:default): Pillow's version names it
            h.update(font.encode())
    return h.hexdigest()[:32]


def content_digest(bank: GlyphBank) -> str:
    """The digest of what a bank holds (every pixel and width, its renderings and blur
    levels): equal for two banks exactly when they draw the same strips. Unlike
    ``bank_digest`` (the cache's key: what a bank is built from), it moves when a package
    draws other glyphs from the same inputs (attnlab.runs.drawn, tests/test_lock_pins.py)."""
    h = hashlib.sha256()
    h.update(repr((tuple(bank.columns.shape), bank.renderings, bank.blur_levels)).encode())
    h.update(bank.columns.contiguous().numpy())  # (R, K, C, V, Wg, H) uint8
    h.update(bank.widths.contiguous().numpy())  # (R, K, C, V) int64
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Shape:
    """What the config says its bank holds: a stored bank is used only if it holds exactly
    this (a file of the right name but another shape would crash strip drawing, or draw
    every glyph cut off)."""

    height: int  # data.height: rows of every glyph
    chars: int  # len(data.charset)
    variants: int  # data.variants
    blur_levels: tuple[float, ...]  # the sigmas data.blur gives
    renderings: frozenset[str]  # every "font@px/stroke" data.fonts/font_sizes/stroke_widths name


class OtherShape(ValueError):
    """A stored bank of another shape than the config's, with the first dimension that differs."""


def load_or_build(digest: str, build: Callable[[], GlyphBank], want: Shape) -> GlyphBank:
    """The bank stored under ``digest`` if it has the shape ``want``, else ``build()``
    stored there for the next process (loaded with ``weights_only=True``)."""
    folder = cache_dir()
    if folder is None:
        return build()
    path = folder / f"glyph-bank-{digest}.pt"
    bank = _load(path, want) if path.is_file() else None
    if bank is not None:
        return bank
    with _building(path):  # one process builds it; the others wait, then load it
        waited = _load(path, want, say=False) if path.is_file() else None
        if waited is not None:
            return waited
        bank = build()
        _store(path, to_dict(bank))
    _forget_oldest(folder)
    return bank


def _load(path: Path, want: Shape, say: bool = True) -> GlyphBank | None:
    """The bank stored at ``path`` if it has the shape ``want``; None (with a warning line
    where ``say``) when it is another bank or cannot be read: it is then built again."""
    try:
        bank = from_dict(torch.load(path, weights_only=True), want)
    except OtherShape as err:
        if say:
            log.warning("glyph bank cache %s holds another bank (%s); building it again", path, err)
        return None
    except Exception as err:  # cut short, or not a bank: build it again
        if say:
            log.warning("glyph bank cache %s unreadable (%s); building it again", path, err)
        return None
    _touch(path)
    return bank


@contextlib.contextmanager
def _building(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock file (``.lock`` beside it, ``flock``: the kernel drops it when
    its holder dies) while one process builds and stores the bank, so that the jobs of a
    sweep, or the workers of a test run, that start on a fresh cache build it once, not once
    each; nothing is held where the folder cannot be written or locked."""
    fd = None
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):  # not POSIX, read-only, no locks: build without waiting
        pass
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock


def to_dict(bank: GlyphBank) -> dict[str, Any]:
    """A bank as plain tensors, lists and strings (what ``torch.load(weights_only=True)`` reads)."""
    return {
        "columns": bank.columns,
        "widths": bank.widths,
        "renderings": list(bank.renderings),
        "blur_levels": list(bank.blur_levels),
    }


def from_dict(d: dict[str, Any], want: Shape) -> GlyphBank:
    """A stored bank, checked: its layout (else ValueError), then every dimension against
    ``want`` (else OtherShape, naming the first that differs)."""
    columns, widths = d["columns"], d["widths"]  # (R, K, C, V, Wg, H), (R, K, C, V)
    ok = (
        columns.dtype == torch.uint8
        and columns.dim() == 6
        and widths.dtype == torch.int64
        and widths.shape == columns.shape[:4]
        and len(d["renderings"]) == columns.shape[0]
        and len(d["blur_levels"]) == columns.shape[1]
    )
    if not ok:
        raise ValueError("not a glyph bank of this layout")
    renderings = tuple(str(r) for r in d["renderings"])
    blur = tuple(float(s) for s in d["blur_levels"])
    r, _, c, v, wg, h = columns.shape
    other = [
        (h, want.height, "glyph height"),
        (c, want.chars, "characters (data.charset)"),
        (v, want.variants, "variants"),
        (blur, want.blur_levels, "blur levels"),
    ]
    for got, wanted, what in other:
        if got != wanted:
            raise OtherShape(f"{what} {got}, not {wanted}")
    stray = sorted(set(renderings) - want.renderings)
    if r == 0 or stray or len(set(renderings)) != r:
        raise OtherShape(f"renderings {list(renderings)[:3]} are not the config's fonts")
    if r and (int(widths.min()) < 1 or int(widths.max()) > wg):
        raise OtherShape(f"glyph widths {int(widths.min())}..{int(widths.max())} outside 1..{wg}")
    return GlyphBank(columns, widths, renderings, blur)


def _touch(path: Path) -> None:
    """Marks a bank as used now (the cache forgets the least recently used first)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _forget_oldest(folder: Path) -> None:
    """Removes the least recently used banks beyond ``KEEP_BYTES`` in all: the most recently
    used ones are kept while their sizes sum within it, and the newest whatever its size."""
    try:
        banks = [(p, p.stat()) for p in folder.glob("glyph-bank-*.pt")]
        banks.sort(key=lambda b: b[1].st_mtime_ns, reverse=True)
        total = 0
        for i, (old, st) in enumerate(banks):
            total += st.st_size
            if i > 0 and total > KEEP_BYTES:
                old.unlink(missing_ok=True)
                old.with_suffix(".lock").unlink(missing_ok=True)
    except OSError:  # another process removed one meanwhile, or the folder is not ours
        pass


def _store(path: Path, payload: dict[str, Any]) -> None:
    """Written whole or not at all (``atomic_write``: a temporary file renamed, with the mode
    the umask gives), so that two processes building the same bank at once never read each
    other's half-written file; a folder that cannot be written is passed over."""
    try:
        atomic_write(path, lambda tmp: torch.save(payload, tmp))
    except (WriteError, RuntimeError) as err:  # a full disk, no permission, ...
        log.info("glyph bank not kept in %s: %s", path.parent, err)
