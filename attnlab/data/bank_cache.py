"""The glyph bank kept on disk between processes.

Building the default bank takes about 8 s on an idle core, twice that under load (every
character rendered in every font, size and stroke, then warped and blurred into its
variants), and every command that draws strips needs it: ``attnlab train``, ``eval``,
``probe``, ``data preview`` and ``export``, and each sweep job. Within a process it is built once
(``attnlab.data.glyphs.glyph_bank``); this module keeps it on disk so that the next process
loads it in a fraction of a second.

A bank is stored in the cache folder (``$ATTNLAB_CACHE``, else ``$XDG_CACHE_HOME/attnlab``,
else ``~/.cache/attnlab``) under a name that hashes everything it depends on: the data keys
that define it, the source of the modules that draw it, the versions of torch, Pillow and
its FreeType, and each font file's path, size and modification time. Change any of them and
the bank is built anew, so a cached bank is always the one this code would build.
``ATTNLAB_CACHE=off`` never reads or writes one. A file that cannot be read (cut short,
another format) is rebuilt and replaced; a folder that cannot be written (read-only, full
disk) is passed over: the cache never fails a command, and never changes what it computes.
It holds at most ``KEEP`` banks: storing another removes the least recently used.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("attnlab.data")

OFF = ("off", "0", "no", "false")
FORMAT = 1  # of the stored file; bump when its layout changes
KEEP = 8  # banks kept (the default one is about 100 MB); the least recently used go first


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


def load_or_build(digest: str, build: Callable[[], Any], to_dict, from_dict) -> Any:
    """The bank stored under ``digest``, else ``build()`` stored there for the next process.

    ``to_dict``/``from_dict`` turn a bank into plain tensors, lists and strings and back
    (loaded with ``weights_only=True``); ``from_dict`` raises on anything malformed."""
    folder = cache_dir()
    if folder is None:
        return build()
    path = folder / f"glyph-bank-{digest}.pt"
    if path.is_file():
        try:
            bank = from_dict(torch.load(path, weights_only=True))
            _touch(path)
            return bank
        except Exception as err:  # cut short, or not a bank: build it again
            log.warning("glyph bank cache %s unreadable (%s); building it again", path, err)
    bank = build()
    _store(path, to_dict(bank))
    _forget_oldest(folder)
    return bank


def _touch(path: Path) -> None:
    """Marks a bank as used now (the cache forgets the least recently used first)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _forget_oldest(folder: Path) -> None:
    """Removes all but the ``KEEP`` most recently used banks."""
    try:
        kept = sorted(folder.glob("glyph-bank-*.pt"), key=lambda p: p.stat().st_mtime_ns)
        for old in kept[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:  # another process removed one meanwhile, or the folder is not ours
        pass


def _store(path: Path, payload: dict[str, Any]) -> None:
    """Written whole or not at all (a temporary file renamed), so that two processes
    building the same bank at once never read each other's half-written file."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".glyph-bank-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        log.info("glyph bank not kept in %s: %s", path.parent, err)
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
