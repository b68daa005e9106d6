"""The report's optional sections that the runs look like they want but that cannot be drawn,
each with why, in one line: on the page, in summary.md and on the command line.

Each optional section decides for itself (a ``left_out`` function in its own module:
``datacurve``, ``swept``, ``calibration``, ``explorer``); this module only names the sections
and says their lines the same way everywhere. A section the runs do not ask for (no probe
was run, nothing was swept) is not listed: only one the user would look for.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Omitted:
    section: str  # the section's title, as the page heads it when it is drawn
    why: str  # one sentence: what is missing, and what would draw it

    def line(self) -> str:
        return f'report: section "{self.section}" left out: {self.why}'


def omitted_markdown(omitted: list[Omitted]) -> list[str]:
    """summary.md's lines for the sections left out; none when every wanted one is drawn."""
    if not omitted:
        return []
    lines = ["## Sections left out", ""]
    lines += [f"- {o.section}: {o.why}" for o in omitted]
    return [*lines, ""]
