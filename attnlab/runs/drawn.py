"""What drew a run: the versions of the packages that move its numbers, and its glyph bank.

The same config and seed give the same strips, weights and numbers only with the same
packages: torch (kernels and random streams), NumPy and Pillow (glyph rendering), matplotlib,
ReportLab and the font packages (the font files the glyphs are drawn from). The training
session records them once per run, in the checkpoint and in metrics.json (``drawn_by``), and
the report shows a short digest of the record per run and says in one line when runs it
compares or averages were drawn from different glyph banks, and why: other package
versions, or config keys that change the glyphs (``bank_cache.BANK_KEYS``). A record that
cannot be read (an edited metrics.json) is named, never compared. requirements.lock pins these
packages; ``glyph_bank`` is the digest of the glyphs' pixels (``bank_cache.content_digest``),
so a bank that moved with a package is seen even when the versions look alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

# Distribution names, as pip and requirements.lock spell them.
PACKAGES = (
    "torch",
    "numpy",
    "pillow",
    "matplotlib",
    "reportlab",
    "pymupdf-fonts",
    "font-lato",
    "font-source-serif-pro",
)
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
    out = [
        f"{k} {old.get(k)} -> {new.get(k)}"
        for k in sorted(old.keys() | new.keys())
        if old.get(k) != new.get(k)
    ]
    if before.get("glyph_bank") != now.get("glyph_bank"):
        out.append(f"glyph bank {before.get('glyph_bank')} -> {now.get('glyph_bank')}")
    return out


def unreadable(record: Any) -> str | None:
    """Why a ``drawn_by`` record as read from metrics.json cannot be compared (an edited or
    damaged file), or None when it can (None itself: a run that recorded nothing)."""
    if record is None:
        return None
    if not isinstance(record, Mapping):
        return f"drawn_by is {_kind(record)}, not a record"
    bank = record.get("glyph_bank")
    if bank is not None and not isinstance(bank, str):
        return f"drawn_by.glyph_bank is {_kind(bank)}, not a digest"
    packages = record.get("packages")
    if packages is not None and not (
        isinstance(packages, Mapping) and all(isinstance(v, str) for v in packages.values())
    ):
        return "drawn_by.packages is not a table of package versions"
    return None


def _kind(value: Any) -> str:
    """A JSON value's kind, as a reader of the file would name it."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return "text"
    return {list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class Drawing:
    """What drew one run, as the report compares it: its glyph bank's digest, its package
    versions and the config's values of the keys that define a bank (``data.<key>`` of
    ``bank_cache.BANK_KEYS``, as JSON text)."""

    bank: str | None
    packages: Mapping[str, str] = field(default_factory=dict)
    keys: Mapping[str, str] = field(default_factory=dict)


def bank_note(drawings: Iterable[Drawing], what: str) -> str | None:
    """One line when the runs of ``what`` were drawn from more than one glyph bank (runs that
    recorded none, made by an older attnlab or on labelled strips alone, are not counted),
    naming the cause their records show: the package versions that differ, the config keys
    that change the glyphs and differ, or neither (then their drawn_by are to compare)."""
    runs = [d for d in drawings if d.bank]
    found = sorted({d.bank for d in runs if d.bank})
    if len(found) < 2:
        return None
    causes = []
    if moved := _differing([d.packages for d in runs]):
        versions = "; ".join(f"{name} {', '.join(values)}" for name, values in moved.items())
        causes.append(f"other package versions drew other glyphs ({versions})")
    if keys := _differing([d.keys for d in runs]):
        causes.append(f"their configs differ in {', '.join(keys)}, which change the glyphs")
    if not causes:
        causes.append(
            "the same package versions and glyph keys drew other glyphs (another machine's "
            "fonts, or an edited record: compare the runs' drawn_by in metrics.json)"
        )
    return (
        f"{what}: its runs were drawn from {len(found)} different glyph banks "
        f"({', '.join(b[:8] for b in found)}): {'; and '.join(causes)}, so their numbers "
        f"differ for that reason too (runs table: drawn by)"
    )


def _differing(tables: list[Mapping[str, str]]) -> dict[str, list[str]]:
    """The names whose values differ among ``tables``, each with its values (sorted)."""
    names = sorted({name for table in tables for name in table})
    values = {n: sorted({str(t.get(n, "absent")) for t in tables}) for n in names}
    return {n: v for n, v in values.items() if len(v) > 1}
