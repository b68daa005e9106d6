"""The lab handout's measured figures (docs/lab.md), kept between markers::

    <!-- lab:comparison -->
    ...
    <!-- /lab -->

``read_blocks`` reads them by name, ``write_blocks`` replaces them, ``stale`` names those that
differ from regenerated figures and ``sync`` does one of the three for
``scripts/lab_figures.py`` (print, ``--write``, ``--check``). Pure text: no runs are read here
(attnlab.maintain.labfigures computes the figures)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from attnlab.io import atomic_write

MARKER = re.compile(r"<!-- lab:(?P<name>[a-z_]+) -->\n(?P<body>.*?)<!-- /lab -->", re.DOTALL)


def read_blocks(text: str) -> dict[str, str]:
    """Each ``<!-- lab:NAME -->`` block's body (without the markers), by name; a name used
    twice, or a marker left open, is an error."""
    blocks: dict[str, str] = {}
    for m in MARKER.finditer(text):
        if m["name"] in blocks:
            raise ValueError(f"lab:{m['name']}: marker used twice")
        if "<!-- lab:" in m["body"]:
            raise ValueError(f"lab:{m['name']}: no <!-- /lab --> before the next marker")
        blocks[m["name"]] = m["body"]
    opened = re.findall(r"<!-- lab:([a-z_]+) -->", text)
    missing = [name for name in opened if name not in blocks]
    if missing:
        raise ValueError(f"lab:{missing[0]}: marker without <!-- /lab -->")
    return blocks


def write_blocks(text: str, figures: dict[str, str]) -> str:
    """``text`` with each named block's body replaced by ``figures[name]`` (ending in a newline);
    blocks not in ``figures`` are kept; a figure without a block is an error."""
    absent = sorted(set(figures) - set(read_blocks(text)))
    if absent:
        raise ValueError(f"no <!-- lab:{absent[0]} --> block in the handout")

    def body(m: re.Match) -> str:
        new = figures.get(m["name"])
        new = m["body"] if new is None else new.rstrip("\n") + "\n"
        return f"<!-- lab:{m['name']} -->\n{new}<!-- /lab -->"

    return MARKER.sub(body, text)


def stale(text: str, figures: dict[str, str]) -> list[str]:
    """The names of the figures whose block differs from the regenerated figure."""
    blocks = read_blocks(text)
    return [
        name
        for name, fig in figures.items()
        if blocks.get(name, "").rstrip("\n") != fig.rstrip("\n")
    ]


def sync(doc: Path, figs: dict[str, str], write: bool, check: bool) -> int:
    """``check``: 1 (each stale figure named on stderr) or 0; ``write``: the figures written
    into ``doc`` whole; otherwise printed."""
    text = doc.read_text(encoding="utf-8")
    if check:
        bad = stale(text, figs)
        for name in bad:
            print(f"lab:{name}: {doc}'s figure differs from the runs'", file=sys.stderr)
        return 1 if bad else 0
    for name, fig in figs.items():
        print(f"<!-- lab:{name} -->\n{fig}\n<!-- /lab -->")
    if write:
        new = write_blocks(text, figs)
        atomic_write(doc, lambda tmp: tmp.write_text(new, encoding="utf-8"))
    return 0
