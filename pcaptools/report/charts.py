"""Plotly figures of the report, and the small data preparations behind them.

Each ``*_figure`` function returns a :class:`plotly.graph_objects.Figure`, or ``None`` when
there is nothing to draw; the preparation functions (``timeline_rows``, ``retransmission_bins``)
are separate so tests can check the numbers without parsing plotly JSON. Times on every x
axis are seconds since the first packet of the capture, as Wireshark shows them by default.

Every string that comes from the capture (addresses today; SNI, paths later) is passed
through :func:`html.escape` before it reaches plotly: plotly.js renders a subset of HTML
in hover labels and legend names.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

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
}

_LAYOUT = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
    "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12},
    "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    "hoverlabel": {"align": "left"},
}


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


def timeline_figure(tl: Timeline, t0_ns: int, span_s: float) -> go.Figure | None:
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
    fig = go.Figure()
    order = [s for s in CONN_STATE_COLOURS if s in set(states)] + sorted(
        set(states) - set(CONN_STATE_COLOURS)
    )
    streams = conns["tcp_stream"].to_numpy()
    hover_arr = np.asarray(hover, dtype=object)
    for state in order:
        m = states == state
        fig.add_trace(
            go.Bar(
                name=html.escape(state),
                orientation="h",
                y=streams[m],
                x=width[m],
                base=start[m],
                marker={"color": CONN_STATE_COLOURS.get(state, "#333333")},
                hovertext=hover_arr[m],
                hoverinfo="text",
                width=0.7,
            )
        )
    n = len(conns)
    height = int(min(900, max(170, 22 * n + 130)))
    yaxis: dict[str, object] = {"title": "tcp.stream", "autorange": "reversed", "zeroline": False}
    if n <= 40:
        yaxis |= {"tickmode": "array", "tickvals": streams.tolist()}
    fig.update_layout(
        **_LAYOUT,
        height=height,
        barmode="overlay",
        showlegend=True,
        xaxis={"title": "seconds since the first packet", "rangemode": "tozero"},
        yaxis=yaxis,
    )
    return fig


# -- handshake RTT ------------------------------------------------------------------------------


def irtt_figure(irtt_ms: pd.Series) -> go.Figure | None:
    """Histogram of tshark's tcp.analysis.initial_rtt (ms), with the median and p95 marked."""
    v = irtt_ms.dropna().to_numpy(dtype=np.float64)
    if v.size == 0:
        return None
    start, size = histogram_bins(v)
    fig = go.Figure(
        go.Histogram(
            x=v,
            xbins={"start": start, "size": size},
            marker={"color": "#1f77b4"},
            name="handshakes",
            hovertemplate="%{x} ms: %{y} connections<extra></extra>",
        )
    )
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
        **_LAYOUT,
        height=300,
        showlegend=False,
        bargap=0.05,
        xaxis=xaxis,
        yaxis={"title": "connections"},
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


def retransmissions_figure(bins: pd.DataFrame, width_s: float, span_s: float) -> go.Figure | None:
    """Stacked bars: retransmitted segments per bin, one colour per kind."""
    if len(bins) == 0:
        return None
    fig = go.Figure()
    kinds = [k for k in RETRANSMISSION_COLOURS if k in set(bins["kind"])] + sorted(
        set(bins["kind"]) - set(RETRANSMISSION_COLOURS)
    )
    unit = unit_label(width_s)
    for kind in kinds:
        sub = bins[bins["kind"] == kind]
        fig.add_trace(
            go.Bar(
                name=html.escape(kind.replace("_", " ")),
                x=sub["bin_s"],
                y=sub["segments"],
                width=width_s,
                offset=0,
                marker={"color": RETRANSMISSION_COLOURS.get(kind, "#333333")},
                hovertemplate=(
                    f"%{{y}} segments in [%{{x}} s, +{unit})<extra>{html.escape(kind)}</extra>"
                ),
            )
        )
    fig.update_layout(
        **_LAYOUT,
        height=320,
        barmode="stack",
        bargap=0,
        xaxis={
            "title": "seconds since the first packet",
            "range": [0, max(span_s, width_s) * 1.01],
        },
        yaxis={"title": f"segments per {unit}"},
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
