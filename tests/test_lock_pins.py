"""What the lock draws is pinned beside it (lock-pins.toml), so that a change is a decision.

- ``glyph_bank``: the digest of the default glyph bank's pixels (``DataConfig()``; what
  ``make demo`` trains and tests on). Two installs of the lock a day or a year apart must
  draw it bit for bit; a refreshed lock that moves a font, Pillow or torch moves it.
- ``tiny_attention`` / ``tiny_fixed``: the guard of the demo's figures. The session's tiny
  trainings (tests/conftest.py ``trained``: preset=tiny, train.threads=1, seed 0) hashed
  (weights and validation numbers): they run the demo's code path (strips from the same
  fonts, the encoder, each reader, the optimiser) in seconds, so they move whenever the
  demo's numbers would.

After a deliberate change (``make lock LOCK_ARGS=--upgrade``, a changed default, ...):
``make install``, then ``ATTNLAB_UPDATE_PINS=1 .venv/bin/python -m pytest -n 0
tests/test_lock_pins.py`` writes the new values into lock-pins.toml (the tests skip,
saying so); commit it with the lock, saying why the numbers moved (README "Two commands").
"""

from __future__ import annotations

import os
from importlib import metadata

import pytest
from helpers.lock import LOCK, locked, read_pins, run_digest, write_pin

from attnlab.runs.drawn import PACKAGES

UPDATE = os.environ.get("ATTNLAB_UPDATE_PINS") == "1"


def _check(key: str, now: str) -> None:
    pinned = read_pins().get(key)
    if UPDATE and now != pinned:
        write_pin(key, now)
        pytest.skip(f"lock-pins.toml: {key} updated from {pinned} to {now}")
    if now == pinned:
        return
    pins = locked(LOCK.read_text(encoding="utf-8"))
    other = [
        f"{n} {metadata.version(n)} (lock: {pins[n].version})"
        for n in PACKAGES
        if n in pins and metadata.version(n) != pins[n].version
    ]
    why = f"installed packages differ from the lock: {', '.join(other)}" if other else (
        "the installed packages are the lock's: the code changed what it computes"
    )  # fmt: skip
    pytest.fail(
        f"{key} is {now}, lock-pins.toml pins {pinned}: {why}. If that is meant, update the "
        f"pin (ATTNLAB_UPDATE_PINS=1, see this module's docstring) and say why in the commit"
    )


@pytest.mark.slow  # builds the default bank when no test of the session has (8 s idle)
def test_the_default_glyph_bank_is_the_pinned_one():
    from attnlab.config import DataConfig
    from attnlab.data.bank_cache import content_digest
    from attnlab.data.glyphs import glyph_bank

    _check("glyph_bank", content_digest(glyph_bank(DataConfig())))


@pytest.mark.parametrize("reader", ["attention", "fixed"])
def test_the_tiny_training_that_guards_the_demo_computes_the_pinned_numbers(trained, reader):
    _check(f"tiny_{reader}", run_digest(trained[reader]))
