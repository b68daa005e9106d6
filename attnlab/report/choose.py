"""A variant named on the command line (``attnlab report --compare A B``) -> its label.

Accepted: the label exactly as the report prints it (``fixed · model.hidden=64``) or as the
sweep prints it (``train 1-8 · fixed · model.hidden=64: 2 seeds (0, 1)``), or a short form
that matches one variant: its reader, ``key=value`` (a number as printed or in full), or
several of them (``fixed model.hidden=64``). An ambiguous or unknown form is refused in one
line listing the labels it could mean.
"""

from __future__ import annotations

import re

from attnlab.report.same_strips import CompareRefused
from attnlab.report.variants import SEP


def parse_choice(name: str) -> tuple[str | None, str]:
    """A variant as the sweep and the report print it -> (training range or None, the rest):
    ``train 1-8 · fixed · model.hidden=64: 2 seeds (0, 1)`` -> ("1-8", "fixed · model...")."""
    text = re.sub(r":\s*\d+ seeds?\b.*$", "", name.strip())
    m = re.match(r"train\s+(\S+)\s*·\s*(.*)$", text)
    return (m.group(1), m.group(2).strip()) if m else (None, text)


def _same_value(typed: str, shown: str) -> bool:
    """A typed value names a label's value: the same text, the same number, or a number
    that rounds to the label's short form (report.short_numbers)."""
    if typed == shown:
        return True
    try:
        x, y = float(typed), float(shown)
    except ValueError:
        return False
    if x == y:
        return True
    digits = next((d for d in range(1, 18) if float(f"{y:.{d}g}") == y), 17)
    return f"{x:.{digits}g}" == f"{y:.{digits}g}"


def _matches(tokens: list[str], label: str) -> bool:
    reader, _, rest = label.partition(SEP)
    keys = dict(part.split("=", 1) for part in rest.split(", ") if "=" in part)
    for token in tokens:
        key, eq, value = token.partition("=")
        if eq and not (key in keys and _same_value(value, keys[key])):
            return False
        if not eq and token != reader:
            return False
    return bool(tokens)


def resolve(name: str, labels: list[str]) -> str:
    """A variant named on the command line: its label as the report or the sweep prints it
    (``train 1-8 · fixed · model.hidden=64``), or a short form that matches one variant:
    a reader, ``key=value`` (a number as printed or in full), or several of them."""
    _, text = parse_choice(name)
    if text in labels:
        return text
    tokens = [t for t in re.split(r"\s*·\s*|,\s*|\s+", text) if t]
    found = [v for v in labels if _matches(tokens, v)]
    if len(found) == 1:
        return found[0]
    if found:
        raise CompareRefused(
            f"--compare {name!r} could mean {len(found)} variants: {'; '.join(found)} "
            "(add the reader or another key=value)"
        )
    raise CompareRefused(
        f"--compare {name!r}: no such variant; the variants are: {'; '.join(labels) or 'none'}"
    )
