"""Plotly figures of the report, and the small data preparations behind them.

Each ``*_figure`` function returns a :class:`Figure` (plain plotly.js traces and layout: the
report draws them with a partial plotly.js bundle, see :mod:`.html`), or ``None`` when there
is nothing to draw; the preparation functions (``timeline_rows``, ``retransmission_bins``)
are separate so tests can check the numbers without parsing plotly JSON. Times on every x
axis are seconds since the first packet of the capture, as Wireshark shows them by default.

Every string that comes from the capture (addresses today; SNI, paths later) is passed
through :func:`html.escape` before it reaches plotly: plotly.js renders a subset of HTML
in hover labels and legend names.

Figures are plain dicts rather than :mod:`plotly.graph_objects`: building and validating
graph objects cost about 0.3 s per figure (1-2 s per report) and the partial bundle only
needs the JSON. :class:`Figure` keeps the attribute access of graph objects for reading
(``fig.data[0].x``, ``fig.layout.barmode``). Counts are drawn as bars computed here (also
the histograms), so the page needs only plotly.js's bar and scatter traces.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analyses.summary import fmt_ms

#: colour per Zeek conn_state: green for clean, blue for open, red/orange for resets and rejects
CONN_STATE_COLOURS: dict[str, str] = {
    "SF": "#2ca02c",
    "S1": "#1f77b4",
    "S2": "#17becf",
    "S3": "#9edae5",
    "S0": "#7f7f7f",
    "REJ": "#d62728",
    "RSTO": "#ff7f0e",
    "RSTR": "#e377c2",
    "RSTOS0": "#8c564b",
    "RSTRH": "#c49c94",
    "SH": "#bcbd22",
    "SHR": "#dbdb8d",
    "OTH": "#9467bd",
}

#: colour per retransmission kind
RETRANSMISSION_COLOURS: dict[str, str] = {
    "retransmission": "#1f77b4",
    "fast_retransmission": "#ff7f0e",
    "spurious_retransmission": "#7f7f7f",
    # the labels of tcp_losses rows (Retransmissions section)
    "lost before capture": "#d62728",
    "lost after capture": "#ff7f0e",
    "lost": "#9467bd",
    "spurious resend": "#7f7f7f",
}

_AXIS = {"gridcolor": "#ebf0f8", "linecolor": "#ebf0f8", "zerolinecolor": "#ebf0f8",
         "automargin": True, "ticks": "", "zerolinewidth": 2}

#: the layout every figure starts from (the look of plotly's plotly_white template)
_LAYOUT: dict[str, Any] = {
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
    "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
    "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12,
             "color": "#2a3f5f"},
    "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    "hoverlabel": {"align": "left"},
    "hovermode": "closest",
    "xaxis": dict(_AXIS),
    "yaxis": dict(_AXIS),
}

#: the plotly.js trace types the figures use: the partial bundle must have them
TRACE_TYPES = frozenset({"bar", "scatter"})


class Props(dict[str, Any]):
    """A plotly property dict read like plotly's graph objects: ``p.x`` is ``p["x"]``
    (nested dicts as Props, lists of dicts as lists of Props), an unset property is None."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _props(self.get(name))


def _props(v: Any) -> Any:
    if isinstance(v, dict) and not isinstance(v, Props):
        return Props(v)
    if isinstance(v, list) and v and isinstance(v[0], dict):
        return [_props(x) for x in v]
    return v


def _merge(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    """Deep-merge ``more`` into ``into`` (dicts merge, everything else replaces)."""
    for k, v in more.items():
        cur = into.get(k)
        if isinstance(v, Mapping) and isinstance(cur, dict):
            _merge(cur, v)
        else:
            into[k] = dict(v) if isinstance(v, Mapping) else v


@dataclass(slots=True)
class Figure:
    """One chart: plotly.js traces (``{"type": "bar", ...}``) and a layout."""

    data: list[Props] = field(default_factory=list)
    layout: Props = field(default_factory=lambda: Props(_copy(_LAYOUT)))

    def add_trace(self, trace: Mapping[str, Any]) -> None:
        assert trace["type"] in TRACE_TYPES, trace["type"]
        self.data.append(Props(trace))

    def update_layout(self, **kw: Any) -> None:
        for k, v in kw.items():  # plotly.js 3+: a title is {"text": ...}, not a string
            if k.endswith("axis") and isinstance(v, Mapping) and isinstance(v.get("title"), str):
                kw[k] = {**v, "title": {"text": v["title"]}}
        _merge(self.layout, kw)

    def add_vline(self, x: float, *, line: Mapping[str, Any], annotation_text: str,
                  annotation_position: str = "top right") -> None:
        """A vertical line across the plot at ``x`` with a label at its top, as plotly's
        ``Figure.add_vline``."""
        self.layout.setdefault("shapes", []).append({
            "type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1,
            "yref": "y domain", "line": dict(line)})
        right = annotation_position.endswith("right")
        self.layout.setdefault("annotations", []).append({
            "x": x, "xref": "x", "y": 1, "yref": "y domain", "text": annotation_text,
            "showarrow": False, "xanchor": "left" if right else "right", "yanchor": "top"})

    def to_dict(self) -> dict[str, Any]:
        return {"data": [dict(t) for t in self.data], "layout": dict(self.layout)}


def _copy(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in d.items()}


def count_axis(title: str, max_count: float) -> dict[str, Any]:
    """A y axis of counts: integer ticks only (a step of 1 up to 10, then plotly's own,
    which are integers from there), starting at 0."""
    axis: dict[str, Any] = {"title": title, "rangemode": "tozero", "tickformat": ",d"}
    if max_count <= 10:
        axis |= {"dtick": 1, "tick0": 0}
    return axis


def histogram_bars(v: np.ndarray, start: float, size: float) -> tuple[np.ndarray, np.ndarray]:
    """(bin centres, counts) of ``v`` in bins of ``size`` from ``start``; empty bins left out.
    A value on a bin edge goes to the bin it starts (as plotly's histograms count)."""
    idx = np.floor((v - start) / size + 1e-9).astype(np.int64)
    bins, counts = np.unique(idx, return_counts=True)
    centres = np.round(start + (bins + 0.5) * size, 12)
    return centres, counts.astype(np.int64)


def endpoint(addr: str, port: int) -> str:
    """``10.0.0.1:443`` or ``[2001:db8::1]:443`` (unescaped text)."""
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def ns(col: pd.Series) -> np.ndarray:
    """A ``datetime64[ns, UTC]`` column as int64 nanoseconds (NaT becomes INT64_MIN)."""
    return col.to_numpy(dtype="datetime64[ns]").view(np.int64)


# -- connections timeline ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timeline:
    rows: pd.DataFrame
    """connections to draw (a subset when downsampled), ordered by tcp_stream"""
    total: int
    """connections in the capture"""

    @property
    def downsampled(self) -> bool:
        return len(self.rows) < self.total


def timeline_rows(conns: pd.DataFrame, max_bars: int) -> Timeline:
    """The connections the timeline draws: all of them up to ``max_bars``; beyond, the
    connections that did not end cleanly (conn_state other than SF) first, then the longest,
    ``max_bars`` in all."""
    n = len(conns)
    if n <= max_bars:
        return Timeline(conns.sort_values("tcp_stream"), n)
    unusual = conns["conn_state"].astype("string").ne("SF").fillna(True)
    ranked = conns.assign(_u=unusual.astype(int)).sort_values(
        ["_u", "duration_ms", "tcp_stream"], ascending=[False, False, True]
    )
    keep = ranked.head(max_bars).drop(columns="_u").sort_values("tcp_stream")
    return Timeline(keep, n)


def timeline_figure(tl: Timeline, t0_ns: int, span_s: float) -> Figure | None:
    """One horizontal bar per connection from its first to its last packet, coloured by
    conn_state, y = tcp.stream (stream 0 at the top). Bars shorter than 0.3% of the capture
    are drawn at that width so single-packet connections stay visible (hover shows the
    real duration)."""
    conns = tl.rows
    if len(conns) == 0:
        return None
    start = (ns(conns["first_ts"]) - t0_ns) / 1e9
    dur = conns["duration_ms"].to_numpy(dtype=np.float64) / 1e3
    min_w = max(span_s, 1e-6) * 0.003
    width = np.maximum(dur, min_w)
    records: list[dict[str, Any]] = conns.to_dict("records")  # type: ignore[assignment]
    hover = [
        f"tcp.stream {int(r['tcp_stream'])}<br>"
        f"{html.escape(endpoint(r['client_addr'], int(r['client_port'])))} → "
        f"{html.escape(endpoint(r['server_addr'], int(r['server_port'])))}<br>"
        f"{html.escape(str(r['conn_state']))} {html.escape(str(r['history']))}<br>"
        f"{s:.6f} s + {d * 1e3:.3f} ms, "
        f"frames {int(r['first_frame'])} to {int(r['last_frame'])}"
        for r, s, d in zip(records, start, dur, strict=True)
    ]
    states = conns["conn_state"].astype("string").fillna("?").to_numpy()
    fig = Figure()
    order = [s for s in CONN_STATE_COLOURS if s in set(states)] + sorted(
        set(states) - set(CONN_STATE_COLOURS)
    )
    streams = conns["tcp_stream"].to_numpy()
    hover_arr = np.asarray(hover, dtype=object)
    for state in order:
        m = states == state
        fig.add_trace({
            "type": "bar",
            "name": html.escape(state),
            "orientation": "h",
            "y": streams[m],
            "x": width[m],
            "base": start[m],
            "marker": {"color": CONN_STATE_COLOURS.get(state, "#333333")},
            "hovertext": hover_arr[m],
            "hoverinfo": "text",
            "width": 0.7,
        })
    n = len(conns)
    height = int(min(900, max(170, 22 * n + 130)))
    yaxis: dict[str, object] = {"title": "tcp.stream", "autorange": "reversed", "zeroline": False,
                                "tickformat": "d"}
    if n <= 40:
        yaxis |= {"tickmode": "array", "tickvals": streams.tolist()}
    fig.update_layout(
        height=height,
        barmode="overlay",
        showlegend=True,
        xaxis={"title": "seconds since the first packet", "rangemode": "tozero"},
        yaxis=yaxis,
    )
    return fig


# -- handshake RTT ------------------------------------------------------------------------------


def irtt_figure(irtt_ms: pd.Series) -> Figure | None:
    """Histogram of tshark's tcp.analysis.initial_rtt (ms), with the median and p95 marked."""
    v = irtt_ms.dropna().to_numpy(dtype=np.float64)
    if v.size == 0:
        return None
    start, size = histogram_bins(v)
    centres, counts = histogram_bars(v, start, size)
    fig = Figure()
    fig.add_trace({
        "type": "bar",
        "x": centres,
        "y": counts,
        "width": size,
        "marker": {"color": "#1f77b4"},
        "name": "handshakes",
        "customdata": np.round(centres - size / 2, 12),
        "hovertemplate": f"%{{customdata}} to +{size:g} ms: %{{y}} connections<extra></extra>",
    })
    med, p95 = float(np.median(v)), float(np.percentile(v, 95))
    fig.add_vline(
        x=med,
        line={"color": "#2ca02c", "dash": "dash"},
        annotation_text=f"median {med:.3g} ms",
        annotation_position="top left",
    )
    if v.size > 1:
        fig.add_vline(
            x=p95,
            line={"color": "#d62728", "dash": "dot"},
            annotation_text=f"p95 {p95:.3g} ms",
            annotation_position="top right",
        )
    xaxis: dict[str, object] = {"title": "initial RTT (ms)"}
    if v.min() == v.max():  # one bin: show it in context rather than across the whole width
        xaxis["range"] = [0, 2 * float(v.max())] if v.max() > 0 else [-1, 1]
    fig.update_layout(
        height=300,
        showlegend=False,
        bargap=0.05,
        xaxis=xaxis,
        yaxis=count_axis("connections", int(counts.max())),
    )
    return fig


def histogram_bins(v: np.ndarray, target: int = 30) -> tuple[float, float]:
    """(start, size) of about ``target`` histogram bins over ``v`` with a 1/2/5 x 10^k size."""
    lo, hi = float(v.min()), float(v.max())
    raw = (hi - lo) / target if hi > lo else max(abs(lo) * 0.05, 1e-3)
    exp = 10.0 ** math.floor(math.log10(raw))
    size = float(f"{next(m * exp for m in (1, 2, 5, 10) if m * exp >= raw):.12g}")
    if hi == lo:  # one value: centre its bar on it
        return float(f"{lo - size / 2:.12g}"), size
    return float(f"{math.floor(lo / size) * size:.12g}"), size


# -- retransmissions over time -------------------------------------------------------------------

_BIN_LADDER_S = (0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0, 86400.0)


def bin_width_s(span_s: float, max_bins: int = 1200) -> float:
    """Bin width for a per-interval chart: 1 s when the capture is 10 s to ``max_bins`` s
    long; 0.1 s / 0.01 s / 1 ms for shorter captures (so there are at least ~10 bins);
    10 s, 1 min, 10 min, 1 h, 1 day for longer ones (at most ``max_bins`` bins)."""
    if span_s < 10:
        for w in (0.1, 0.01, 0.001):
            if span_s >= 10 * w:
                return w
        return 0.001
    for w in _BIN_LADDER_S[3:]:
        if span_s / w <= max_bins:
            return w
    return _BIN_LADDER_S[-1]


def retransmission_bins(retrans: pd.DataFrame, t0_ns: int, width_s: float) -> pd.DataFrame:
    """Retransmitted segments per time bin and kind: columns ``bin_s`` (start of the bin, seconds
    since the first packet), ``kind``, ``segments``; only non-empty bins."""
    if len(retrans) == 0:
        return pd.DataFrame(
            {
                "bin_s": pd.Series(dtype="float64"),
                "kind": pd.Series(dtype="string"),
                "segments": pd.Series(dtype="int64"),
            }
        )
    rel = (ns(retrans["ts"]) - t0_ns) / 1e9
    b = np.floor(rel / width_s + 1e-9).astype(np.int64)
    df = pd.DataFrame({"b": b, "kind": retrans["kind"].astype("string").to_numpy()})
    g = df.groupby(["b", "kind"], sort=True).size().reset_index(name="segments")
    return pd.DataFrame(
        {
            "bin_s": np.round(g["b"].to_numpy(dtype=np.float64) * width_s, 6),
            "kind": g["kind"].astype("string"),
            "segments": g["segments"].astype("int64"),
        }
    )


def retransmissions_figure(bins: pd.DataFrame, width_s: float, span_s: float) -> Figure | None:
    """Stacked bars: retransmitted segments per bin, one colour per kind."""
    if len(bins) == 0:
        return None
    fig = Figure()
    kinds = [k for k in RETRANSMISSION_COLOURS if k in set(bins["kind"])] + sorted(
        set(bins["kind"]) - set(RETRANSMISSION_COLOURS)
    )
    unit = unit_label(width_s)
    for kind in kinds:
        sub = bins[bins["kind"] == kind]
        fig.add_trace({
            "type": "bar",
            "name": html.escape(kind.replace("_", " ")),
            "x": sub["bin_s"].to_numpy(),
            "y": sub["segments"].to_numpy(),
            "width": width_s,
            "offset": 0,
            "marker": {"color": RETRANSMISSION_COLOURS.get(kind, "#333333")},
            "hovertemplate": (
                f"%{{y}} segments in [%{{x}} s, +{unit})<extra>{html.escape(kind)}</extra>"
            ),
        })
    peak = int(bins.groupby("bin_s")["segments"].sum().max())
    fig.update_layout(
        height=320,
        barmode="stack",
        bargap=0,
        xaxis={
            "title": "seconds since the first packet",
            "range": [0, max(span_s, width_s) * 1.01],
        },
        yaxis=count_axis(f"segments per {unit}", peak),
    )
    return fig


def unit_label(width_s: float) -> str:
    """``1 s``, ``100 ms``, ``10 min``: how the report names a bin width."""
    if width_s < 1:
        return f"{width_s * 1000:g} ms"
    if width_s < 60:
        return f"{width_s:g} s"
    if width_s < 3600:
        return f"{width_s / 60:g} min"
    if width_s < 86400:
        return f"{width_s / 3600:g} h"
    return f"{width_s / 86400:g} d"


# -- HTTP: request waterfall, latency distributions, token cadence -------------------------------

#: waterfall phases in drawing order: (column prefix, legend name, colour)
WATERFALL_PHASES: tuple[tuple[str, str, str], ...] = (
    ("dns", "DNS lookup", "#17becf"),
    ("connect", "TCP connect", "#ff7f0e"),
    ("tls", "TLS handshake", "#9467bd"),
    ("send", "request sent", "#7f7f7f"),
    ("wait", "waiting (TTFB)", "#2ca02c"),
    ("download", "download / stream", "#1f77b4"),
    ("cut", "cut short (reset or closed)", "#d62728"),
    ("open", "still open at capture end", "#c7c7c7"),
)

#: why a response was cut short, by stream_latency end_reason (TCP RST/FIN named apart)
_CUT_REASONS = {
    "rst_stream": "reset by RST_STREAM",
    "goaway": "refused by GOAWAY",
    "connection_closed": "the connection closed",
    "desynced": "bytes lost or unparsable: not followed to its end",
    "evicted": "given up (too many outstanding)",
}


@dataclass(frozen=True, slots=True)
class Waterfall:
    rows: pd.DataFrame
    """one row per request drawn: ``label``, ``hover`` and ``<phase>_start`` / ``<phase>_ms``
    (seconds since the first packet, milliseconds; NaN when the phase does not apply)"""
    total: int
    """requests in the capture"""

    @property
    def truncated(self) -> bool:
        return len(self.rows) < self.total


def _rel_s(col: pd.Series, t0_ns: int) -> np.ndarray:
    """Seconds since ``t0_ns`` (subtracted in integer ns: no float rounding); NaT -> NaN."""
    v = ns(col)
    missing = v == np.iinfo(np.int64).min
    out = (np.where(missing, t0_ns, v) - t0_ns) / 1e9
    out[missing] = np.nan
    return out


def waterfall_rows(lat: pd.DataFrame, t0_ns: int, end_ns: int, max_rows: int,
                   conns: pd.DataFrame | None = None) -> Waterfall:
    """The requests a waterfall draws (the first ``max_rows`` by connection start, tcp.stream,
    then request time) and the start/length of each phase. A response still open when the
    capture ended (end_reason open_at_eof) gets an ``open`` bar up to ``end_ns``; one cut
    short (RST_STREAM, GOAWAY, the connection reset or closed, desynced) a ``cut`` bar from
    its first byte (or the request, without a response) to its end, or to the end of its
    connection (``conns``: the connections table, for that time and for who reset it)."""
    n = len(lat)
    df = lat.assign(
        _c=lat["connection_start_ts"].fillna(lat["request_ts"]),
    ).sort_values(["_c", "tcp_stream", "request_ts"], kind="stable").head(max_rows)
    req = _rel_s(df["request_ts"], t0_ns)
    sent = _rel_s(df["request_sent_ts"], t0_ns)
    first = _rel_s(df["response_start_ts"], t0_ns)
    end = _rel_s(df["end_ts"], t0_ns)
    cap_end = (end_ns - t0_ns) / 1e9
    out = pd.DataFrame(index=df.index)
    out["dns_start"] = _rel_s(df["dns_start_ts"], t0_ns)
    out["dns_ms"] = np.where(np.isnan(out["dns_start"]), np.nan, df["dns_ms"])
    first_req = df["reused"].eq(False).fillna(False).to_numpy(bool)
    out["connect_start"] = np.where(first_req, _rel_s(df["connection_start_ts"], t0_ns), np.nan)
    out["connect_ms"] = np.where(np.isnan(out["connect_start"]), np.nan, df["connect_ms"])
    out["tls_start"] = _rel_s(df["tls_start_ts"], t0_ns)
    out["tls_ms"] = np.where(np.isnan(out["tls_start"]), np.nan, df["tls_ms"])
    out["send_start"] = req
    out["send_ms"] = (sent - req) * 1e3
    out["wait_start"] = sent
    out["wait_ms"] = (first - sent) * 1e3
    out["download_start"] = first
    out["download_ms"] = (end - first) * 1e3
    reason = df["end_reason"].astype(object).where(df["end_reason"].notna(), None).tolist()
    complete = df["complete"].fillna(False).to_numpy(bool)
    cut = ~complete & np.asarray([x in _CUT_REASONS for x in reason], dtype=bool)
    conn_end = np.full(len(df), np.nan)
    why_conn: list[str] = [""] * len(df)
    if conns is not None and len(conns):
        cend = conns.set_index("tcp_stream")
        ends = dict(zip(cend.index.tolist(), _rel_s(cend["last_ts"], t0_ns).tolist(),
                        strict=True))
        how = {int(t): _conn_end_text(r, b, f) for t, r, b, f in zip(
            cend.index.tolist(), cend["end_reason"].astype(object).tolist(),
            cend["end_by"].astype(object).tolist(), cend["end_frame"].tolist(), strict=True)}
        # (HTTP/3 rows have no tcp.stream: no TCP connection end applies to them)
        streams = [-1 if pd.isna(t) else int(t) for t in df["tcp_stream"].tolist()]
        conn_end = np.asarray([ends.get(t, np.nan) for t in streams], dtype=np.float64)
        why_conn = [how.get(t, "") for t in streams]
    cut_from = np.where(np.isnan(first), sent, first)
    cut_to = np.where(np.isnan(end), conn_end, end)
    cut &= ~np.isnan(cut_from) & ~np.isnan(cut_to)
    out["download_ms"] = np.where(cut, np.nan, out["download_ms"])
    out["cut_start"] = np.where(cut, cut_from, np.nan)
    out["cut_ms"] = np.where(cut, (cut_to - cut_from) * 1e3, np.nan)
    still_open = np.isnan(end) & ~np.isnan(first) & ~cut
    out["open_start"] = np.where(still_open, first, np.nan)
    out["open_ms"] = np.where(still_open, (cap_end - first) * 1e3, np.nan)
    labels, hovers = [], []
    for i, r in enumerate(df.to_dict("records")):
        rid = _request_id(r)
        path = "" if pd.isna(r["path"]) else str(r["path"])
        method = "" if pd.isna(r["method"]) else str(r["method"])
        short = path if len(path) <= 48 else path[:45] + "..."
        labels.append(html.escape(f"{_conn_id(r)} {rid} {method} {short}"))
        status = "" if pd.isna(r["status"]) else f" → {int(r['status'])}"
        parts = [f"{name} {r[col]:.1f} ms" for col, name in (
            ("dns_ms", "DNS"), ("connect_ms", "connect"), ("tls_ms", "TLS"),
            ("ttfb_ms", "TTFB"), ("ttft_ms", "TTFT"), ("total_ms", "total"))
            if not pd.isna(r[col]) and (r[col] or col in ("ttfb_ms", "total_ms"))]
        ended = ""
        if cut[i]:
            why = _CUT_REASONS[str(reason[i])]
            if reason[i] == "connection_closed" and why_conn[i]:
                why = why_conn[i]
            ended = f"<br>cut short: {html.escape(why)}"
        elif still_open[i]:
            ended = "<br>still open when the capture ended"
        hovers.append(
            f"{_conn_name(r)} {html.escape(rid)} "
            f"({html.escape(str(r['protocol']))})<br>"
            f"{html.escape(method)} {html.escape(path[:200])}{status}<br>" + ", ".join(parts)
            + ended
        )
    out["label"] = labels
    out["hover"] = hovers
    return Waterfall(out.reset_index(drop=True), n)


def _conn_end_text(reason: object, by: object, frame: object) -> str:
    """How a connection ended, for a response it cut short: ``"TCP RST from the server
    (frame 26)"``; "" when it did not end by RST or FIN."""
    r = "" if reason is None or pd.isna(reason) else str(reason)  # type: ignore[call-overload]
    who = "" if by is None or pd.isna(by) else f" from the {by}"  # type: ignore[call-overload]
    at = "" if frame is None or pd.isna(frame) else f" (frame {int(frame)})"  # type: ignore
    if r == "rst":
        return f"TCP RST{who}{at}"
    if r in ("fin", "half_closed"):
        return f"the connection was closed (FIN{who}{at})"
    return ""


def waterfall_figure(wf: Waterfall) -> Figure | None:
    """A browser-style network panel: one horizontal row per request (grouped by connection),
    stacked phase bars on a time axis of seconds since the first packet."""
    rows = wf.rows
    if len(rows) == 0:
        return None
    fig = Figure()
    labels = rows["label"].to_numpy(dtype=object)
    hover = rows["hover"].to_numpy(dtype=object)
    for col, name, colour in WATERFALL_PHASES:
        start = rows[f"{col}_start"].to_numpy(np.float64)
        width = rows[f"{col}_ms"].to_numpy(np.float64) / 1e3
        m = ~(np.isnan(start) | np.isnan(width)) & (width >= 0)
        if not m.any():
            continue
        fig.add_trace({
            "type": "bar", "name": name, "orientation": "h", "y": labels[m], "x": width[m],
            "base": start[m], "marker": {"color": colour}, "hovertext": hover[m],
            "hoverinfo": "text", "width": 0.6,
        })
    n = len(rows)
    fig.update_layout(
        height=int(min(1400, max(200, 22 * n + 130))),
        barmode="overlay",
        xaxis={"title": "seconds since the first packet"},
        yaxis={"autorange": "reversed", "type": "category", "categoryorder": "array",
               "categoryarray": list(labels), "automargin": True},
    )
    return fig


def ms_histogram_figure(series: dict[str, pd.Series], xtitle: str, ytitle: str) -> Figure | None:
    """Overlaid histograms of millisecond values (one trace per named series, NaN dropped),
    sharing one set of 1/2/5 x 10^k bins, with each series' median marked."""
    data = {k: v.dropna().to_numpy(dtype=np.float64) for k, v in series.items()}
    data = {k: v for k, v in data.items() if v.size}
    if not data:
        return None
    allv = np.concatenate(list(data.values()))
    start, size = histogram_bins(allv)
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
    fig = Figure()
    peak = 0
    for (name, v), colour in zip(data.items(), colours, strict=False):
        centres, counts = histogram_bars(v, start, size)
        peak = max(peak, int(counts.max()))
        fig.add_trace({
            "type": "bar", "x": centres, "y": counts, "width": size, "name": html.escape(name),
            "marker": {"color": colour}, "opacity": 0.65 if len(data) > 1 else 1.0,
            "customdata": np.round(centres - size / 2, 12),
            "hovertemplate": (f"%{{customdata}} to +{size:g} ms: %{{y}}"
                              f"<extra>{html.escape(name)}</extra>"),
        })
        med = float(np.median(v))
        fig.add_vline(x=med, line={"color": colour, "dash": "dash"},
                      annotation_text=f"{html.escape(name)} median {fmt_ms(med)}",
                      annotation_position="top right" if colour == colours[0] else "top left")
    xaxis: dict[str, object] = {"title": xtitle}
    if allv.min() == allv.max():
        xaxis["range"] = [0, 2 * float(allv.max())] if allv.max() > 0 else [-1, 1]
    fig.update_layout(height=320, barmode="overlay", bargap=0.05,
                      showlegend=len(data) > 1, xaxis=xaxis, yaxis=count_axis(ytitle, peak))
    return fig


def token_cadence_rows(
    lat: pd.DataFrame, sse_events: pd.DataFrame, max_streams: int,
    http3_sse_events: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, int]:
    """Points of the token cadence chart: for each of the first ``max_streams`` responses with
    token events (by request time), one row per token event: ``key`` (label), ``t_ms`` (since
    the request was sent) and ``tokens`` (cumulative count). Also returns the number of
    responses with tokens."""
    streamed = lat[lat["token_events"] > 0].sort_values("request_ts", kind="stable")
    total = len(streamed)
    streamed = streamed.head(max_streams)
    # (the token events' columns read below, not a copy of every column)
    text = sse_events["delta_text"].fillna("").astype("string")
    ev = sse_events[["tcp_stream", "stream_id", "request_index", "index", "ts"]][
        text.str.len().gt(0).fillna(False)]
    ev3 = http3_sse_events
    if ev3 is not None:
        ev3 = ev3[["quic_connection", "stream_id", "index", "ts"]][
            ev3["delta_text"].fillna("").astype("string").str.len().gt(0).fillna(False)]
    parts = []
    for r in streamed.to_dict("records"):
        if not pd.isna(r.get("quic_connection")):  # HTTP/3: its own events table
            if ev3 is None:
                continue
            sel = ev3[ev3["quic_connection"].eq(r["quic_connection"])
                      & ev3["stream_id"].eq(r["stream_id"])]
        elif not pd.isna(r["stream_id"]):
            same_conn = ev["tcp_stream"] == r["tcp_stream"]
            sel = ev[same_conn & ev["stream_id"].eq(r["stream_id"]).fillna(False)]
        else:
            same_conn = ev["tcp_stream"] == r["tcp_stream"]
            sel = ev[same_conn & ev["request_index"].eq(r["request_index"]).fillna(False)]
        rid = _request_id(r)
        sel = sel.sort_values("index")
        sent = int(ns(pd.Series([r["request_sent_ts"]]))[0])
        t = (ns(sel["ts"]) - sent) / 1e6
        parts.append(pd.DataFrame({
            "key": html.escape(f"{_conn_id(r)} {rid} {_text_or_empty(r['path'])}"[:60]),
            "t_ms": t,
            "tokens": np.arange(1, len(sel) + 1),
        }))
    if not parts:
        return pd.DataFrame({"key": pd.Series(dtype=object), "t_ms": pd.Series(dtype=float),
                             "tokens": pd.Series(dtype=np.int64)}), total
    return pd.concat(parts, ignore_index=True), total


def token_cadence_figure(points: pd.DataFrame) -> Figure | None:
    """Cumulative token events against time since the request was sent, one step line per
    streamed response: a flat stretch is a stall, the slope is the token rate."""
    if len(points) == 0:
        return None
    fig = Figure()
    for key, sub in points.groupby("key", sort=False):
        fig.add_trace({
            "type": "scatter", "x": sub["t_ms"].to_numpy(), "y": sub["tokens"].to_numpy(),
            "mode": "lines+markers", "line": {"shape": "hv"}, "marker": {"size": 4},
            "name": str(key),
            "hovertemplate": "%{x:.1f} ms: %{y} token events<extra>" + str(key) + "</extra>",
        })
    fig.update_layout(height=360,
                      showlegend=points["key"].nunique() <= 12,
                      xaxis={"title": "ms since the request was sent", "rangemode": "tozero"},
                      yaxis=count_axis("token events (cumulative)", int(points["tokens"].max())))
    return fig


def _conn_id(r: Mapping[Any, Any]) -> str:
    """``3`` for tcp.stream 3, ``q0`` for QUIC connection 0 (HTTP/3)."""
    q = r.get("quic_connection")
    if q is not None and not pd.isna(q):
        return f"q{int(q)}"
    return str(int(r["tcp_stream"]))


def _conn_name(r: Mapping[Any, Any]) -> str:
    """``tcp.stream 3`` or ``QUIC connection 0``."""
    q = r.get("quic_connection")
    if q is not None and not pd.isna(q):
        return f"QUIC connection {int(q)}"
    return f"tcp.stream {int(r['tcp_stream'])}"


def _request_id(r: Mapping[Any, Any]) -> str:
    """``s5`` for HTTP/2 stream 5, ``#2`` for the second HTTP/1.x exchange."""
    if not pd.isna(r["stream_id"]):
        return f"s{int(r['stream_id'])}"
    return f"#{int(r['request_index'])}"


def _text_or_empty(v: object) -> str:
    return "" if v is None or pd.isna(v) else str(v)  # type: ignore[call-overload]


# -- heartbeats ---------------------------------------------------------------------------------

#: marker per heartbeat outcome of a ping (pongs are drawn as their own trace)
HEARTBEAT_OUTCOMES: dict[str, tuple[str, str]] = {
    "answered": ("#2ca02c", "circle"),
    "superseded": ("#ff7f0e", "circle-open"),
    "cut_off": ("#7f7f7f", "circle-open"),
    "unanswered": ("#d62728", "x"),
}

_MECHANISM_LABEL = {
    "websocket": "websocket",
    "http2": "http2 PING",
    "tcp_keepalive": "tcp keep-alive",
}


def heartbeat_lane(tcp_stream: int, mechanism: str, sender: str) -> str:
    """The y label of a heartbeat lane: ``"tcp.stream 0 / websocket / client"``."""
    return f"tcp.stream {tcp_stream} / {_MECHANISM_LABEL.get(mechanism, mechanism)} / {sender}"


def heartbeat_points(hb: pd.DataFrame, t0_ns: int) -> pd.DataFrame:
    """Points of the heartbeat timeline: one per ping and one per pong, columns ``lane``
    (:func:`heartbeat_lane` of the ping's sender), ``kind`` (``ping`` or ``pong``), ``t_s``
    (seconds since ``t0_ns``), ``frame``, ``outcome`` (of the ping), ``rtt_ms``."""
    cols = ["lane", "kind", "t_s", "frame", "outcome", "rtt_ms"]
    if len(hb) == 0:
        return pd.DataFrame({c: [] for c in cols})
    lanes = [
        heartbeat_lane(int(t), str(m), str(s))
        for t, m, s in zip(hb["tcp_stream"].tolist(), hb["mechanism"].astype(object).tolist(),
                           hb["sender"].astype(object).tolist(), strict=True)
    ]
    outcome = hb["outcome"].astype(object).fillna("?").tolist()
    rtt = hb["rtt_ms"].to_numpy(dtype=np.float64)
    ping = pd.DataFrame({
        "lane": lanes, "kind": "ping", "t_s": (ns(hb["ping_ts"]) - t0_ns) / 1e9,
        "frame": hb["ping_frame"].astype("int64").to_numpy(), "outcome": outcome, "rtt_ms": rtt,
    })
    has = hb["pong_frame"].notna().to_numpy()
    pong = pd.DataFrame({
        "lane": np.asarray(lanes, dtype=object)[has], "kind": "pong",
        "t_s": (ns(hb["pong_ts"])[has] - t0_ns) / 1e9,
        "frame": hb["pong_frame"].to_numpy(dtype=np.float64)[has].astype(np.int64),
        "outcome": np.asarray(outcome, dtype=object)[has], "rtt_ms": rtt[has],
    })
    return pd.concat([ping, pong], ignore_index=True)[cols]


def heartbeat_figure(points: pd.DataFrame) -> Figure | None:
    """Scatter of pings (coloured by outcome; unanswered ones as red crosses) and pongs
    (small diamonds) per lane; None without points."""
    if len(points) == 0:
        return None
    lanes = sorted(set(points["lane"]), key=_lane_key)
    fig = Figure()
    pings = points[points["kind"] == "ping"]
    for outcome, (colour, symbol) in HEARTBEAT_OUTCOMES.items():
        p = pings[pings["outcome"] == outcome]
        if len(p) == 0:
            continue
        size = 12 if outcome == "unanswered" else 9
        fig.add_trace(dict(
            type="scatter",
            name=f"ping {outcome.replace('_', ' ')}", mode="markers", x=p["t_s"].to_numpy(),
            y=p["lane"].to_numpy(),
            marker={"color": colour, "symbol": symbol, "size": size,
                    "line": {"width": 2, "color": colour}},
            hovertext=[
                f"ping, frame {int(f)}<br>{t:.6f} s<br>{html.escape(str(o))}"
                + ("" if math.isnan(r) else f", pong after {fmt_ms(float(r))}")
                for f, t, o, r in zip(p["frame"], p["t_s"], p["outcome"], p["rtt_ms"], strict=True)
            ],
            hoverinfo="text",
        ))
    pongs = points[points["kind"] == "pong"]
    if len(pongs):
        fig.add_trace(dict(
            type="scatter",
            name="pong", mode="markers", x=pongs["t_s"].to_numpy(), y=pongs["lane"].to_numpy(),
            marker={"color": "#1f77b4", "symbol": "diamond", "size": 7},
            hovertext=[
                f"pong, frame {int(f)}<br>{t:.6f} s<br>{fmt_ms(float(r))} after the ping"
                for f, t, r in zip(pongs["frame"], pongs["t_s"], pongs["rtt_ms"], strict=True)
            ],
            hoverinfo="text",
        ))
    fig.update_layout(
        height=int(min(900, max(200, 40 * len(lanes) + 140))),
        xaxis={"title": "seconds since the first packet", "rangemode": "tozero"},
        yaxis={"categoryorder": "array", "categoryarray": lanes[::-1], "type": "category"},
    )
    return fig


def _lane_key(lane: str) -> tuple[int, str]:
    head, _, rest = lane.partition(" / ")
    try:
        return int(head.removeprefix("tcp.stream ")), rest
    except ValueError:
        return 0, lane


# -- overhead -----------------------------------------------------------------------------------

#: colour per overhead category: each its own colour (neighbours in the stack differ in hue
#: and lightness), green for the application payload, grey for what was not parsed
OVERHEAD_COLOURS: dict[str, str] = {  # the 20 colours of Tableau's tab20, two left out
    "tcp_handshake_bytes": "#1f77b4",
    "tcp_teardown_bytes": "#aec7e8",
    "tcp_ack_bytes": "#17becf",
    "tcp_header_bytes": "#393b79",
    "tcp_resent_bytes": "#d62728",
    "tls_handshake_bytes": "#e377c2",
    "tls_record_overhead_bytes": "#8c564b",
    "tls_encrypted_bytes": "#7f7f7f",
    "http2_frame_header_bytes": "#ff7f0e",
    "http2_control_bytes": "#bcbd22",
    "hpack_bytes": "#ffbb78",
    "http1_header_bytes": "#f7b6d2",
    "http1_framing_bytes": "#c49c94",
    "ws_frame_header_bytes": "#9467bd",
    "ws_control_bytes": "#c5b0d5",
    "sse_framing_bytes": "#dbdb8d",
    "app_payload_bytes": "#2ca02c",
    "other_bytes": "#c7c7c7",
    # QUIC's and HTTP/3's (a QUIC row has no TCP, TLS, HTTP/1, HTTP/2 or WebSocket bytes, and
    # QUIC rows get their own chart): tab20 again, resent red and undecrypted grey as for TCP
    "udp_header_bytes": "#393b79",
    "quic_header_bytes": "#1f77b4",
    "quic_aead_tag_bytes": "#8c564b",
    "quic_undecrypted_bytes": "#7f7f7f",
    "quic_padding_bytes": "#aec7e8",
    "quic_ack_bytes": "#17becf",
    "quic_control_bytes": "#bcbd22",
    "quic_crypto_bytes": "#e377c2",
    "quic_stream_header_bytes": "#9467bd",
    "quic_resent_bytes": "#d62728",
    "http3_frame_header_bytes": "#ff7f0e",
    "http3_control_bytes": "#c5b0d5",
    "qpack_bytes": "#ffbb78",
}

#: what the report calls each overhead category (legend and table): the TCP ones name the
#: headers they count (frame bytes: link layer, IP and TCP headers)
OVERHEAD_LABELS: dict[str, str] = {
    "tcp_handshake_bytes": "TCP handshake packets (link+IP+TCP headers)",
    "tcp_teardown_bytes": "TCP teardown packets (FIN, RST, last ACKs)",
    "tcp_ack_bytes": "pure ACKs and window updates (link+IP+TCP headers)",
    "tcp_header_bytes": "link+IP+TCP headers of data packets",
    "tcp_resent_bytes": "resent TCP payload",
    "tls_handshake_bytes": "TLS handshake and alert records",
    "tls_record_overhead_bytes": "TLS record headers, tags and padding",
    "tls_encrypted_bytes": "TLS data not decrypted",
    "http2_frame_header_bytes": "HTTP/2 frame headers",
    "http2_control_bytes": "HTTP/2 control frames",
    "hpack_bytes": "HPACK header blocks",
    "http1_header_bytes": "HTTP/1.x headers",
    "http1_framing_bytes": "HTTP/1.x chunked framing",
    "ws_frame_header_bytes": "WebSocket frame headers",
    "ws_control_bytes": "WebSocket control frames",
    "sse_framing_bytes": "SSE framing",
    "app_payload_bytes": "application payload",
    "other_bytes": "other (not parsed)",
    "udp_header_bytes": "link+IP+UDP headers of QUIC datagrams",
    "quic_header_bytes": "QUIC packet headers",
    "quic_aead_tag_bytes": "QUIC AEAD tags",
    "quic_undecrypted_bytes": "QUIC packets not decrypted",
    "quic_padding_bytes": "QUIC padding",
    "quic_ack_bytes": "QUIC ACK frames",
    "quic_control_bytes": "QUIC control frames",
    "quic_crypto_bytes": "QUIC CRYPTO frames (TLS handshake)",
    "quic_stream_header_bytes": "QUIC STREAM frame headers",
    "quic_resent_bytes": "resent QUIC stream data",
    "http3_frame_header_bytes": "HTTP/3 frame headers",
    "http3_control_bytes": "HTTP/3 control frames and stream types",
    "qpack_bytes": "QPACK field sections",
}


def overhead_label(category: str) -> str:
    """The report's name of an ``analyses.overhead`` category column."""
    return OVERHEAD_LABELS.get(category, category.removesuffix("_bytes").replace("_", " "))


def overhead_figure(
    rows: pd.DataFrame, categories: tuple[str, ...], *, total_label: str = "total"
) -> Figure | None:
    """Stacked horizontal bars of ``rows`` (rows of ``analyses.overhead``: connections and
    the total row, labelled ``total_label``), one segment per category with bytes, as a share
    of the row's wire bytes; hover gives bytes. A TCP row is labelled by its tcp.stream, a
    QUIC row as ``QUIC n``. None without rows."""
    if len(rows) == 0:
        return None
    labels = [
        total_label if bool(t)
        else f"tcp.stream {int(s)}" if not pd.isna(s)
        else f"QUIC {int(qc)}"
        for t, s, qc in zip(
            rows["total"].tolist(), rows["tcp_stream"].tolist(),
            rows["quic_connection"].tolist(), strict=True,
        )
    ]
    wire = rows["wire_bytes"].to_numpy(dtype=np.float64)
    denom = np.where(wire > 0, wire, 1.0)
    goodput = rows["goodput_ratio"].to_numpy(dtype=np.float64)
    fig = Figure()
    for c in categories:
        v = rows[c].to_numpy(dtype=np.int64)
        if not v.any():
            continue
        name = overhead_label(c)
        fig.add_trace(dict(
            type="bar",
            name=name, orientation="h", y=labels, x=100.0 * v / denom,
            marker={"color": OVERHEAD_COLOURS.get(c, "#333333")},
            hovertext=[
                f"{lab}: {name}<br>{int(b):,} of {int(w):,} bytes ({100.0 * b / d:.1f}%)"
                + ("" if math.isnan(g) else f"<br>goodput {100.0 * g:.1f}%")
                for lab, b, w, d, g in zip(labels, v, wire, denom, goodput, strict=True)
            ],
            hoverinfo="text",
        ))
    n = len(rows)
    fig.update_layout(
        barmode="stack",
        height=int(min(1000, max(220, 26 * n + 160))),
        xaxis={"title": "% of bytes on the wire", "range": [0, 100]},
        yaxis={"categoryorder": "array", "categoryarray": labels[::-1], "type": "category"},
    )
    return fig
