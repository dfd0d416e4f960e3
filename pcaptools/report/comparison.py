"""One HTML page comparing two captures: ``pcap-report A.pcapng --compare B.pcapng``.

The page starts with the comparison table (:func:`pcaptools.analyses.compare.compare`: one row
per metric, both values, the change and which capture did better), then shows every section
of each capture's own report, A first, with ids prefixed ``a-`` and ``b-`` so both fit on one
page (one self-contained file, plotly.js inlined once).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from .. import __version__
from .._safewrite import inputs_of, refuse_inputs
from .._safewrite import write_text as safe_write_text
from ..analyses.compare import compare_latency
from ..analyses.summary import fmt_ms
from .html import (
    MAX_TABLE_ROWS,
    MAX_TIMELINE_BARS,
    Section,
    SectionBuilder,
    _env,
    _plotly_js,
    build_sections,
    subset_info,
)

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = ["comparison_rows", "render_comparison", "write_comparison"]


@dataclass(frozen=True, slots=True)
class _Group:
    anchor: str
    heading: str
    sections: list[Section]


def render_comparison(
    a: Capture,
    b: Capture,
    *,
    labels: tuple[str, str] = ("A", "B"),
    title: str | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_timeline_bars: int = MAX_TIMELINE_BARS,
    sections: list[SectionBuilder] | None = None,
) -> str:
    """The comparison page of ``a`` and ``b`` as one HTML document (str)."""
    env = _env()
    built_a, ctx_a = build_sections(
        a,
        sections=sections,
        max_table_rows=max_table_rows,
        max_timeline_bars=max_timeline_bars,
        id_prefix="a-",
    )
    built_b, ctx_b = build_sections(
        b,
        sections=sections,
        max_table_rows=max_table_rows,
        max_timeline_bars=max_timeline_bars,
        id_prefix="b-",
    )
    cmp = compare_latency(a, b, ctx_a.latency(), ctx_b.latency())
    la, lb = labels
    rows = comparison_rows(cmp, labels)
    table = ctx_a.table(["metric", la, lb, "change", "better"], rows, numeric=(1, 2, 3))
    file_a, file_b = ctx_a.head["file"], ctx_b.head["file"]
    note = (
        f"{la} is {file_a}, {lb} is {file_b}. Each metric is computed the same way from both "
        "captures (pcaptools.analyses.compare.compare(a, b)); 'better' is the lower value, "
        "except for connection reuse where higher is better; times within 2% of each other are "
        "'same'. Each capture's full report follows."
    )
    groups = [
        _Group("a", f"{la}: {file_a}", built_a),
        _Group("b", f"{lb}: {file_b}", built_b),
    ]
    return env.get_template("compare.html.j2").render(
        title=title or f"{file_a} vs {file_b}: pcap-report",
        head=ctx_a.head,
        head_b=ctx_b.head,
        label_a=la,
        label_b=lb,
        sections=[],
        subset=None,
        subset_a=subset_info(a),
        subset_b=subset_info(b),
        groups=groups,
        comparison=table,
        comparison_note=note,
        plotly_js=_plotly_js() if ctx_a.figures or ctx_b.figures else None,
        version=__version__,
    )


def write_comparison(
    a: Capture,
    b: Capture,
    path: str | os.PathLike[str],
    *,
    labels: tuple[str, str] = ("A", "B"),
    title: str | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
) -> None:
    """Write :func:`render_comparison` to ``path`` (UTF-8), atomically. Raises OSError if it
    cannot, :class:`~pcaptools.errors.OutputPathError` (nothing written) if ``path`` is one
    of the two capture files or a key log they were loaded from."""
    refuse_inputs(path, inputs_of(a.summary, b.summary))
    text = render_comparison(a, b, labels=labels, title=title, max_table_rows=max_table_rows)
    safe_write_text(path, text)


def comparison_rows(cmp: pd.DataFrame, labels: tuple[str, str] = ("A", "B")) -> list[list[str]]:
    """The comparison table as text cells: metric, value A, value B, change, better
    (``"A"``, ``"B"``, ``"same"`` or ``""``). Also what the README table is made from."""
    out = []
    for r in cmp.to_dict("records"):
        unit = str(r["unit"])
        a, b = float(r["a"]), float(r["b"])
        better = r["better"]
        who = (
            ""
            if better is None or pd.isna(better)
            else ("same" if better == "same" else labels[0] if better == "a" else labels[1])
        )
        out.append([str(r["label"]), _value(a, unit), _value(b, unit), _change(a, b, unit), who])
    return out


def _value(v: float, unit: str) -> str:
    if math.isnan(v):
        return "n/a"
    if unit == "ms":
        return fmt_ms(v)
    if unit == "share":
        return f"{100 * v:.0f}%"
    if unit == "ratio":
        return f"{v:.3f}"
    if unit == "bytes":
        return f"{v:,.0f} B"
    return f"{v:,.0f}"


def _change(a: float, b: float, unit: str) -> str:
    if math.isnan(a) or math.isnan(b):
        return ""
    d = b - a
    if d == 0:
        return "no change"
    if unit == "share":
        text = f"{100 * d:+.0f} points"
    elif unit == "ms":
        text = ("+" if d >= 0 else "-") + fmt_ms(abs(d))
    elif unit == "ratio":
        text = f"{d:+.3f}"
    else:
        text = f"{d:+,.0f}"
    if a and unit != "share" and round(100 * d / a) != 0:
        text += f" ({100 * d / a:+.0f}%)"
    return text
