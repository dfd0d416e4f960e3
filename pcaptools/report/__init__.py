"""The offline HTML report: ``write_report(cap, "report.html")``.

Sections are built by the functions in :data:`SECTIONS` (see :mod:`.html` to add one).
Two captures on one page, the comparison table first: ``write_comparison(a, b, "cmp.html")``.
"""

from __future__ import annotations

from .comparison import render_comparison, write_comparison
from .html import SECTIONS, ReportContext, Section, SectionBuilder, render_report, write_report

__all__ = [
    "SECTIONS",
    "ReportContext",
    "Section",
    "SectionBuilder",
    "render_comparison",
    "render_report",
    "write_comparison",
    "write_report",
]
