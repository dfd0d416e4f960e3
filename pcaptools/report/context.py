"""What a section module outside :mod:`.html` needs of the report, without importing it.

:mod:`.html` lists the sections and :mod:`.checklist` the questions; a section kept in a
module of its own (:mod:`.quic_section`, :mod:`.voice_section`) is imported by them, so it
cannot import them back (the import graph has no cycles). It reads the report through
:class:`SectionContext` (what :class:`.html.ReportContext` provides) and returns the parts of
its section (body and note) or of its checklist line (:class:`CheckParts`), which
:mod:`.html` and :mod:`.checklist` wrap in their own types.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
from markupsafe import Markup

from ..analyses.summary import fmt_ms

if TYPE_CHECKING:
    from ..capture import Capture
    from . import charts

__all__ = ["CheckContext", "CheckParts", "SectionContext", "cached", "handshake_phrase",
           "lines", "opt_float", "records",
           "store", "text"]


class CheckContext(Protocol):
    """What a checklist line needs (the checklist's own context has these)."""

    cap: Capture

    def latency(self) -> pd.DataFrame: ...
    def disconnects(self) -> pd.DataFrame: ...


class SectionContext(CheckContext, Protocol):
    """What a section needs of :class:`.html.ReportContext`: the capture, the analyses it
    computes once per report, the time origin, and the rendering helpers (every capture string
    escaped by them)."""

    t0_ns: int
    max_table_rows: int

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]], *,
              numeric: Iterable[int] = (), mono: Iterable[int] = (), wrap: Iterable[int] = (),
              total: int | None = None, source: str | None = None) -> Markup: ...
    def items(self, items: Iterable[Any], *, css: str = "") -> Markup: ...
    def figure(self, fig: charts.Figure, fig_id: str) -> Markup: ...
    @staticmethod
    def code(text: str) -> Markup: ...


@dataclass(frozen=True, slots=True)
class CheckParts:
    """A checklist line (:class:`.checklist.Check` without its key, label and section)."""

    status: str
    text: str
    worst: str | None = None
    filter: str | None = None


def cached(ctx: object, key: str) -> tuple[bool, Any]:
    """``(found, value)`` of ``key`` in the report's per-report cache (``ctx._cache``, when the
    context has one)."""
    cache = getattr(ctx, "_cache", None)
    if isinstance(cache, dict) and key in cache:
        return True, cache[key]
    return False, None


def store(ctx: object, key: str, value: Any) -> None:
    """Keep ``value`` in the report's per-report cache (when the context has one)."""
    cache = getattr(ctx, "_cache", None)
    if isinstance(cache, dict):
        cache[key] = value


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of Python values (NA stays pd.NA), column by column."""
    cols = [str(c) for c in df.columns]
    values = [df.iloc[:, i].tolist() for i in range(len(cols))]
    return [dict(zip(cols, row, strict=True)) for row in zip(*values, strict=True)]


def text(v: Any) -> str:
    """str(v), or "" for None / NA / NaN."""
    return "" if v is None or pd.isna(v) else str(v)


def opt_float(v: Any) -> float | None:
    """float(v), or None for None / NA / NaN."""
    return None if v is None or pd.isna(v) else float(v)


def lines(*cells: Any) -> Markup:
    """One table cell holding several related values, one a line (each escaped, joined by
    ``<br>``): the report's wide tables fit a 1400 px window this way (#19)."""
    return Markup("<br>").join(cells)


def handshake_phrase(hs: pd.Series) -> str:
    """The checklist's handshake clause over the handshake times ``hs`` (ms, NaN dropped):
    ", handshake X" for one, ", handshake median X (max Y)" for several, "" for none."""
    if len(hs) == 1:
        return f", handshake {fmt_ms(float(hs.iloc[0]))}"
    if len(hs):
        return f", handshake median {fmt_ms(float(hs.median()))} (max {fmt_ms(float(hs.max()))})"
    return ""
