"""Swept numbers in short form: ``0.0012345678901234`` -> ``0.00123``.

A learning rate drawn by a sweeper carries 16 digits; shown whole in a variant's label or on
a plot's axis, neighbouring values run into each other. Numbers are shown with
`MIN_DIGITS` significant digits, more only where that is needed to keep two of the values
shown together apart. Integers (a width, a count) are shown as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MIN_DIGITS = 3
MAX_DIGITS = 17  # a float64 is told apart from every other at 17 significant digits


def finite_number(text: str) -> float | None:
    """``text`` as a finite float, or None (not a number, nan, inf)."""
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _is_int(text: str) -> bool:
    return text.lstrip("+-").isdigit()


def short_forms(values: Iterable[str]) -> dict[str, str]:
    """value text -> its short form, for values shown together (one key's values across a
    report, one axis's ticks). Texts that are not numbers, and integers, map to themselves;
    two values that are different numbers never share a short form."""
    texts = list(dict.fromkeys(values))
    numbers = {t: x for t in texts if (x := finite_number(t)) is not None}
    out = {t: t for t in texts}
    if not any(not _is_int(t) for t in numbers):
        return out
    shown: dict[str, str] = {}
    for digits in range(MIN_DIGITS, MAX_DIGITS + 1):
        shown = {t: t if _is_int(t) else f"{x:.{digits}g}" for t, x in numbers.items()}
        by_value = {x: shown[t] for t, x in numbers.items()}
        if len(set(by_value.values())) == len(by_value):  # different numbers stay apart
            break
    for text in numbers:
        out[text] = shown[text] if len(shown[text]) < len(text) else text
    return out


def short_number(x: float, others: Iterable[float]) -> str:
    """One number as `short_forms` shows it among `others` (an axis's tick labels)."""
    texts = [repr(float(v)) for v in (*others, x)]
    return short_forms(texts)[repr(float(x))]
