"""CSV text as attnlab writes it (``attnlab.io`` writes it whole): text stays text.

Digit strings keep their leading zeros in every file: a reader that honours quotes keeps a
quoted "0026" as text, and attnlab's own readers read text columns as text.
"""

from __future__ import annotations

import csv
import io
from typing import Any


def csv_text(frame: Any) -> str:
    """A DataFrame as CSV with every text value quoted (numbers and booleans bare), so that a
    reader that honours quotes keeps "0026" as text; attnlab's own readers also read text
    columns with ``dtype=str`` (pandas infers types through quotes). Booleans are quoted
    too: a quote-honouring reader would take a bare ``False`` for a number."""
    flags = {c: frame[c].map(str) for c in frame.columns if frame[c].dtype == bool}
    return frame.assign(**flags).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def csv_rows(header: list[str], rows: list[list[str]]) -> str:
    """A CSV of text rows (labels.csv), quoted only where a value needs it: an exchange
    format that other tools, and a shell's ``tr ',' '\\t'``, read as plain ``name,label``
    lines; labels stay text for attnlab's own reader (the csv module)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()
