"""The section a report draws for a technique from its result alone: `ReportSection`.

A technique's folder returns one from the function its declaration names
(`Technique.section_path`); the site draws it as a folded section (its finding on the fold,
its rows as a table of figures, its notes below). Techniques with a page part of their own
in the site (charts, side-by-side outputs) draw that instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReportSection:
    finding: str  # the one line the folded section opens with
    rows: list[tuple[str, str]] = field(default_factory=list)  # (what, the figure with its unit)
    notes: list[str] = field(default_factory=list)  # sentences under the table
