"""The self-contained HTML report: one file, opens offline, no external URL.

The page is a list of sections. Each section comes from a *builder*, a function
``(ReportContext) -> Section`` in :data:`SECTIONS`; adding a section (TLS, HTTP/2,
WebSocket...) means writing one builder and appending it. A builder returns
``Section(id, title, html, note)``: ``html`` is the body (a :class:`markupsafe.Markup`
made with the context's helpers) or ``None`` when there is no data, in which case the
page shows ``note`` as the one line that says so. A builder may also return ``None`` instead
of a Section: the section does not apply to this capture and is left out of the page (the
QUIC / HTTP/3 and realtime voice sections, which live in :mod:`.quic_section` and
:mod:`.voice_section` and read the report through :mod:`.context`).

Escaping: the page is rendered by jinja2 with ``autoescape=True``; the helpers
(:meth:`ReportContext.table`, :meth:`~ReportContext.pairs`, :meth:`~ReportContext.items`)
render through the same environment, so every string from the capture is escaped exactly
once. Figures (:class:`.charts.Figure`: plain plotly.js traces and layout) are embedded as a
``Plotly.newPlot`` call whose JSON has ``<``, ``>`` and ``&`` written as \\u escapes, and
plotly.js is inlined once per page: the *basic* partial bundle of plotly.js (bar, scatter and
pie traces, 1.2 MB instead of the full 4.8 MB; ``vendor/plotly-basic.min.js``, MIT licence
beside it), the same plotly.js version as the plotly Python package this release was tested
with. A page without figures carries no plotly.js.

Tables: every row (up to :data:`MAX_TABLE_ROWS`, then the table says how many were left out)
is in the page. A table of more than one page is paged by a small inlined script
(``templates/_tables.js.j2``: page navigation, rows per page, a filter box; no library, no
network): its first page is HTML, all its rows are JSON in a ``<script type="application/json">``
block with ``<``, ``>`` and ``&`` escaped, and the script writes capture strings with
``textContent`` only (see :meth:`ReportContext.table`).
"""

from __future__ import annotations

import functools
import html
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from .. import __version__
from .._memory import large_blocks_mapped, trim
from .._safewrite import inputs_of, refuse_inputs
from .._safewrite import write_text as safe_write_text
from ..analyses.coverage import DONE as COVERED
from ..analyses.coverage import coverage_summary
from ..analyses.disconnects import disconnects
from ..analyses.heartbeats import heartbeat_summary, heartbeats
from ..analyses.latency import stream_latency
from ..analyses.overhead import CATEGORIES, QUIC_CATEGORIES, overhead
from ..analyses.summary import fmt_ms, headline, tls_decrypt_sentences
from ..diagnostics import CATALOGUE
from ..io.linktypes import LINKTYPE_LABELS
from ..tcp.analysis import KIND_NAMES
from . import charts
from . import slow_section as _slow
from .checklist import STATUSES, checklist
from .context import lines
from .quic_section import quic_parts
from .voice_section import voice_parts

if TYPE_CHECKING:
    from ..capture import Capture

__all__ = [
    "SECTIONS",
    "ReportContext",
    "Section",
    "SectionBuilder",
    "build_sections",
    "render_report",
    "write_report",
]

#: rows of one table embedded in the page; beyond, the table says "showing first N of M rows"
#: (pcap-report --max-table-rows). Every row up to it is in the page, paged by its script.
#: ~135-175 bytes of HTML a row: with a million connections (a port scan) the two tables of
#: one row per connection (connections, disconnects) make ~16 MB of the page at this bound
#: (62 MB at the 200,000 it was); the DataFrames and --export have every row.
MAX_TABLE_ROWS = 50_000
#: rows per page of a table when the report opens (the reader can change it)
PAGE_ROWS = 50
#: tables with more rows than this get a filter box and page navigation
PAGED_MIN_ROWS = 10
#: connections drawn in the timeline before it downsamples
MAX_TIMELINE_BARS = 2000
#: connections drawn in the heartbeat timeline (those with unanswered pings first)
MAX_HEARTBEAT_CONNECTIONS = 40
#: connections drawn in the overhead chart (largest by wire bytes), besides the total bar
MAX_OVERHEAD_BARS = 30
#: QUIC connections in the Overhead section's table (one column each; the chart has more)
MAX_QUIC_OVERHEAD_COLUMNS = 5

Cell = str | int | float | Markup | None


@dataclass(frozen=True, slots=True)
class Section:
    """One section of the report."""

    id: str
    """HTML id (anchor), e.g. ``"connections"``"""
    title: str
    html: Markup | None
    """the body; None when the capture has no data for this section"""
    note: str | None = None
    """one line under the title (what is shown, what was left out), or the no-data line"""


@dataclass(slots=True)
class ReportContext:
    """What section builders get: the capture, its headline numbers, time origin and
    rendering helpers."""

    cap: Capture
    head: dict[str, Any]
    t0_ns: int
    """time of the first packet; x axes are seconds since it"""
    span_s: float
    """duration of the capture in seconds"""
    max_table_rows: int = MAX_TABLE_ROWS
    max_timeline_bars: int = MAX_TIMELINE_BARS
    page_rows: int = PAGE_ROWS
    """rows per page of the paged tables when the page opens"""
    figures: int = 0
    """figures embedded so far (plotly.js is inlined only when there is at least one)"""
    _parts: Any = field(default=None, repr=False)
    id_prefix: str = ""
    """prefix of figure ids (a page showing two captures gives each its own)"""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def disconnects(self) -> pd.DataFrame:
        """``analyses.disconnects(cap)``, computed once per report."""
        if "disconnects" not in self._cache:
            self._cache["disconnects"] = disconnects(self.cap)
        df: pd.DataFrame = self._cache["disconnects"]
        return df

    def quic_disconnects(self) -> pd.DataFrame | None:
        """``analyses.disconnects(cap, quic=True, tcp=False)``: the QUIC rows, with the
        ``quic_*`` counts in ``attrs`` (the TCP rules are not run again), computed once per
        report; None without QUIC connections."""
        if "quic_disconnects" not in self._cache:
            d: pd.DataFrame | None = None
            if len(self.cap.quic_connections):
                d = disconnects(self.cap, quic=True, tcp=False)
            self._cache["quic_disconnects"] = d
        out: pd.DataFrame | None = self._cache["quic_disconnects"]
        return out

    def heartbeats(self) -> pd.DataFrame:
        """``analyses.heartbeats.heartbeats(...)`` over WebSocket, HTTP/2 and TCP keep-alive,
        computed once per report."""
        if "heartbeats" not in self._cache:
            c = self.cap
            self._cache["heartbeats"] = heartbeats(
                c.ws_frames, c.http2_frames, c.tcp_events, connections=c.connections
            )
        df: pd.DataFrame = self._cache["heartbeats"]
        return df

    def heartbeat_summary(self) -> pd.DataFrame:
        """``heartbeat_summary(...)`` of :meth:`heartbeats` (idle WebSocket and HTTP/2
        connections included), computed once per report."""
        if "heartbeat_summary" not in self._cache:
            c = self.cap
            self._cache["heartbeat_summary"] = heartbeat_summary(
                self.heartbeats(), connections=c.connections, packets=c.packets,
                capture_end=c.summary.last_ts_ns,
                ws_connections=c.ws_connections, http2_connections=c.http2_connections,
            )
        df: pd.DataFrame = self._cache["heartbeat_summary"]
        return df

    def overhead(self) -> pd.DataFrame:
        """``analyses.overhead(cap)``, computed once per report."""
        if "overhead" not in self._cache:
            self._cache["overhead"] = overhead(self.cap)
        df: pd.DataFrame = self._cache["overhead"]
        return df

    def quic_overhead(self) -> pd.DataFrame | None:
        """The QUIC connections' rows of ``analyses.overhead(cap, quic=True, tcp=False)``
        (its total row left out), computed once per report; None without QUIC connections."""
        if "quic_overhead" not in self._cache:
            o: pd.DataFrame | None = None
            if len(self.cap.quic_connections):
                full = overhead(self.cap, quic=True, tcp=False)
                o = full[(full["transport"] == "quic").to_numpy(bool)].reset_index(drop=True)
            self._cache["quic_overhead"] = o
        out: pd.DataFrame | None = self._cache["quic_overhead"]
        return out

    def latency(self) -> pd.DataFrame:
        """``stream_latency(cap)``, computed once per report."""
        if "latency" not in self._cache:
            self._cache["latency"] = stream_latency(self.cap)
        lat: pd.DataFrame = self._cache["latency"]
        return lat

    # -- helpers for builders --------------------------------------------------------------
    def table(
        self,
        headers: Sequence[str],
        rows: Iterable[Sequence[Cell]],
        *,
        numeric: Iterable[int] = (),
        mono: Iterable[int] = (),
        wrap: Iterable[int] = (),
        total: int | None = None,
        source: str | None = None,
    ) -> Markup:
        """An HTML table. Column indexes: ``numeric`` right-aligned, ``mono`` monospaced,
        ``wrap`` may wrap (free text; other cells stay on one line). Cells are escaped unless
        they are :class:`Markup`; ints get thousands separators.

        Tables of more than :data:`PAGED_MIN_ROWS` rows (or of more than one page) are
        paged: the first page is HTML,
        every row is also in a ``<script type="application/json">`` block (``<``, ``>`` and
        ``&`` escaped, so no capture string can end it) that the page's script pages and
        filters (text cells are set with ``textContent``; only :class:`Markup` cells, escaped
        when they were made, are parsed as HTML). ``total``: rows the table would have without
        the :attr:`max_table_rows` ceiling (the rows given are its first rows); when larger than
        the rows given, the table says so, naming ``source`` (e.g. ``"cap.connections"``)."""
        cells = [[_cell(c) for c in r] for r in rows]
        numeric, mono, wrap = set(numeric), set(mono), set(wrap)
        n = len(cells)
        cut_note = None
        if total is not None and total > n:
            where = f"the DataFrame {source}" if source else "the DataFrame"
            cut_note = (
                f"Showing first {n:,} of {total:,} rows; use {where} or "
                "pcap-report --export for all (--max-table-rows sets this limit)."
            )
        data = None
        first = cells
        if n > min(PAGED_MIN_ROWS, self.page_rows):
            first = cells[: max(1, self.page_rows)]
            css = [
                "num" if i in numeric else "mono" if i in mono else "wrap" if i in wrap else ""
                for i in range(len(headers))
            ]
            data = _json_block({"cls": css, "rows": [[_json_cell(c) for c in r] for r in cells]})
        return Markup(
            self._parts.table(
                list(headers), first, numeric, mono, wrap,
                data=data, total=n, page_rows=max(1, self.page_rows), cut_note=cut_note,
            )
        )

    def pairs(self, pairs: Iterable[tuple[str, Cell]]) -> Markup:
        """A two-column key/value table."""
        return Markup(self._parts.pairs([(k, _cell(v)) for k, v in pairs]))

    def items(self, items: Iterable[Cell], *, css: str = "") -> Markup:
        """A bulleted list."""
        return Markup(self._parts.items([_cell(i) for i in items], css))

    def figure(self, fig: charts.Figure, fig_id: str) -> Markup:
        """Embed a figure: its div and the ``Plotly.newPlot`` call that draws it (no
        plotly.js: the page inlines it once)."""
        self.figures += 1
        div = f"fig-{self.id_prefix}{fig_id}"
        d = fig.to_dict()
        height = d["layout"].get("height")
        style = f"height:{int(height)}px; width:100%;" if height else "width:100%;"
        args = ", ".join(_js_value(x) for x in (div, d["data"], d["layout"], _FIG_CONFIG))
        return Markup(
            '<div id="{}" class="plotly-graph-div" style="{}"></div>\n'
            "<script>if (window.Plotly) {{ Plotly.newPlot({}); }}</script>"
        ).format(div, style, Markup(args))

    @staticmethod
    def code(text: str) -> Markup:
        """``text`` as click-to-select code (e.g. a Wireshark display filter)."""
        return Markup('<code class="filter">{}</code>').format(text)


SectionBuilder = Callable[[ReportContext], Section | None]
"""A section builder; None: the section does not apply to this capture and is left out of
the page (the QUIC and voice sections of a capture without QUIC or realtime events)."""


# -- the sections ---------------------------------------------------------------------------------


def verdicts_section(ctx: ReportContext) -> Section:
    """The checklist (:func:`.checklist.checklist`): one line per question, linked to the
    section that backs it, naming the worst request or connection with its filter."""
    lines = [
        {
            "status": c.status,
            "mark": STATUSES[c.status][0],
            "title": STATUSES[c.status][1],
            "label": c.label,
            "text": c.text,
            "href": ctx.id_prefix + c.section,
            "worst": c.worst,
            "filter": c.filter,
        }
        for c in checklist(ctx)
    ]
    note = ("One line per question; \u2713 fine, ! look at this, \u2717 problem, \u00b7 a "
            "fact, \u2013 not in this capture. Each line links to its section; a filter "
            "selects the request or connection named.")
    return Section("verdicts", "Verdicts", Markup(ctx._parts.checklist(lines)), note)


def capture_section(ctx: ReportContext) -> Section:
    h, s = ctx.head, ctx.cap.summary
    fmt = h["format"] + (f", {h['compression']}-compressed" if h["compression"] else "")
    lt = ", ".join(f"{LINKTYPE_LABELS.get(x, 'link type')} ({x})" for x in h["linktypes"]) or "-"
    frames = (
        f"{h['frames']:,} ({h['tcp_frames']:,} TCP, {h['udp_frames']:,} UDP, "
        f"{h['other_ip_frames']:,} other IP, {h['non_ip_frames']:,} not IP)"
    )
    irtt = h["irtt_ms"]
    hs = (
        f"{h['handshakes_captured']:,} captured: {h['handshakes_established']:,} established, "
        f"{h['refused']:,} refused, {h['no_answer']:,} unanswered"
    )
    rows: list[tuple[str, Cell]] = [
        ("File", h["file"]),
        ("Path", s.path),
    ]
    sub = subset_info(ctx.cap)
    if sub is not None:
        rows.append((
            "Subset",
            f"{sub['text']}: {h['frames']:,} of {sub['of_frames']:,} frames, "
            f"{h['tcp_connections']:,} TCP connections",
        ))
    rows += [
        ("Format", fmt),
        ("File size", f"{h['file_size']:,} bytes"),
        ("Link types", lt),
        ("First packet" if sub is None else "Observed from", _ts_text(h["first_ts"])),
        ("Last packet" if sub is None else "Observed to", _ts_text(h["last_ts"])),
        ("Duration", f"{h['duration_s']:.6f} s"),
        ("Frames", frames),
        ("Bytes on the wire", f"{h['wire_bytes']:,}"),
        ("TCP connections", f"{h['tcp_connections']:,}"),
        ("TCP handshakes", hs),
    ]
    if irtt["count"]:
        rows.append(
            (
                "Handshake iRTT",
                f"median {fmt_ms(irtt['median'])}, "
                f"p95 {fmt_ms(irtt['p95'])}, max {fmt_ms(irtt['max'])}",
            )
        )
    rs = h["retransmitted_segments"]
    ds = h["data_segments"]
    rows.append(
        (
            "Segments lost and resent",
            f"{h['lost_segments']:,} ({h['lost_before_capture']:,} lost before the capture "
            f"point, {h['lost_after_capture']:,} after it; {h['spurious_resends']:,} spurious "
            "resends)",
        )
    )
    if h["capture_drop_bytes"]:
        rows.append(("Missed by the capture", f"{h['capture_drop_bytes']:,} bytes"))
    rows.append(
        (
            "Retransmitted segments (tshark flags)",
            f"{rs:,}"
            + (f" ({h['retransmitted_data_segments']:,} of {ds:,} data segments)" if ds else ""),
        )
    )
    rows.append(("Payload bytes (resent)", f"{h['payload_bytes']:,} ({h['resent_bytes']:,})"))
    if h["tls_secrets"]:
        rows.append(("TLS secrets in the file", f"{h['tls_secrets']:,}"))
    rows.append(("Warnings", f"{h['warnings']:,}"))
    return Section("capture", "Capture", ctx.pairs(rows))


def connections_section(ctx: ReportContext) -> Section:
    conns = ctx.cap.connections
    n = len(conns)
    if n == 0:
        return Section(
            "connections", "TCP connections", None, "No TCP connections in this capture."
        )
    shown = conns.sort_values("tcp_stream").head(ctx.max_table_rows)
    rows: list[list[Cell]] = []
    for r in _records(shown):
        rows.append(
            [
                int(r["tcp_stream"]),
                ctx.code(f"tcp.stream eq {int(r['tcp_stream'])}"),
                lines(charts.endpoint(r["client_addr"], int(r["client_port"]))
                      + (" (guessed)" if r["client_inferred"] else ""),
                      charts.endpoint(r["server_addr"], int(r["server_port"]))),
                _text(r["conn_state"]),
                _text(r["history"]),
                _end_text(r["end_reason"], r["end_by"], r["end_frame"]),
                f"{r['duration_ms']:,.1f}",
                f"{int(r['client_packets']):,} / {int(r['server_packets']):,}",
                f"{int(r['client_bytes']):,} / {int(r['server_bytes']):,}",
                int(r["retransmissions"]),
            ]
        )
    note = f"{n:,} connections."
    note += " Client is the SYN sender; the history letters are Zeek's (client upper case)."
    table = ctx.table(
        [
            "tcp.stream",
            "Wireshark filter",
            "client / server",
            "state",
            "history",
            "end",
            "duration ms",
            "packets c→s / s→c",
            "payload bytes c→s / s→c",
            "retrans.",
        ],
        rows,
        numeric=(0, 6, 7, 8, 9),
        mono=(2, 4),
        total=n,
        source="cap.connections",
    )
    return Section("connections", "TCP connections", table, note)


def timeline_section(ctx: ReportContext) -> Section:
    title = "Connections timeline"
    conns = ctx.cap.connections
    if len(conns) == 0:
        return Section("timeline", title, None, "No TCP connections to draw.")
    tl = charts.timeline_rows(conns, ctx.max_timeline_bars)
    fig = charts.timeline_figure(tl, ctx.t0_ns, ctx.span_s)
    assert fig is not None
    note = "One bar per connection from its first to its last packet, coloured by conn_state."
    if tl.downsampled:
        note += (
            f" Showing {len(tl.rows):,} of {tl.total:,} connections: those not in state SF "
            "first, then the longest."
        )
    return Section("timeline", title, ctx.figure(fig, "timeline"), note)


def irtt_section(ctx: ReportContext) -> Section:
    title = "TCP handshake RTT"
    irtt = ctx.head["irtt_ms"]
    if not irtt["count"]:
        return Section(
            "irtt", title, None, "No complete TCP handshake (SYN, SYN-ACK, ACK) in this capture."
        )
    fig = charts.irtt_figure(ctx.cap.tcp_handshakes["irtt_ms"])
    assert fig is not None
    note = (
        f"{irtt['count']:,} connection{'' if irtt['count'] == 1 else 's'} with tshark's "
        "tcp.analysis.initial_rtt "
        f"(first SYN to the ACK that completes the handshake, or to the RST that refuses it): "
        f"median {fmt_ms(irtt['median'])}, p95 {fmt_ms(irtt['p95'])}, "
        f"max {fmt_ms(irtt['max'])}."
    )
    return Section("irtt", title, ctx.figure(fig, "irtt"), note)


_LOSS_LABEL = {"before_capture": "lost before capture", "after_capture": "lost after capture"}


def retransmissions_section(ctx: ReportContext) -> Section:
    title = "Retransmissions over time"
    rt = ctx.cap.retransmissions
    lo = ctx.cap.tcp_losses
    kind = lo["kind"].astype("string")
    resent = lo[kind.isin(["loss", "spurious"]).fillna(False).to_numpy()]
    h = ctx.head
    if len(rt) == 0 and len(resent) == 0:
        return Section("retransmissions", title, None, "No retransmitted segments in this capture.")
    width = charts.bin_width_s(ctx.span_s)
    kinds = h["retransmissions_by_kind"]
    detail = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in kinds.items())
    tshark = f"{len(rt):,} segments tshark flags tcp.analysis.retransmission" + (
        f" ({detail})" if detail else "")
    if len(resent) == 0:  # tshark flags, nothing resent that tcp_losses saw
        bins = charts.retransmission_bins(rt, ctx.t0_ns, width)
        fig = charts.retransmissions_figure(bins, width, ctx.span_s)
        assert fig is not None
        note = f"{tshark}, per {charts.unit_label(width)}."
        return Section("retransmissions", title, ctx.figure(fig, "retransmissions"), note)
    labels = [
        "spurious resend" if k == "spurious" else _LOSS_LABEL.get(str(w), "lost")
        for k, w in zip(resent["kind"].astype(str), resent["lost_where"].astype(object),
                        strict=True)
    ]
    bins = charts.retransmission_bins(
        pd.DataFrame({"ts": resent["ts"].to_numpy(), "kind": labels}), ctx.t0_ns, width
    )
    fig = charts.retransmissions_figure(bins, width, ctx.span_s)
    assert fig is not None
    shown = resent.head(ctx.max_table_rows)
    rows: list[list[Cell]] = [
        [
            int(r["tcp_stream"]),
            _text(r["direction"]),
            _text(r["kind"]),
            int(r["seq"]),
            int(r["len"]),
            _text(r["first_frame"]),
            _text(r["frame"]),
            _text(r["gap_frame"]),
            _text(r["lost_where"]),
            _text(r["recovery"]),
            "" if pd.isna(r["recovery_ms"]) else f"{r['recovery_ms']:,.1f}",
            _text(r["tshark_kind"]),
        ]
        for r in _records(shown)
    ]
    table = ctx.table(
        ["tcp.stream", "direction", "kind", "seq", "len", "first copy", "resend",
         "gap seen at", "lost", "recovery", "recovery ms", "tshark flag"],
        rows,
        numeric=(0, 3, 4, 5, 6, 7, 10),
        total=len(resent),
        source="cap.tcp_losses",
    )
    note = (
        f"Segments lost and resent: {h['lost_segments']:,} ({h['lost_before_capture']:,} lost "
        f"before the capture point, seen as a gap that the resend filled; "
        f"{h['lost_after_capture']:,} after it, seen twice), plus "
        f"{h['spurious_resends']:,} spurious resends, per {charts.unit_label(width)}. "
        f"Another count: {tshark}; a segment lost before the capture point is never seen "
        "twice there, so tshark calls its resend out-of-order or nothing."
    )
    if h["capture_drop_bytes"]:
        note += (f" The capture itself missed {h['capture_drop_bytes']:,} bytes the receiver "
                 "acknowledged (not counted as losses).")
    if h["lost_before_capture"]:
        note += (" Resends that filled a gap arrived after later segments: in Wireshark, turn "
                 "on Protocols > TCP > Reassemble out-of-order segments (tshark: -o "
                 "tcp.reassemble_out_of_order:TRUE; off by default in Wireshark 4.0) to see the "
                 "TLS records, HTTP requests and HTTP/2 and WebSocket frames in the frames these "
                 "tables name; without it Wireshark shows fewer of them.")
        if h["capture_drop_bytes"]:
            note += (" With it on, Wireshark waits for the bytes the capture missed and shows "
                     "nothing more of that direction of those connections.")
    return Section("retransmissions", title,
                   Markup(ctx.figure(fig, "retransmissions") + table), note)


def tcp_flags_section(ctx: ReportContext) -> Section:
    title = "TCP analysis flags"
    ev = ctx.cap.tcp_events
    counts = dict(ctx.head["tcp_events"])
    if not counts:
        return Section(
            "tcp-flags", title, None, "tshark's TCP analysis flags nothing in this capture."
        )
    streams = ev.groupby(ev["kind"].astype("string"))["tcp_stream"].nunique()
    rows = [
        [
            k.replace("_", " "),
            v,
            int(streams.get(k, 0)),
            ctx.code(_TSHARK_FLAG[k]) if k in _TSHARK_FLAG else "-",
        ]
        for k, v in counts.items()
    ]
    table = ctx.table(["flag", "frames", "connections", "Wireshark filter"], rows, numeric=(1, 2))
    note = (
        "Rows of cap.tcp_events by kind (ACK RTT samples left out). tshark's "
        "tcp.analysis.retransmission filter also matches fast and spurious retransmissions."
    )
    return Section("tcp-flags", title, table, note)


def coverage_section(ctx: ReportContext) -> Section:
    """What was analysed and what was not (cap.coverage by transport, protocol and status)."""
    title = "Coverage"
    summ = coverage_summary(ctx.cap)
    if not len(summ):
        return Section("coverage", title, None, "No frames, or no coverage table (cap.coverage).")
    rows: list[list[Cell]] = [
        [str(r["transport"]), str(r["protocol"]), str(r["status"]).replace("_", " "),
         int(r["flows"]), int(r["frames"]), f"{100.0 * float(r['frames_share']):.1f}%",
         int(r["wire_bytes"]), f"{100.0 * float(r['wire_share']):.1f}%"]
        for r in summ.to_dict("records")
    ]
    table = ctx.table(
        ["transport", "protocol", "status", "flows", "frames", "frames %", "wire bytes", "bytes %"],
        rows, numeric=(3, 4, 5, 6, 7),
    )
    note = (
        "Every frame of the capture in one row of cap.coverage (one per TCP connection, UDP flow "
        "or other traffic class), summed by transport, protocol and status; analysed and "
        "decrypted rows are what the other sections are about. Flows: connections, UDP flows "
        "or classes."
    )
    if summ["status"].eq("partly_analysed").any():
        note += (
            " Partly analysed: connections parsed to their end, whose payload sent after it "
            "was not (tcp.payload_after_release warnings; each row's detail in cap.coverage "
            "says how much)."
        )
    return Section("coverage", title, table, note)


def path_mtu_section(ctx: ReportContext) -> Section:
    """ICMP errors, path-MTU discovery (cap.path_mtu) and path-MTU black holes (the
    pmtu_black_hole rows of disconnects)."""
    title = "Path MTU and ICMP errors"
    cap = ctx.cap
    ie, pm = cap.icmp_errors, cap.path_mtu
    holes = ctx.head.get("pmtu_black_holes") or []
    if not len(ie) and not len(pm) and not holes:
        return Section("path-mtu", title, None,
                       "No ICMP errors, no path-MTU discovery and no path-MTU black hole in "
                       "this capture.")
    lines: list[Cell] = []
    if len(ie):
        kinds = ", ".join(f"{v:,} {k.replace('_', ' ')}"
                          for k, v in ctx.head["icmp_errors_by_kind"].items())
        lines.append(f"{len(ie):,} ICMP error{'' if len(ie) == 1 else 's'}: {kinds}.")
    side = {"client_to_server": "client", "server_to_client": "server"}
    for r in _records(pm.head(ctx.max_table_rows)):
        who = side.get(str(r["direction"]), "?")
        st = int(r["tcp_stream"])
        if r["outcome"] == "icmp_ignored":
            lines.append(f"tcp.stream {st}: {int(r['icmp_errors']):,} ICMP too-big error(s) "
                         f"(MTU {_text(r['icmp_mtu'])}, first frame {_text(r['icmp_frame'])}) "
                         f"reached the {who}, which never re-sent smaller segments.")
            continue
        how = (f"ICMP said MTU {_text(r['icmp_mtu'])} (frame {_text(r['icmp_frame'])})"
               if r["outcome"] == "discovered" else "no ICMP too-big error in the capture")
        dms, cms = _f(r["delivered_ms"]), _f(r["cost_ms"])
        got = (f"; the data got through {dms:.3f} ms after the first transmission (frame "
               f"{_text(r['delivered_frame'])})" if dms is not None
               else "; its delivery was not captured")
        cost = f", {cms:.3f} ms more than one round trip" if cms is not None else ""
        lines.append(f"tcp.stream {st}: path-MTU discovery by the {who}: {how}; its "
                     f"{_text(r['big_seg_bytes'])}-byte segment (frame {_text(r['big_frame'])}) "
                     f"was re-sent as {_text(r['resend_seg_bytes'])} bytes (frame "
                     f"{_text(r['resend_frame'])}){got}{cost}. MTU learnt: {_text(r['mtu'])}.")
    for h in holes:
        lines.append(f"tcp.stream {h['tcp_stream']}: {h['summary']}.")
    body = ctx.items(lines)
    if len(ie):
        rows: list[list[Cell]] = [
            [int(r["frame"]), _text(r["kind"]), _text(r["src"]), _text(r["mtu"]),
             _quoted_text(r),
             _text(r["quoted_len"]), _text(r["tcp_stream"])]
                for r in _records(ie.head(ctx.max_table_rows))]
        body += ctx.table(["frame", "kind", "from", "MTU", "quoted packet", "quoted length",
                           "tcp.stream"], rows, numeric=(0, 3, 5, 6), mono=(2, 4),
                          total=len(ie), source="cap.icmp_errors")
    note = ("ICMP errors (cap.icmp_errors), the senders that lowered their segment size "
            "(cap.path_mtu) and the pmtu_black_hole verdicts of disconnects(cap). A black hole "
            "shows only where the sender's retransmissions are captured.")
    return Section("path-mtu", title, body, note)


def _quoted_text(r: dict[str, Any]) -> str:
    """'src:port → dst:port' of an icmp_errors row's quoted packet ('' when none)."""
    src, dst = _text(r["quoted_src"]), _text(r["quoted_dst"])
    if not src:
        return ""
    sp, dp = _text(r["quoted_sport"]), _text(r["quoted_dport"])
    if sp and dp:
        return f"{charts.endpoint(src, int(sp))} → {charts.endpoint(dst, int(dp))}"
    return f"{src} → {dst}"


def warnings_section(ctx: ReportContext) -> Section:
    title = "Warnings"
    w = ctx.cap.warnings
    by_code = ctx.head["warnings_by_code"]
    if not by_code:
        cov = ctx.head.get("coverage") or {}
        missing = {k: v for k, v in (cov.get("by_status") or {}).items() if k not in COVERED}
        if missing:
            frames = sum(int(v["frames"]) for v in missing.values())
            return Section(
                "warnings", title, None,
                f"No warnings: every frame was read, but {frames:,} of "
                f"{int(ctx.head['frames']):,} were not analysed (see Coverage).",
            )
        return Section("warnings", title, None, "No warnings: every frame was read and decoded.")
    summary = ctx.table(
        ["code", "occurrences", "meaning"],
        [[c, n, CATALOGUE.get(c, "")] for c, n in by_code.items()],
        numeric=(1,),
        wrap=(2,),
    )
    shown = w.head(ctx.max_table_rows)
    rows: list[list[Cell]] = []
    for r in _records(shown):
        frame = None if pd.isna(r["frame"]) else int(r["frame"])
        stream = None if pd.isna(r["tcp_stream"]) else int(r["tcp_stream"])
        rows.append(
            [
                _text(r["code"]),
                frame,
                stream,
                _text(r["detail"]),
                ctx.code(f"frame.number == {frame}") if frame is not None else None,
            ]
        )
    listing = ctx.table(
        ["code", "frame", "tcp.stream", "detail", "Wireshark filter"],
        rows,
        numeric=(1, 2),
        wrap=(3,),
        total=len(w),
        source="cap.warnings",
    )
    note = (f"{count_of(ctx.head['warnings'], 'warning')}; the rows of cap.warnings follow "
            "the summary.")
    return Section("warnings", title, Markup(summary + listing), note)


# -- DNS, TLS, HTTP and streaming sections ---------------------------------------------------------

#: requests drawn in the waterfall before it says "first N of M"
MAX_WATERFALL_ROWS = 300
#: streamed responses drawn in the token cadence chart
MAX_CADENCE_STREAMS = 30


def dns_section(ctx: ReportContext) -> Section:
    title = "DNS"
    d = ctx.cap.dns
    if len(d) == 0:
        return Section("dns", title, None, "No DNS queries in this capture (over UDP or TCP port "
                       "53, or over HTTPS: application/dns-message).")
    h = ctx.head
    shown = d.head(ctx.max_table_rows)
    rows: list[list[Cell]] = []
    for r in _records(shown):
        port = int(r["client_port"])
        transport = str(r["transport"])
        if transport == "udp":
            filt = f"dns.id == 0x{int(r['id']):04x} && udp.port == {port}"
        else:
            filt = f"dns && tcp.stream == {int(r['tcp_stream'])}"
            if not pd.isna(r["http_stream_id"]):
                filt += f" && http2.streamid == {int(r['http_stream_id'])}"
            elif transport == "tcp":
                filt += f" && dns.id == 0x{int(r['id']):04x}"
        if transport == "udp" and not pd.isna(r["tcp_retry_frame"]):
            transport = f"udp, TC=1: retried over TCP in frame {int(r['tcp_retry_frame'])}"
        elif transport == "doh" and not pd.isna(r["doh_method"]):
            transport = f"doh ({r['doh_method']})"
        rows.append([
            int(r["frame"]),
            _text(r["name"]),
            _text(r["type"]),
            _text(r["rcode"]) or "no answer",
            None if pd.isna(r["latency_ms"]) else float(r["latency_ms"]),
            _text(r["answers"]),
            f"{charts.endpoint(r['client_addr'], port)} → {r['server_addr']}",
            transport,
            int(r["queries"]),
            ctx.code(filt),
        ])
    table = ctx.table(
        ["frame", "name", "type", "rcode", "answer ms", "answers", "client → resolver",
         "transport", "queries", "Wireshark filter"],
        rows, numeric=(0, 4, 8), mono=(6,), wrap=(5,), total=len(d), source="cap.dns",
    )
    lat = h["dns_latency_ms"]
    note = f"{len(d):,} quer{'y' if len(d) == 1 else 'ies'}"
    if lat["count"]:
        note += f", median answer time {fmt_ms(lat['median'])} (tshark dns.time)"
    if h["dns_unanswered"]:
        note += f", {h['dns_unanswered']:,} unanswered"
    note += "."
    tr = h.get("dns_transports") or {}
    if any(k != "udp" for k in tr):
        note += " By transport: " + ", ".join(f"{k} {v:,}" for k, v in tr.items()) + "."
    note += " The queries column counts the query's packets (more than 1: retransmitted)."
    if "doh" in tr:
        note += (" DNS over HTTPS rows are HTTP exchanges with application/dns-message bodies "
                 "(a GET's query is its ?dns= parameter, which tshark does not dissect).")
    return Section("dns", title, table, note)


def tls_section(ctx: ReportContext) -> Section:
    title = "TLS"
    t = ctx.cap.tls_handshakes
    if len(t) == 0:
        return Section("tls", title, None, "No TLS handshake in this capture.")
    h = ctx.head
    n = len(t)
    parts: list[Markup] = []
    sentences = tls_decrypt_sentences(h["tls_decrypt_status"])
    if sentences:
        parts.append(ctx.items(sentences, css="verdicts"))
    resumed = int(h["tls_resumed"])
    kinds = _counts_text(t["resumption"])
    facts: list[tuple[str, Cell]] = [
        ("Versions", _counts_text(t["version"]) or "unknown (ServerHello not seen)"),
        ("ALPN selected", _counts_text(t["alpn_selected"]) or "none"),
        ("Cipher suites", _counts_text(t["cipher_suite"]) or "unknown"),
        ("SNI", _counts_text(t["sni"], top=10) or "none sent"),
        (
            "Resumed",
            f"{resumed:,} of {n:,} ({100.0 * resumed / n:.0f}%)" + (f": {kinds}" if kinds else ""),
        ),
        ("Decryption", _counts_text(t["decrypt_status"])),
    ]
    hs = t["handshake_ms"].dropna()
    if len(hs):
        facts.append((
            "Handshake time",
            f"median {fmt_ms(float(hs.median()))}, max {fmt_ms(float(hs.max()))} "
            f"({len(hs):,} session{'' if len(hs) == 1 else 's'})",
        ))
    parts.append(ctx.pairs(facts))
    if len(hs) > 1:
        fig = charts.ms_histogram_figure(
            {"TLS handshake": hs}, "ClientHello to client Finished (ms)", "sessions"
        )
        if fig is not None:
            parts.append(ctx.figure(fig, "tls-handshake"))
    shown = t.sort_values(["tcp_stream", "session"]).head(ctx.max_table_rows)
    rows: list[list[Cell]] = []
    for r in _records(shown):
        alpn = _text(r["alpn_selected"])
        offered = _text(r["alpn_offered"])
        rows.append([
            int(r["tcp_stream"]),
            int(r["session"]),
            _text(r["sni"]),
            _text(r["version"]),
            _text(r["cipher_suite"]),
            alpn + (f" (offered {offered})" if offered and offered != alpn else ""),
            _text(r["resumption"]) or "no",
            None if pd.isna(r["handshake_ms"]) else float(r["handshake_ms"]),
            _text(r["decrypt_status"]).replace("_", " "),
            None if pd.isna(r["client_hello_frame"]) else int(r["client_hello_frame"]),
            ctx.code(f"tcp.stream eq {int(r['tcp_stream'])} && tls.handshake"),
        ])
    parts.append(ctx.table(
        ["tcp.stream", "session", "SNI", "version", "cipher suite", "ALPN", "resumed",
         "handshake ms", "decryption", "ClientHello frame", "Wireshark filter"],
        rows, numeric=(0, 1, 7, 9), wrap=(4, 5), total=n, source="cap.tls_handshakes",
    ))
    conns = int(t["tcp_stream"].nunique())
    note = (
        f"{n:,} TLS session{'' if n == 1 else 's'} on {conns:,} "
        f"connection{'' if conns == 1 else 's'} (cap.tls_handshakes). "
        "Handshake time is ClientHello to the client's Finished."
    )
    return Section("tls", title, Markup("".join(parts)), note)


def http_section(ctx: ReportContext) -> Section:
    title = "HTTP requests"
    lat = ctx.latency()
    h = ctx.head
    if len(lat) == 0:
        undecrypted = sum(
            v for k, v in h["tls_decrypt_status"].items() if k not in ("decrypted", "not_encrypted")
        )
        if undecrypted:
            were = "was" if undecrypted == 1 else "s were"
            return Section(
                "http", title, None,
                f"No HTTP request could be read: {undecrypted:,} TLS session"
                f"{' ' if undecrypted == 1 else ''}{were} not decrypted (see the TLS section).",
            )
        return Section("http", title, None, "No HTTP/1.x or HTTP/2 requests in this capture.")
    s = ctx.cap.summary
    end_ns = s.last_ts_ns if s.last_ts_ns is not None else ctx.t0_ns
    parts: list[Markup] = []
    wf = charts.waterfall_rows(lat, ctx.t0_ns, end_ns, MAX_WATERFALL_ROWS, ctx.cap.connections)
    fig = charts.waterfall_figure(wf)
    if fig is not None:
        parts.append(ctx.figure(fig, "waterfall"))
    dist = charts.ms_histogram_figure({"TTFB": lat["ttfb_ms"], "TTFT": lat["ttft_ms"]},
                                      "milliseconds after the request was sent", "requests")
    if dist is not None:
        parts.append(ctx.figure(dist, "ttfb"))
    parts.append(_requests_table(ctx, lat))
    coded = _encoded_bodies(ctx)
    if coded:
        parts.append(ctx.table(
            ["tcp.stream", "stream / #", "Content-Encoding", "wire body bytes", "decoded bytes",
             "decoding", "SSE events"],
            coded[: ctx.max_table_rows], numeric=(0, 1, 3, 4, 6), total=len(coded),
            source="cap.http_requests / cap.http2_streams (content_encoding)",
        ))
    n = len(lat)
    conns = int(lat["tcp_stream"].nunique()) + int(lat["quic_connection"].nunique())
    note = (
        f"{n:,} request{'' if n == 1 else 's'} on {conns:,} connection{'' if conns == 1 else 's'}. "
        "Waterfall: one row per request, grouped by connection (tcp.stream, then HTTP/2 stream "
        "or #exchange); DNS, TCP connect and TLS bars appear on the first request of a "
        "connection; then request sent, waiting for the first byte (TTFB) and download. "
        "Cells of several lines hold related values, one a line in the order of the column "
        "heading; ? marks one that is unknown. "
        "\u2013: does not apply (a reused connection paid no DNS, connect or TLS time; no TLS "
        "on a cleartext connection); blank means unknown. "
        "Columns are pcaptools.analyses.latency.stream_latency(cap)."
    )
    unpaired = h.get("http_unpaired") or {}
    if unpaired:
        k = sum(unpaired.values())
        why = ", ".join(f"{r} {c:,}" for r, c in unpaired.items())
        note += (
            f" {k:,} HTTP/1.x row{'' if k == 1 else 's'} could not be paired ({why}; "
            "http_requests.unpaired_reason): each shows a request or a response alone, "
            "without a TTFB, rather than a guessed pair."
        )
    if wf.truncated:
        note += f" The waterfall shows the first {len(wf.rows):,} of {wf.total:,} requests."
    if coded:
        note += (
            f" {len(coded):,} response bod{'y was' if len(coded) == 1 else 'ies were'} "
            "content-encoded: decoded as they arrived before SSE parsing (second table; "
            "decoding other than 'decoded' means the rest of that body was not analysed, "
            "see the http.content_* warnings)."
        )
    return Section("http", title, Markup("".join(parts)), note)


def _requests_table(ctx: ReportContext, lat: pd.DataFrame) -> Markup:
    """One row per request of ``stream_latency``. Related values share a cell, one a line
    (stream or exchange over protocol, method over status, host over path, DNS over connect
    over TLS time, TTFT over tokens, total over from-SYN time), and host and path wrap
    anywhere, so the table fits a 1400 px window whatever the host names (#19)."""
    rows: list[list[Cell]] = []
    for r in _records(lat.head(ctx.max_table_rows)):
        rid = int(r["stream_id"]) if not pd.isna(r["stream_id"]) else f"#{int(r['request_index'])}"
        rows.append([
            _conn_cell(r),
            _stacked(rid, _text(r["protocol"])),
            _stacked(_text(r["method"]), None if pd.isna(r["status"]) else int(r["status"])),
            _stacked(_text(r["host"]), _text(r["path"])),
            "?" if pd.isna(r["reused"]) else bool(r["reused"]),
            _stacked(*_setup_cells(r)),
            _f(r["ttfb_ms"]),
            _stacked(_f(r["ttft_ms"]), int(r["token_events"]) if r["token_events"] else None),
            _stacked(_f(r["total_ms"]), _f(r["from_connection_start_ms"])),
            ctx.code(str(r["wireshark_filter"])),
        ])
    return ctx.table(
        ["tcp.stream", "stream or # / protocol", "method / status", "host / path", "reused",
         "DNS / connect / TLS ms", "TTFB ms", "TTFT ms / tokens", "total / from SYN ms",
         "Wireshark filter"],
        rows, numeric=(0, 5, 6, 7, 8), wrap=(3,), total=len(lat), source="stream_latency(cap)",
    )


def _stacked(*values: Cell) -> Cell:
    """Related values in one cell, one a line in the order of the column heading, each
    formatted as a cell of its own (escaped): ``?`` for an unknown one among known ones, and
    a blank cell when none is known."""
    shown = [_cell(v) for v in values]
    if all(c is None or c == "" for c in shown):
        return None
    return lines(*("?" if c is None or c == "" else c for c in shown))


def _conn_cell(r: dict[str, Any]) -> Cell:
    """The connection of a stream_latency row: its tcp.stream, or ``QUIC n`` for HTTP/3."""
    if pd.isna(r["tcp_stream"]) and not pd.isna(r["quic_connection"]):
        return f"QUIC {int(r['quic_connection'])}"
    return int(r["tcp_stream"])


def _setup_cells(r: dict[str, Any]) -> list[Cell]:
    """DNS, connect and TLS ms of a request: NOT_APPLICABLE where it does not apply (a reused
    connection paid none of them; no TLS on a cleartext connection), empty when unknown."""
    if r["reused"] is True:
        return [NOT_APPLICABLE] * 3
    tls: Cell = NOT_APPLICABLE if r["tls"] is False else _f(r["tls_ms"])
    return [_f(r["dns_ms"]), _f(r["connect_ms"]), tls]


def _encoded_bodies(ctx: ReportContext) -> list[list[Cell]]:
    """One row per content-encoded response body (HTTP/1.x exchanges, then HTTP/2 streams)."""
    out: list[list[Cell]] = []
    for df, rid, wire in ((ctx.cap.http_requests, "request_index", "response_body_bytes"),
                          (ctx.cap.http2_streams, "stream_id", "server_data_bytes")):
        status = df["content_decoding"].astype("string")
        sel = df[df["content_encoding"].notna() & status.notna() & status.ne("identity")]
        for r in _records(sel):
            out.append([
                int(r["tcp_stream"]),
                int(r["stream_id"]) if rid == "stream_id" else f"#{int(r['request_index'])}",
                _text(r["content_encoding"]),
                int(r[wire]) if not pd.isna(r[wire]) else None,
                None if pd.isna(r["response_decoded_bytes"]) else int(r["response_decoded_bytes"]),
                _text(r["content_decoding"]),
                int(r["sse_events"]),
            ])
    return out


def streaming_section(ctx: ReportContext) -> Section:
    title = "Streamed responses (SSE)"
    lat = ctx.latency()
    ev = ctx.cap.sse_events
    streamed = lat[lat["token_events"] > 0]
    if len(streamed) == 0:
        if len(ev):
            return Section(
                "streaming", title, None,
                f"{len(ev):,} server-sent event{'' if len(ev) == 1 else 's'}, none carrying "
                "LLM text (delta content): no time to first token to show.",
            )
        return Section("streaming", title, None, "No server-sent events in this capture.")
    points, total = charts.token_cadence_rows(lat, ev, MAX_CADENCE_STREAMS,
                                              ctx.cap.http3_sse_events)
    parts: list[Markup] = []
    fig = charts.token_cadence_figure(points)
    if fig is not None:
        parts.append(ctx.figure(fig, "token-cadence"))
    rows: list[list[Cell]] = []
    for r in _records(streamed.head(ctx.max_table_rows)):
        rid = int(r["stream_id"]) if not pd.isna(r["stream_id"]) else f"#{int(r['request_index'])}"
        rows.append([
            _conn_cell(r), rid, _text(r["path"]), _f(r["ttfb_ms"]), _f(r["ttft_ms"]),
            int(r["token_events"]), _f(r["token_gap_median_ms"]), _f(r["token_gap_p95_ms"]),
            _f(r["token_gap_max_ms"]), _f(r["total_ms"]), ctx.code(str(r["wireshark_filter"])),
        ])
    parts.append(ctx.table(
        ["tcp.stream", "stream / #", "path", "TTFB ms", "TTFT ms", "token events",
         "gap median ms", "gap p95 ms", "gap max ms", "total ms", "Wireshark filter"],
        rows, numeric=(0, 1, 3, 4, 5, 6, 7, 8, 9), wrap=(2,),
        total=len(streamed), source="stream_latency(cap)",
    ))
    ttft = streamed["ttft_ms"].dropna()
    note = (
        f"{total:,} streamed response{'' if total == 1 else 's'} with text"
        + (f", median time to first token {fmt_ms(float(ttft.median()))}" if len(ttft) else "")
        + ". Chart: cumulative token events (SSE events with delta text) against time since the "
        "request was sent; a flat stretch is a stall."
    )
    if total > MAX_CADENCE_STREAMS:
        note += f" The chart shows the first {MAX_CADENCE_STREAMS} of {total:,} responses."
    return Section("streaming", title, Markup("".join(parts)), note)


_HB_NAMES = {
    "websocket": "WebSocket Ping/Pong",
    "http2": "HTTP/2 PING",
    "tcp_keepalive": "TCP keep-alive",
}
_HB_FILTERS = {
    "websocket": "tcp.stream eq {} && websocket.opcode in {{9 10}}",
    "http2": "tcp.stream eq {} && http2.type == 6",
    "tcp_keepalive": "tcp.stream eq {} && (tcp.analysis.keep_alive || tcp.analysis.keep_alive_ack)",
}


def heartbeats_section(ctx: ReportContext) -> Section:
    title = "WebSocket and heartbeats"
    hb = ctx.heartbeats()
    summ = ctx.heartbeat_summary()
    if len(summ) == 0:
        return Section(
            "heartbeats", title, None,
            "No WebSocket or HTTP/2 connection and no TCP keep-alive in this capture.",
        )
    parts: list[Markup] = []
    note = ""
    if len(hb):
        streams = sorted({int(t) for t in hb["tcp_stream"].tolist()})
        bad = {int(t) for t in hb.loc[hb["outcome"].astype(object) == "unanswered", "tcp_stream"]}
        keep = sorted(bad)[:MAX_HEARTBEAT_CONNECTIONS]
        keep += [t for t in streams if t not in bad][: MAX_HEARTBEAT_CONNECTIONS - len(keep)]
        shown_hb = hb[hb["tcp_stream"].isin(keep)] if len(keep) < len(streams) else hb
        fig = charts.heartbeat_figure(charts.heartbeat_points(shown_hb, ctx.t0_ns))
        if fig is not None:
            parts.append(ctx.figure(fig, "heartbeats"))
        n = len(hb)
        note = (
            f"{n:,} ping{'' if n == 1 else 's'} on {len(streams):,} "
            f"connection{'' if len(streams) == 1 else 's'}. Chart: one lane per connection, "
            "mechanism and ping sender; pings coloured by outcome (red crosses: unanswered), "
            "diamonds: their pongs. "
        )
        if len(keep) < len(streams):
            note += (
                f"The chart shows {len(keep):,} of {len(streams):,} connections, those with "
                "unanswered pings first. "
            )
    else:
        note = "No ping on any connection: nothing kept them alive. "
    rows: list[list[Cell]] = []
    shown = summ.head(ctx.max_table_rows)
    for r in _records(shown):
        tcp, mech = int(r["tcp_stream"]), str(r["mechanism"])
        senders: list[str | None] = [w for w in ("client", "server") if r[f"{w}_pings"]]
        sil = [_f(r["client_longest_silence_ms"]), _f(r["server_longest_silence_ms"])]
        silence = max((x for x in sil if x is not None), default=None)
        for w in senders or [None]:
            if w is None:
                rows.append([tcp, _HB_NAMES.get(mech, mech), "no pings", 0, None, None, None,
                             None, None, None, silence, ctx.code(_HB_FILTERS[mech].format(tcp))])
                continue
            rows.append([
                tcp, _HB_NAMES.get(mech, mech), w, int(r[f"{w}_pings"]), int(r[f"{w}_answered"]),
                int(r[f"{w}_missed"]),
                int(r[f"{w}_superseded"]) + int(r[f"{w}_cut_off"]),
                _f(r[f"{w}_interval_ms"]), _f(r[f"{w}_rtt_p50_ms"]), _f(r[f"{w}_rtt_p95_ms"]),
                _f(r[f"{w}_longest_silence_ms"]),
                ctx.code(_HB_FILTERS.get(mech, "tcp.stream eq {}").format(tcp)),
            ])
    parts.append(ctx.table(
        ["tcp.stream", "mechanism", "ping sender", "pings", "answered", "missed",
         "superseded / cut off", "interval ms", "pong p50 ms", "pong p95 ms",
         "longest silence ms", "Wireshark filter"],
        rows, numeric=(0, 3, 4, 5, 6, 7, 8, 9, 10),
        # rows are per (connection, mechanism, ping sender): the ceiling counts summary rows
        total=_heartbeat_rows(summ), source="heartbeat_summary(...)",
    ))
    note += (
        "Table: pcaptools.analyses.heartbeats.heartbeat_summary; interval is the median time "
        "between pings, missed counts pings without a pong although the connection lived 2 s "
        "longer, longest silence is the sender's longest time without payload."
    )
    return Section("heartbeats", title, Markup("".join(parts)), note)


def _frames_cell(ev: Any, most: int = 20) -> str:
    """Evidence frames as text: the first ``most`` and how many more."""
    ev = list(ev or [])
    frames = ", ".join(str(int(f)) for f in ev[:most])
    return frames + (f" (+{len(ev) - most})" if len(ev) > most else "")


def _quic_disconnects_part(ctx: ReportContext, q: pd.DataFrame) -> Markup:
    """The QUIC connections' line and table of the disconnects section."""
    a = q.attrs
    qn = int(a.get("quic_connections", 0))
    clean = int(a.get("quic_clean_connections", 0))
    still = int(a.get("quic_open_connections", 0))
    unknown = int(a.get("quic_unknown_connections", 0))
    line = (
        f"QUIC: {len(q):,} of {qn:,} connection{'' if qn == 1 else 's'} did not end cleanly; "
        f"{clean:,} closed cleanly (CONNECTION_CLOSE without an error)"
        + (f"; {still:,} still open at the end of the capture without a finding" if still else "")
        + (f"; {unknown:,} not decrypted, so no verdict is given (no key for their client "
           "random)" if unknown else "")
        + "."
    )
    out = Markup("<p>{}</p>").format(line)
    if not len(q):
        return out
    rows: list[list[Cell]] = [
        [
            int(r["quic_connection"]),
            _text(r["verdict"]),
            _text(r["peer"]),
            _text(r["protocol"]),
            _text(r["summary"]),
            _f(r["detection_delay_ms"]),
            _text(r["close_error"]),
            _frames_cell(r["evidence_frames"]),
            ctx.code(_text(r["display_filter"])),
        ]
        for r in _records(q.head(ctx.max_table_rows))
    ]
    return out + ctx.table(
        ["QUIC connection", "verdict", "peer", "protocol", "summary", "detection delay ms",
         "close error", "evidence frames", "Wireshark filter"],
        rows, numeric=(0, 5), wrap=(4, 7), total=len(q), source="disconnects(cap, quic=True)",
    )


def disconnects_section(ctx: ReportContext) -> Section:
    title = "Disconnects"
    n = len(ctx.cap.connections)
    q = ctx.quic_disconnects()
    quic = Markup("") if q is None else _quic_disconnects_part(ctx, q)
    if n == 0:
        if q is None:
            return Section("disconnects", title, None, "No TCP connections in this capture.")
        return Section("disconnects", title, quic,
                       "No TCP connections in this capture; its QUIC connections "
                       "(pcaptools.analyses.disconnects(cap, quic=True)).")
    d = ctx.disconnects()
    clean = int(d.attrs.get("clean_connections", 0))
    still = int(d.attrs.get("open_connections", 0))
    line = (
        f"{clean:,} of {n:,} connection{'' if n == 1 else 's'} ended cleanly (FIN both ways"
        f"{', and a WebSocket Close frame' if len(ctx.cap.ws_connections) else ''})"
        + (f"; {still:,} still open at the end of the capture without a finding" if still else "")
        + "."
    )
    if len(d) == 0:
        if q is None:
            return Section("disconnects", title, None, "No connection ended badly: " + line)
        return Section("disconnects", title,
                       Markup("<p>{}</p>").format("No TCP connection ended badly: " + line) + quic,
                       "TCP and QUIC connections (pcaptools.analyses.disconnects(cap, quic=True)).")
    rows: list[list[Cell]] = []
    for r in _records(d.head(ctx.max_table_rows)):
        rows.append([
            int(r["tcp_stream"]),
            _text(r["verdict"]),
            _text(r["peer"]),
            _text(r["protocol"]),
            _text(r["summary"]),
            _f(r["detection_delay_ms"]),
            _frames_cell(r["evidence_frames"]),
            ctx.code(_text(r["display_filter"])),
        ])
    table = ctx.table(
        ["tcp.stream", "verdict", "peer", "protocol", "summary", "detection delay ms",
         "evidence frames", "Wireshark filter"],
        rows, numeric=(0, 5), wrap=(4, 6), total=len(d), source="disconnects(cap)",
    )
    k = len(d)
    note = (
        f"{k:,} of {n:,} connection{'' if n == 1 else 's'} did not end cleanly "
        "(pcaptools.analyses.disconnects). Detection delay: from the peer's last packet (or the "
        "first unanswered segment) to when the sender gave up or learned of it."
    )
    return Section("disconnects", title, Markup("<p>{}</p>").format(line) + table + quic, note)


def overhead_section(ctx: ReportContext) -> Section:
    title = "Overhead"
    n = len(ctx.cap.connections)
    q = ctx.quic_overhead()
    quic = Markup("") if q is None or not len(q) else _quic_overhead_part(ctx, q)
    if n == 0:
        if not quic:
            return Section("overhead", title, None, "No TCP connections in this capture.")
        return Section("overhead", title, quic, "No TCP connections in this capture; " + _QUIC_NOTE)
    o = ctx.overhead()
    is_total = o["total"].astype(bool)
    total = o[is_total]
    per = o[~is_total]
    if len(total) == 0 or int(total["wire_bytes"].iloc[0]) == 0:
        if not quic:
            return Section("overhead", title, None, "No TCP bytes on the wire in this capture.")
        return Section("overhead", title, quic, "No TCP bytes on the wire in this capture; "
                       + _QUIC_NOTE)
    tot = total.iloc[0]
    wire = int(tot["wire_bytes"])
    parts: list[Markup] = []
    parsed = (
        bool(per["protocol"].astype(object).ne("tcp").any()) or int(tot["app_payload_bytes"]) > 0
    )
    top = per.sort_values(["wire_bytes", "tcp_stream"], ascending=[False, True])
    top = top.head(MAX_OVERHEAD_BARS)
    if parsed:
        bars = pd.concat([top.sort_values("tcp_stream"), total], ignore_index=True)
        fig = charts.overhead_figure(bars, CATEGORIES)
        if fig is not None:
            parts.append(ctx.figure(fig, "overhead"))
    pairs: list[tuple[str, Cell]] = [
        (charts.overhead_label(c), f"{int(tot[c]):,} ({100.0 * int(tot[c]) / wire:.1f}%)")
        for c in CATEGORIES if int(tot[c])
    ]
    pairs.append(("bytes on the wire", f"{wire:,}"))
    whole = int(ctx.cap.summary.wire_bytes)
    if whole > wire:  # the ratios are over TCP only: say so
        pairs.append((
            "ratios taken over",
            f"TCP frames only: {wire:,} of the capture's {whole:,} bytes "
            f"({100.0 * wire / whole:.1f}%; "
            + ("QUIC below, " if quic else "") + "the rest is in Coverage)",
        ))
    g, gmax = _f(tot["goodput_ratio"]), _f(tot["goodput_max_ratio"])
    pairs.append(("goodput", "" if g is None else f"{100.0 * g:.1f}%"))
    if gmax is not None and g is not None and gmax > g:
        pairs.append((
            "goodput upper bound",
            f"{100.0 * gmax:.1f}% (undecrypted and unparsed bytes as payload)",
        ))
    parts.append(ctx.pairs(pairs))
    note = (
        f"Wire bytes (frame.len) of {n:,} TCP connection{'' if n == 1 else 's'} by layer and "
        "purpose (pcaptools.analyses.overhead); goodput and every share here are over these TCP "
        "bytes, not over UDP, ICMP or non-IP frames. "
    )
    if not parsed:
        note += "No layer above TCP was parsed: payload is counted as other bytes, no chart."
    elif len(per) > MAX_OVERHEAD_BARS:
        note += (
            f"Chart: the {MAX_OVERHEAD_BARS} largest of {len(per):,} connections by wire bytes, "
            "and the total of all."
        )
    else:
        note += "Chart: each connection and the total, as shares of its wire bytes."
    if quic:
        note += " " + _QUIC_NOTE
    return Section("overhead", title, Markup("".join(parts)) + quic, note)


_QUIC_NOTE = (
    "QUIC connections: wire bytes (frame.len) of their UDP datagrams by layer and purpose "
    "(pcaptools.analyses.overhead(cap, quic=True)); their shares are over QUIC bytes only."
)

#: the categories a QUIC row can have bytes in, in layer order
_QUIC_ROW_CATEGORIES: tuple[str, ...] = tuple(
    c for c in CATEGORIES
    if c in QUIC_CATEGORIES or c in ("sse_framing_bytes", "app_payload_bytes", "other_bytes")
)


def _quic_overhead_total(q: pd.DataFrame) -> pd.DataFrame:
    """One row summing the QUIC rows ``q`` (labelled as a total row; its goodput ratios
    recomputed over the sums)."""
    t = q.iloc[:1].copy().reset_index(drop=True)
    for c in ("packets", "wire_bytes", *CATEGORIES):
        t[c] = np.int64(int(q[c].sum()))
    t["total"] = True
    t["quic_connection"] = pd.array([pd.NA], dtype="Int64")
    wire = int(t["wire_bytes"].iloc[0])
    hidden = sum(int(t[c].iloc[0]) for c in ("quic_undecrypted_bytes", "other_bytes"))
    t["goodput_ratio"] = int(t["app_payload_bytes"].iloc[0]) / wire if wire else np.nan
    t["goodput_max_ratio"] = (
        (int(t["app_payload_bytes"].iloc[0]) + hidden) / wire if wire else np.nan
    )
    return t


def _quic_overhead_part(ctx: ReportContext, q: pd.DataFrame) -> Markup:
    """The QUIC connections' line, chart, totals and table of the Overhead section: the rows
    of ``overhead(cap, quic=True)`` with ``transport`` quic."""
    nq = len(q)
    wire = int(q["wire_bytes"].sum())
    head = (
        f"QUIC: {nq:,} connection{'' if nq == 1 else 's'}, {wire:,} bytes on the wire in "
        f"{int(q['packets'].sum()):,} UDP datagrams."
    )
    out = Markup("<p>{}</p>").format(head)
    if wire == 0:
        return out
    total = _quic_overhead_total(q)
    top = q.sort_values(["wire_bytes", "quic_connection"], ascending=[False, True])
    top = top.head(MAX_OVERHEAD_BARS).sort_values("quic_connection")
    fig = charts.overhead_figure(
        pd.concat([top, total], ignore_index=True), _QUIC_ROW_CATEGORIES,
        total_label="QUIC total",
    )
    if fig is not None:
        out += ctx.figure(fig, "overhead-quic")
    tot = total.iloc[0]
    pairs: list[tuple[str, Cell]] = [
        (charts.overhead_label(c), f"{int(tot[c]):,} ({100.0 * int(tot[c]) / wire:.1f}%)")
        for c in _QUIC_ROW_CATEGORIES if int(tot[c])
    ]
    pairs.append(("QUIC bytes on the wire", f"{wire:,}"))
    g, gmax = _f(tot["goodput_ratio"]), _f(tot["goodput_max_ratio"])
    pairs.append(("QUIC goodput", "" if g is None else f"{100.0 * g:.1f}%"))
    if gmax is not None and g is not None and gmax > g:
        pairs.append((
            "QUIC goodput upper bound",
            f"{100.0 * gmax:.1f}% (undecrypted and unparsed bytes as payload)",
        ))
    out += ctx.pairs(pairs)
    # one column per connection (a row per connection would not fit the page): the
    # largest by wire bytes, in connection order
    shown = q.sort_values(["wire_bytes", "quic_connection"], ascending=[False, True])
    shown = shown.head(MAX_QUIC_OVERHEAD_COLUMNS).sort_values("quic_connection")
    recs = _records(shown)
    cats = [c for c in _QUIC_ROW_CATEGORIES if int(shown[c].sum())]

    def goodput(r: dict[str, Any]) -> str:
        g = _f(r["goodput_ratio"])
        return "" if g is None else f"{100.0 * g:.1f}%"

    rows: list[list[Cell]] = [
        ["client", *[_text(r["client"]) for r in recs]],
        ["server", *[_text(r["server"]) for r in recs]],
        ["protocol", *[_text(r["protocol"]) for r in recs]],
        ["UDP datagrams", *[int(r["packets"]) for r in recs]],
        ["bytes on the wire", *[int(r["wire_bytes"]) for r in recs]],
    ]
    for c in cats:
        row: list[Cell] = [charts.overhead_label(c)]
        row += [int(r[c]) for r in recs]
        rows.append(row)
    rows.append(["goodput", *[goodput(r) for r in recs]])
    if nq > len(recs):
        out += Markup("<p>{}</p>").format(
            f"Table: the {len(recs)} largest of {nq:,} QUIC connections by wire bytes "
            "(every one: pcaptools.analyses.overhead(cap, quic=True)).")
    return out + ctx.table(
        ["bytes", *[f"QUIC {int(r['quic_connection'])}" for r in recs]],
        rows, numeric=range(1, len(recs) + 1), wrap=(0,),
    )


def _heartbeat_rows(summ: pd.DataFrame) -> int:
    """Rows the heartbeat table has for ``summ``: one per ping sender, at least one each."""
    pings = summ[["client_pings", "server_pings"]].gt(0).astype("int64")
    senders = pings["client_pings"] + pings["server_pings"]
    return int(senders.clip(lower=1).sum())


def _f(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _counts_text(col: pd.Series, top: int | None = None) -> str:
    """``"TLS 1.3 (4), TLS 1.2 (1)"`` (largest first; ``top`` limits, saying how many more)."""
    vc = col.astype("string").dropna().value_counts()
    items = [f"{k} ({int(v):,})" for k, v in vc.items()]
    if top is not None and len(items) > top:
        items = [*items[:top], f"{len(items) - top:,} more"]
    return ", ".join(items)


def quic_section(ctx: ReportContext) -> Section | None:
    """QUIC and HTTP/3 (:func:`.quic_section.quic_parts`); left out without QUIC."""
    parts = quic_parts(ctx)
    return None if parts is None else Section("quic", "QUIC and HTTP/3", *parts)


def voice_section(ctx: ReportContext) -> Section | None:
    """Realtime voice (:func:`.voice_section.voice_parts`); left out without realtime events."""
    parts = voice_parts(ctx)
    return None if parts is None else Section("voice", "Realtime voice", *parts)


def slow_section(ctx: ReportContext) -> Section:
    """Why was it slow: :mod:`.slow_section` (the time split, the stalls, time-sequence)."""
    return Section("slow", _slow.TITLE, *_slow.slow_parts(ctx))


#: the report's sections, in page order. Append a builder to add a section.
SECTIONS: list[SectionBuilder] = [
    verdicts_section,
    capture_section,
    connections_section,
    timeline_section,
    irtt_section,
    retransmissions_section,
    tcp_flags_section,
    path_mtu_section,
    dns_section,
    tls_section,
    http_section,
    streaming_section,
    quic_section,
    slow_section,
    heartbeats_section,
    voice_section,
    disconnects_section,
    overhead_section,
    coverage_section,
    warnings_section,
]


# -- rendering ------------------------------------------------------------------------------------


def render_report(
    cap: Capture,
    *,
    title: str | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_timeline_bars: int = MAX_TIMELINE_BARS,
    sections: Sequence[SectionBuilder] | None = None,
    page_rows: int = PAGE_ROWS,
    facts: dict[str, Any] | None = None,
) -> str:
    """The report of ``cap`` as one HTML document (str). A builder that raises does not
    lose the report: its section says it failed and why. ``max_table_rows``: rows embedded
    per table (the rest are left out, and the table says so); ``page_rows``: rows per page
    of the paged tables when the page opens. A subset (:meth:`Capture.subset`) says so in
    the header. ``facts``: a dict to fill with :func:`index_facts` of the report."""
    env = _env()
    # (the analyses' large transient arrays given back when freed, as during a load: _memory)
    with large_blocks_mapped():
        built, ctx = build_sections(
            cap,
            sections=sections,
            max_table_rows=max_table_rows,
            max_timeline_bars=max_timeline_bars,
            page_rows=page_rows,
        )
        head = ctx.head
        sub = subset_info(cap)
        if facts is not None:
            facts.update(index_facts(ctx))
        page = env.get_template("report.html.j2").render(
            title=title or f"{head['file']}{' (subset)' if sub else ''}: pcap-report",
            head=head,
            sections=built,
            subset=sub,
            plotly_js=_plotly_js() if ctx.figures else None,
            version=__version__,
        )
    del built, ctx
    trim()
    return page


def subset_info(cap: Capture) -> dict[str, Any] | None:
    """What the header says about a subset (``summary.extra["subset"]``, set by
    :func:`pcaptools.select.subset`): ``{"text", "display_filter", "of_frames"}``; None for a
    whole capture."""
    extra = cap.summary.extra
    text = extra.get("subset")
    if not isinstance(text, str):
        return None
    of = extra.get("subset_of_frames")
    flt = extra.get("subset_display_filter")
    return {
        "text": text,
        "display_filter": flt if isinstance(flt, str) and len(flt) <= 400 else None,
        "of_frames": int(of) if isinstance(of, int) else int(cap.summary.frames),
    }


def build_sections(
    cap: Capture,
    *,
    sections: Sequence[SectionBuilder] | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_timeline_bars: int = MAX_TIMELINE_BARS,
    id_prefix: str = "",
    page_rows: int = PAGE_ROWS,
) -> tuple[list[Section], ReportContext]:
    """Run the section builders over ``cap``; returns the sections and the context they used
    (``ctx.figures`` says whether plotly.js is needed). ``id_prefix`` is put before every
    section and figure id, so that two captures can share one page. The time origin of the
    charts is the capture's first packet, also for a subset cut to a time window (so that
    its seconds are those of ``--start``/``--end`` and of the whole capture's report)."""
    env = _env()
    s = cap.summary
    lat = stream_latency(cap)
    head = headline(cap, latency=lat)
    t0 = s.first_ts_ns if s.first_ts_ns is not None else 0
    origin = s.extra.get("subset_origin_ts_ns")
    if isinstance(origin, int) and origin <= t0:
        t0 = origin
    span = (s.last_ts_ns - t0) / 1e9 if s.last_ts_ns is not None else 0.0
    ctx = ReportContext(
        cap,
        head,
        t0,
        float(max(span, 0.0)),
        max_table_rows,
        max_timeline_bars,
        page_rows=page_rows,
        _parts=env.get_template("_parts.html.j2").module,
        id_prefix=id_prefix,
    )
    ctx._cache["latency"] = lat
    built: list[Section] = []
    for builder in SECTIONS if sections is None else sections:
        try:
            sec = builder(ctx)
        except Exception as exc:  # a bug in one section must not cost the whole report
            name = getattr(builder, "__name__", "section").removesuffix("_section")
            sec = Section(
                name,
                name.replace("_", " ").capitalize(),
                None,
                f"This section failed: {type(exc).__name__}: {exc}",
            )
        if sec is None:  # not for this capture
            continue
        if id_prefix:
            sec = Section(id_prefix + sec.id, sec.title, sec.html, sec.note)
        built.append(sec)
    return built, ctx


def write_report(
    cap: Capture,
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_timeline_bars: int = MAX_TIMELINE_BARS,
    page_rows: int = PAGE_ROWS,
) -> dict[str, Any]:
    """Write the report of ``cap`` to ``path`` (UTF-8), atomically. Raises OSError if it cannot
    be written, :class:`~pcaptools.errors.OutputPathError` (nothing written) if ``path`` is
    the capture file or the key log ``cap`` was loaded from. Returns :func:`index_facts` of the
    report (what a directory index shows of it)."""
    refuse_inputs(path, inputs_of(cap.summary))
    facts: dict[str, Any] = {}
    text = render_report(
        cap, title=title, max_table_rows=max_table_rows, max_timeline_bars=max_timeline_bars,
        page_rows=page_rows, facts=facts,
    )
    safe_write_text(path, text)
    return facts


def index_facts(ctx: ReportContext) -> dict[str, Any]:
    """The per-capture columns of a directory index (``pcap-report DIR``), from the analyses
    the report ran (JSON values; None where the capture has nothing to say):

    - ``ttft_median_ms``: median time to first token of the streamed responses
    - ``tls_sessions`` / ``tls_decrypted``: TLS sessions, and those decrypted
    - ``unclean_connections``: connections that did not end cleanly (rows of
      ``disconnects(cap)``), of ``tcp_connections``
    - ``heartbeat_pings`` / ``missed_heartbeats``: pings of every mechanism, and those
      missed (no pong although the connection lived on 2 s or more; heartbeat_summary)
    """
    h = ctx.head
    hb = ctx.heartbeats()
    summ = ctx.heartbeat_summary()
    missed = (int(summ["client_missed"].sum()) + int(summ["server_missed"].sum())
              if len(summ) else 0)
    n_tls = int(h["tls_sessions"])
    return {
        "ttft_median_ms": h["ttft_ms"]["median"],
        "tls_sessions": n_tls,
        "tls_decrypted": int(h["tls_decrypt_status"].get("decrypted", 0)) if n_tls else None,
        "unclean_connections": len(ctx.disconnects()) if len(ctx.cap.connections) else None,
        "heartbeat_pings": len(hb),
        "missed_heartbeats": missed if len(hb) else None,
    }


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pcaptools.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["count_of"] = count_of
    return env


def count_of(n: int, singular: str, plural: str | None = None) -> str:
    """``"1 warning"``, ``"2 warnings"``, ``"1,204 frames"``: a count and its noun."""
    return f"{int(n):,} {singular if int(n) == 1 else (plural or singular + 's')}"


#: the plotly.js partial bundle the page inlines (traces: bar, pie, scatter)
PLOTLY_BUNDLE = "vendor/plotly-basic.min.js"
_FIG_CONFIG = {"displaylogo": False, "responsive": True}


def plotly_js() -> str:
    """The plotly.js code the report inlines (the partial bundle :data:`PLOTLY_BUNDLE`)."""
    return str(_plotly_js())


@functools.cache
def _plotly_js() -> Markup:
    from importlib.resources import files

    js = (files("pcaptools.report") / PLOTLY_BUNDLE).read_text(encoding="utf-8")
    # inlined in a <script> element: it must not close it
    assert "</script" not in js.lower()
    return Markup(js)


def _js_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Markup):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _js_value(obj: object) -> str:
    """``obj`` as a JavaScript literal inside a ``<script>`` element: JSON (NaN as ``NaN``,
    which plotly.js draws as a gap) with ``<``, ``>`` and ``&`` written as \\u escapes, so
    that no string from the capture can end or change the element."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=_js_default)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# -- small formatting helpers ------------------------------------------------------------

#: the tshark field of each tcp_events kind that has one (all but ``resent``)
_TSHARK_FLAG = {k: f"tcp.analysis.{k}" for k in KIND_NAMES}


def _cell(v: Cell) -> Cell:
    if isinstance(v, Markup) or v is None:
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return "" if math.isnan(v) else num_text(v)
    return str(v)


#: a cell that does not apply (a reused connection's DNS, connect and TLS time), set apart
#: from an empty cell (unknown: the capture does not show it)
NOT_APPLICABLE = "\u2013"


def num_text(v: float) -> str:
    """A measurement (milliseconds mostly) with the precision that matters: ``1,204``,
    ``12.4``, ``0.042``, ``0``; as :func:`~pcaptools.analyses.summary.fmt_ms` without the
    unit."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.1f}"
    return f"{v:.3g}"


_FILTER_CODE = re.compile(r'<code class="filter">([^<]*)</code>')


def _json_cell(c: Cell) -> str | dict[str, str]:
    """A formatted cell for the page's table script: text as a string (set with textContent),
    a Wireshark filter as ``{"f": text}``, other Markup as ``{"h": html}`` (already escaped)."""
    if c is None:
        return ""
    if isinstance(c, Markup):
        m = _FILTER_CODE.fullmatch(str(c))
        if m is not None:
            return {"f": html.unescape(m.group(1))}
        return {"h": str(c)}
    return str(c)


def _json_block(obj: object) -> Markup:
    """``obj`` as JSON that can sit inside ``<script type="application/json">``: ``<``, ``>``
    and ``&`` are written as \\u escapes, so no string (``</script>``, ``<!--``) can end or
    change the element; JSON.parse gives the strings back unchanged. ASCII only (non-ASCII
    as \\u escapes), so that a lone surrogate from a damaged string cannot fail the write."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of Python values (NA stays pd.NA), as ``df.to_dict("records")`` gives
    them, column by column (``Series.tolist``: several times faster on small tables)."""
    cols = [str(c) for c in df.columns]
    values = [df.iloc[:, i].tolist() for i in range(len(cols))]
    return [dict(zip(cols, row, strict=True)) for row in zip(*values, strict=True)]


def _text(v: Any) -> str:
    """str(v), or "" for None / NA / NaN."""
    return "" if v is None or pd.isna(v) else str(v)


def _end_text(reason: object, by: object, frame: object) -> str:
    r = _text(reason)
    if not r:
        return ""
    if r == "open_at_eof":
        return "open at end of capture"
    out = r.replace("_", "-")
    if _text(by):
        out += f" by {by}"
    if _text(frame):
        out += f", frame {int(frame)}"  # type: ignore[call-overload]
    return out


def _ts_text(iso: str | None) -> str:
    if iso is None:
        return "-"
    return iso.replace("T", " ").replace("+00:00", " UTC")
