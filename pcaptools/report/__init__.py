"""The offline HTML report: ``write_report(cap, "report.html")``.

Sections are built by the functions in :data:`SECTIONS` (see :mod:`.html` to add one).
"""

from __future__ import annotations

from .html import SECTIONS, ReportContext, Section, SectionBuilder, render_report, write_report

__all__ = [
    "SECTIONS",
    "ReportContext",
    "Section",
    "SectionBuilder",
    "render_report",
    "write_report",
]
