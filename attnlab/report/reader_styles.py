"""Reader names -> order, colour and description, all taken from the reader registry.

The report never names a reader itself: the registry's order (the lab's readers first) fixes
the order of table columns, legends and galleries, and a reader's index in it fixes its
colour, so a reader keeps its colour from one report to the next. Readers the registry does
not know (a plugin not loaded in this process) come after the known ones, by name.
"""

from __future__ import annotations

import colorsys
from collections.abc import Iterable
from types import ModuleType

from matplotlib.colors import to_hex, to_rgb

from attnlab.errors import UserError

UNKNOWN = "?"  # the reader of a run whose config and metrics name none
# Colour i is the colour of the registry's reader i (the first two keep the lab's old colours).
PALETTE = (
    "tab:orange",
    "tab:blue",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
)


def _registry() -> ModuleType | None:
    """The registry module, imported only when needed: it imports torch and reader plugins."""
    try:
        from attnlab.models import registry
    except ImportError:
        return None
    try:
        registry.discover()
    except UserError:  # a broken plugin in ATTNLAB_READERS: the readers that loaded still count
        pass
    return registry


def registered() -> list[str]:
    """The registry's reader names in its order; empty when the registry cannot be loaded."""
    registry = _registry()
    return registry.names() if registry is not None else []


def baseline() -> str | None:
    """The reader every other reader is compared with by default (the registry says which)."""
    registry = _registry()
    return registry.BASELINE if registry is not None else None


def reader_key(reader: str) -> tuple[int, str]:
    """Sort key: registry order first, then unknown readers by name."""
    known = registered()
    return (known.index(reader), "") if reader in known else (len(known), reader)


def ordered(readers: Iterable[str]) -> list[str]:
    return sorted(set(readers), key=reader_key)


def colours(readers: Iterable[str]) -> dict[str, str]:
    """A hex colour per reader: its index in the registry, unknown readers after them."""
    known = registered()
    names = ordered(readers)
    unknown = [r for r in names if r not in known]
    index = {r: known.index(r) if r in known else len(known) + unknown.index(r) for r in names}
    return {r: to_hex(PALETTE[i % len(PALETTE)]) for r, i in index.items()}


def shades(base: str, k: int) -> list[str]:
    """`k` colours of one family: the reader's colour, darker to lighter and a little apart
    in hue, so that each variant of a reader has its own colour and still reads as that
    reader's. One shade is the colour itself."""
    if k <= 1:
        return [to_hex(base)]
    h, light, sat = colorsys.rgb_to_hls(*to_rgb(base))
    out = []
    for i in range(k):
        t = i / (k - 1) - 0.5  # -0.5 .. 0.5
        lightness = min(0.8, max(0.18, light + 0.5 * t))
        hue = (h + 0.08 * t) % 1.0
        out.append(to_hex(colorsys.hls_to_rgb(hue, lightness, min(1.0, sat * 1.05))))
    return out


def description(reader: str) -> str:
    """The registry's one-line description, or why there is none."""
    registry = _registry()
    if registry is None:
        return "no description: the reader registry could not be loaded"
    try:
        return registry.get(reader).description
    except UserError:
        return "not registered in this process (its plugin module is not loaded)"
