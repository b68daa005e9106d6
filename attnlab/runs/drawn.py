"""What drew a run: the versions of the packages that move its numbers, and its glyph bank.

The same config and seed give the same strips, weights and numbers only with the same
packages: torch (kernels and random streams), NumPy and Pillow (glyph rendering), matplotlib,
ReportLab and the font packages (the font files the glyphs are drawn from). The training
session records them once per run, in the checkpoint and in metrics.json (``drawn_by``), and
the report shows a short digest of the record per run and says in one line when runs it
compares or averages were drawn from different glyph banks. requirements.lock pins these
packages; ``glyph_bank`` is the digest of the glyphs' pixels (``bank_cache.content_digest``),
so a bank that moved with a package is seen even when the versions look alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

# Distribution names, as pip and requirements.lock spell them.
PACKAGES = (
    "torch", "numpy", "pillow", "matplotlib", "reportlab", "pymupdf-fonts", "font-lato",
    "font-source-serif-pro",
)  # fmt: skip
ABSENT = "absent"


def package_versions() -> dict[str, str]:
    """The installed version of each of PACKAGES (``absent`` when one is not installed)."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = ABSENT
    return out


def drawn_by(synth: Any) -> dict[str, Any]:
    """The record of what drew a run whose strips come from ``synth`` (a StripSynth): the
    package versions, and the digest of the glyph bank it built (None when it draws no
    strips: labelled strips alone, data=folder with data.mix=0)."""
    from attnlab.data.bank_cache import content_digest

    bank = vars(synth).get("bank")  # built in StripSynth.__init__ when the run draws strips
    return {
        "packages": package_versions(),
        "glyph_bank": None if bank is None else content_digest(bank),
    }


def short(record: Mapping[str, Any] | None) -> str | None:
    """Eight hex digits naming a record (versions and bank): equal records, equal digests."""
    if not record:
        return None
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def changes(before: Mapping[str, Any] | None, now: Mapping[str, Any]) -> list[str]:
    """What differs between two records, as ``name old -> new`` (empty when equal)."""
    if not before:
        return []
    old, new = dict(before.get("packages") or {}), dict(now.get("packages") or {})
    out = [f"{k} {old.get(k)} -> {new.get(k)}" for k in sorted(old.keys() | new.keys())
           if old.get(k) != new.get(k)]  # fmt: skip
    if before.get("glyph_bank") != now.get("glyph_bank"):
        out.append(f"glyph bank {before.get('glyph_bank')} -> {now.get('glyph_bank')}")
    return out


def bank_note(banks: Iterable[str | None], what: str) -> str | None:
    """One line when the runs of ``what`` were drawn from more than one glyph bank (runs that
    recorded none, made by an older attnlab or on labelled strips alone, are not counted)."""
    found = sorted({b for b in banks if b})
    if len(found) < 2:
        return None
    return (
        f"{what}: its runs were drawn from {len(found)} different glyph banks "
        f"({', '.join(b[:8] for b in found)}): other package versions drew other glyphs, so "
        f"their numbers differ for that reason too (runs table: drawn by)"
    )
