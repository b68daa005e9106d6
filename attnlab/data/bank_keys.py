"""The data keys that define a glyph bank, torch-free: the bank cache names a bank by their
values (``attnlab.data.bank_cache``), and the report and a run's drawing record
(``attnlab.runs.drawn``) read them without loading torch."""

from __future__ import annotations

# The data keys that define a bank (and nothing else does), in the order of its key: a run's
# glyphs change with one of them, or with the packages that draw them (attnlab.runs.drawn).
BANK_KEYS = (
    "height",
    "fonts",
    "font_sizes",
    "stroke_widths",
    "variants",
    "scale",
    "stretch",
    "shear",
    "rotation",
    "v_offset",
    "blur",
    "marked_zeros",
    "oldstyle",
    "footless_ones",
    "elastic",
    "charset",
)
