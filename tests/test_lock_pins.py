"""What the lock draws is pinned beside it (lock-pins.toml), so that a change is a decision.

- ``glyph_bank``: the digest of the default glyph bank's pixels (``DataConfig()``; what
  ``make demo`` trains and tests on). Its arithmetic is exact (attnlab.data.warp: float64,
  rounded to uint8 once), so every x86-64 CPU with the lock draws it bit for bit; a refreshed
  lock that moves a font, Pillow or torch, or a change of the code that draws it, moves it.
- ``tiny_attention`` / ``tiny_fixed``: the guard of the demo's figures. The session's tiny
  trainings (tests/conftest.py ``trained``: preset=tiny, train.threads=1, seed 0) run the
  demo's code path in seconds; what a user compares of them, their validation numbers, must
  stay within ``tolerance`` of the pins. Their weights are not pinned: float sums run in
  another order on another CPU, so no hash of trained weights holds across machines.

Each pin keeps the ``drawn_by`` of the side that took it (package versions and glyph bank,
attnlab.runs.drawn), and a failure names both records and how they differ.

After a deliberate change (``make lock LOCK_ARGS=--upgrade``, a changed default, ...):
``make install``, then ``ATTNLAB_UPDATE_PINS=1 .venv/bin/python -m pytest -n 0
tests/test_lock_pins.py`` writes the new values into lock-pins.toml (the tests skip,
saying so); commit it with the lock, saying why the numbers moved.
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any

import pytest
from helpers import lock
from helpers.lock import LOCK, locked, read_pins, run_numbers, write_pin

from attnlab.runs import drawn

UPDATE = os.environ.get("ATTNLAB_UPDATE_PINS") == "1"


def machine() -> str:
    """This CPU's model and the kernels torch picks on it: where a pin was taken."""
    import torch

    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, torch CPU capability {torch.backends.cpu.get_cpu_capability()}"


def what_to_compare(pinned: dict[str, Any] | None, here: dict[str, Any], where: str) -> str:
    """The sentence that says what to compare when a pin fails: the ``drawn_by`` of both
    sides and how they differ, and the installed packages against the lock."""
    pins = locked(LOCK.read_text(encoding="utf-8"))
    other = [
        f"{n} {metadata.version(n)} (lock: {pins[n].version})"
        for n in drawn.PACKAGES
        if n in pins and metadata.version(n) != pins[n].version
    ]
    lock_said = (
        f"installed packages differ from the lock: {', '.join(other)}"
        if other
        else "the installed packages are the lock's"
    )
    if not pinned:
        return f"{lock_said}; lock-pins.toml records no drawn_by for it (here: {where})"
    moved = drawn.changes(pinned, here)
    said = (
        f"drawn_by differs, pinned -> here: {'; '.join(moved)}"
        if moved
        else f"drawn_by is the same on both sides ({drawn.short(here)}): the code changed "
        f"what it computes, or this machine's arithmetic moved it"
    )
    return (
        f"{said}; {lock_said}. Compare the records: here {where}, pinned lock-pins.toml "
        f"(taken on {read_pins().get('taken_on', 'an unrecorded machine')})"
    )


def off_pins(numbers: dict[str, float], pinned: dict[str, Any], tolerance: float) -> list[str]:
    """The numbers further than ``tolerance`` from their pins (or without one)."""
    out = []
    for name, value in numbers.items():
        pin = pinned.get(name)
        if not isinstance(pin, int | float) or abs(value - pin) > tolerance:
            out.append(f"{name} {value:.4f} (pinned {pin})")
    return out


def _update(key: str, value: Any, old: Any) -> None:
    write_pin(key, value)
    write_pin("taken_on", machine())
    pytest.skip(f"lock-pins.toml: {key} updated from {old} to {value}")


@pytest.mark.slow  # builds the default bank when no test of the session has (13 s idle)
def test_the_default_glyph_bank_is_the_pinned_one():
    from attnlab.config import DataConfig
    from attnlab.data.bank_cache import content_digest
    from attnlab.data.glyphs import glyph_bank

    now = content_digest(glyph_bank(DataConfig()))
    here = {"packages": drawn.package_versions(), "glyph_bank": now}
    pins = read_pins()
    if UPDATE and (now != pins.get("glyph_bank") or here != pins.get("glyph_bank_drawn_by")):
        write_pin("glyph_bank_drawn_by", here)
        _update("glyph_bank", now, pins.get("glyph_bank"))
    if now != pins.get("glyph_bank"):
        pytest.fail(
            f"glyph_bank is {now}, lock-pins.toml pins {pins.get('glyph_bank')}: "
            + what_to_compare(pins.get("glyph_bank_drawn_by"), here, "this process")
            + ". If that is meant, update the pins (ATTNLAB_UPDATE_PINS=1, see this "
            "module's docstring) and say why in the commit"
        )


@pytest.mark.parametrize("reader", ["attention", "fixed"])
def test_the_tiny_training_that_guards_the_demo_computes_the_pinned_numbers(trained, reader):
    key = f"tiny_{reader}"
    numbers, here = run_numbers(trained[reader])
    pins = read_pins()
    pinned = pins.get(key) if isinstance(pins.get(key), dict) else {}
    tolerance = float(pins["tolerance"])
    if UPDATE and (
        {k: pinned.get(k) for k in numbers} != numbers or pinned.get("drawn_by") != here
    ):
        _update(key, {**numbers, "drawn_by": here}, pins.get(key))
    if off := off_pins(numbers, pinned, tolerance):
        where = f"{trained[reader] / 'metrics.json'} drawn_by"
        pytest.fail(
            f"{key}: {', '.join(off)}: further than lock-pins.toml's tolerance {tolerance} "
            f"from the pins; " + what_to_compare(pinned.get("drawn_by"), here, where)
        )


def test_a_failing_pin_names_both_sides_and_the_tolerance_holds(tmp_path, monkeypatch):
    pinned = {"packages": {"torch": "2.12.0", "pillow": "12.0.0"}, "glyph_bank": "a" * 32}
    here = {"packages": {"torch": "2.13.0", "pillow": "12.0.0"}, "glyph_bank": "b" * 32}
    said = what_to_compare(pinned, here, "RUN/metrics.json drawn_by")
    assert f"pinned -> here: torch 2.12.0 -> 2.13.0; glyph bank {'a' * 32} -> {'b' * 32}" in said
    assert "RUN/metrics.json drawn_by" in said and "taken on " in said
    same = what_to_compare(here, here, "this process")
    assert "drawn_by is the same on both sides" in same and drawn.short(here) in same
    pins = {"val_cer": 0.9, "val_exact_acc": 0.1}
    assert off_pins({"val_cer": 0.93, "val_exact_acc": 0.08}, pins, 0.032) == []
    assert off_pins({"val_cer": 0.95, "val_exact_acc": 0.1}, pins, 0.032) == [
        "val_cer 0.9500 (pinned 0.9)"
    ]
    # ATTNLAB_UPDATE_PINS=1 writes tables and texts into the file, its header kept.
    tolerance = read_pins()["tolerance"]
    copy = tmp_path / "lock-pins.toml"
    copy.write_text(lock.PINS.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(lock, "PINS", copy)
    write_pin("tiny_fixed", {"val_cer": 0.5, "drawn_by": here})
    write_pin("glyph_bank", "c" * 32)
    again = read_pins()
    assert again["tiny_fixed"] == {"val_cer": 0.5, "drawn_by": here}
    assert again["glyph_bank"] == "c" * 32 and again["tolerance"] == tolerance
    assert copy.read_text(encoding="utf-8").startswith("# What requirements.lock draws")
