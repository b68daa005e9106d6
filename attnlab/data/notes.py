"""What attnlab says about image files: their names as a terminal shows them (``shown``), and
the notes that recur image after image said once, with a count (``Tally``).

Torch-free, like ``attnlab.data.pixels``, which words its errors and warnings with these.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

# prepare's note on an image of light ink on dark paper; always the last of an image's notes
INVERTED = "light ink on dark paper: inverted to read it"


def shown(name: Path | str) -> str:
    """A file name as a user's terminal shows it: bytes that are not UTF-8 (a name from a
    latin-1 disk, held by Python as surrogates) as ``\\xff``, not ``\\udcff``; quoted
    (Python's repr) when it holds a newline or another character that is not printable, so
    that it stays on its one line."""
    text = os.fspath(name)
    text = os.fsdecode(text) if isinstance(text, bytes) else text
    try:
        raw = os.fsencode(text)  # the bytes the file system holds
    except UnicodeEncodeError:  # a surrogate no file name decodes to: as it is
        raw = text.encode("utf-8", "backslashreplace")
    text = raw.decode("utf-8", "backslashreplace")
    return text if text.isprintable() else repr(text)


class Tally:
    """A warning callable (``Warn``) for a batch of images: an image whose one note is the
    inversion (``INVERTED``) is counted, not said, and ``close`` says them once, naming the
    first and the count. Every other line goes on to ``warn`` as it comes (an image with
    other notes as well keeps its own line, the inversion in it). Thread-safe: a source's
    strips are decoded in threads (``attnlab.data.strip_cache.decode_all``); there the first is
    the first by name (``by_name``: "labels.csv:3" before "labels.csv:12"), not by time."""

    def __init__(self, warn: Callable[[str], None], by_name: bool = False):
        self.warn, self.by_name = warn, by_name
        self.first: str | None = None
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        name, sep, _ = message.rpartition(f": {INVERTED}")
        if not sep or not message.endswith(INVERTED):
            self.warn(message)
            return
        with self._lock:
            self.count += 1
            if self.first is None or (self.by_name and _natural(name) < _natural(self.first)):
                self.first = name

    def close(self, total: int) -> None:
        """Say the inverted images among ``total`` once (nothing when none were), and start
        counting anew."""
        with self._lock:
            first, count, self.first, self.count = self.first, self.count, None, 0
        if count == 1:
            self.warn(f"{first}: {INVERTED}")
        elif count > 1:
            self.warn(
                f"{first} and {count - 1} more of the {total} images: light ink on dark "
                "paper: each inverted to read it"
            )


def _natural(text: str) -> list:
    """A sort key that orders the numbers in ``text`` by value ("x:3" before "x:12")."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text)]
