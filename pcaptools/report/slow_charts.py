"""Charts of the "Why was it slow" section: the stacked time split of the slowest requests
and the time-sequence chart of a connection (tcptrace / Stevens style).

As in :mod:`.charts`, each ``*_figure`` returns a :class:`~.charts.Figure` or ``None`` when
there is nothing to draw, and the data preparations (:func:`time_sequence_rows`) are
separate so tests can check the numbers. Strings from the capture (paths) are escaped with
:func:`html.escape` before they reach plotly.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .charts import Figure

__all__ = [
    "SPLIT_PARTS",
    "TimeSequence",
    "time_sequence_figure",
    "time_sequence_rows",
    "time_split_figure",
]

#: (request_timing column, legend name, colour) of the stacked time split, in time order
SPLIT_PARTS: tuple[tuple[str, str, str], ...] = (
    ("dns_ms", "DNS", "#9467bd"),
    ("connect_ms", "TCP connect", "#8c564b"),
    ("tls_ms", "TLS", "#e377c2"),
    ("client_ms", "client between phases", "#c7c7c7"),
    ("upload_ms", "request upload", "#bcbd22"),
    ("network_rtt_ms", "network round trip", "#17becf"),
    ("server_wait_ms", "server wait (before headers)", "#ff7f0e"),
    ("model_wait_ms", "model wait (after headers)", "#1f77b4"),
    ("streaming_ms", "streaming", "#2ca02c"),
    ("stall_ms", "stalls", "#d62728"),
)


def time_split_figure(rows: pd.DataFrame) -> Figure | None:
    """One horizontal stacked bar per request_timing row (in the order given): its parts in
    milliseconds. None without rows."""
    if len(rows) == 0:
        return None
    labels = [html.escape(_label(r)) for r in rows.to_dict("records")]
    fig = Figure()
    for col, name, colour in SPLIT_PARTS:
        v = rows[col].to_numpy(np.float64)
        v = np.where(np.isnan(v), 0.0, np.maximum(v, 0.0))
        if not (v > 0).any():
            continue
        fig.add_trace({"type": "bar", "orientation": "h", "name": name, "y": labels,
                       "x": np.round(v, 3).tolist(), "marker": {"color": colour},
                       "hovertemplate": f"{name}: %{{x:.1f}} ms<extra>%{{y}}</extra>"})
    fig.update_layout(
        barmode="stack", height=int(min(900, max(180, 26 * len(rows) + 120))),
        xaxis={"title": "milliseconds"},
        yaxis={"autorange": "reversed", "type": "category", "automargin": True},
    )
    return fig


def _label(r: Mapping[Any, Any]) -> str:
    sid, idx = r.get("stream_id"), r.get("request_index")
    who = f"stream {sid}" if sid is not None and not pd.isna(sid) else f"#{idx}"
    conn = r.get("tcp_stream")
    if conn is None or pd.isna(conn):
        return f"quic {r.get('quic_connection')} {who}"
    return f"tcp {conn} {who}"


@dataclass(slots=True)
class TimeSequence:
    """The points of one connection direction's time-sequence chart (times in seconds since
    the first packet, sequence numbers relative as Wireshark shows them)."""

    tcp_stream: int
    direction: str
    seg_t: np.ndarray
    """data segments: time"""
    seg_lo: np.ndarray
    """first byte (tcp.seq)"""
    seg_hi: np.ndarray
    """one past the last byte (tcp.seq + tcp.len)"""
    seg_resent: np.ndarray
    """every byte already seen: a retransmission"""
    ack_t: np.ndarray
    ack: np.ndarray
    """the receiver's cumulative ACK"""
    win: np.ndarray
    """ACK + advertised window: the highest byte the sender may send"""
    sampled: bool = False
    """points were dropped to stay under the bound (retransmissions are always kept)"""
    sack_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """the receiver's SACK blocks (tcp_sack_blocks): time of the ACK carrying the block"""
    sack_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """left edge (tcp.options.sack_le)"""
    sack_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """right edge (tcp.options.sack_re)"""


def time_sequence_rows(packets: pd.DataFrame, tcp_stream: int, direction: str, t0_ns: int,
                       max_points: int, sacks: pd.DataFrame | None = None) -> TimeSequence | None:
    """The time-sequence data of one direction of one connection from the packets table
    (None when that direction sent no payload), with the receiver's SACK blocks from
    ``sacks`` (the ``tcp_sack_blocks`` table; None: none drawn). At most ``max_points``
    segments, as many ACKs and as many SACK blocks (evenly thinned, retransmissions kept)."""
    p = packets[packets["tcp_stream"].astype("Int64").eq(tcp_stream).fillna(False)
                .to_numpy(bool)]
    d = p["direction"].astype("string").fillna("").to_numpy(dtype=object)
    t = (p["ts"].astype("int64").to_numpy(np.int64) - t0_ns) / 1e9 if len(p) else np.zeros(0)
    length = p["tcp_len"].fillna(0).to_numpy(np.int64)
    seq = p["seq"].fillna(0).to_numpy(np.int64)
    data = (d == direction) & (length > 0)
    if not data.any():
        return None
    resent = p["resent"].fillna(False).to_numpy(bool)
    peer = (d != direction) & (d != "") & p["ack"].notna().to_numpy(bool)
    ack = p["ack"].fillna(0).to_numpy(np.int64)
    win = p["window"].fillna(0).to_numpy(np.int64)
    keep_seg = _thin(np.flatnonzero(data), max_points, resent[data])
    keep_ack = _thin(np.flatnonzero(peer), max_points, None)
    sampled = len(keep_seg) < int(data.sum()) or len(keep_ack) < int(peer.sum())
    out = TimeSequence(
        tcp_stream=tcp_stream, direction=direction,
        seg_t=t[keep_seg], seg_lo=seq[keep_seg], seg_hi=seq[keep_seg] + length[keep_seg],
        seg_resent=resent[keep_seg], ack_t=t[keep_ack], ack=ack[keep_ack],
        win=ack[keep_ack] + win[keep_ack], sampled=sampled)
    if sacks is not None and len(sacks):
        sb = sacks[(sacks["tcp_stream"] == tcp_stream)
                   & (sacks["direction"].astype("string") != direction).fillna(False)]
        keep = _thin(np.arange(len(sb)), max_points, None)
        out.sampled |= len(keep) < len(sb)
        sb = sb.iloc[keep]
        out.sack_t = (sb["ts"].astype("int64").to_numpy(np.int64) - t0_ns) / 1e9
        out.sack_lo = sb["left_edge"].to_numpy(np.int64)
        out.sack_hi = sb["right_edge"].to_numpy(np.int64)
    return out


def _thin(idx: np.ndarray, max_points: int, always: np.ndarray | None) -> np.ndarray:
    if len(idx) <= max_points:
        return idx
    step = int(np.ceil(len(idx) / max_points))
    keep = np.zeros(len(idx), bool)
    keep[::step] = True
    if always is not None:
        keep |= always
    return idx[keep]


def time_sequence_figure(ts: TimeSequence) -> Figure:
    """Sequence number against time: each data segment a vertical bar from its first to its
    last byte (retransmissions in red), the receiver's ACK line and its window line (ACK +
    advertised window, the ceiling the sender may fill) and the receiver's SACK blocks, each
    a vertical bar from its left to its right edge at the time of the ACK that carried it
    (as Wireshark's tcptrace graph draws them)."""
    fig = Figure()

    def bars(m: np.ndarray) -> tuple[list[float | None], list[float | None]]:
        xs: list[float | None] = []
        ys: list[float | None] = []
        for x, lo, hi in zip(ts.seg_t[m], ts.seg_lo[m], ts.seg_hi[m], strict=True):
            xs += [float(x), float(x), None]
            ys += [float(lo), float(hi), None]
        return xs, ys

    new = ~ts.seg_resent
    for m, name, colour in ((new, "data segment", "#1f77b4"),
                            (ts.seg_resent, "retransmission", "#d62728")):
        if m.any():
            xs, ys = bars(m)
            fig.add_trace({"type": "scatter", "mode": "lines+markers", "name": name,
                           "x": xs, "y": ys, "line": {"color": colour, "width": 2},
                           "marker": {"size": 3, "color": colour}, "hoverinfo": "x+y"})
    if len(ts.sack_t):
        sx: list[float | None] = []
        sy: list[float | None] = []
        for x, lo, hi in zip(ts.sack_t, ts.sack_lo, ts.sack_hi, strict=True):
            sx += [round(float(x), 6), round(float(x), 6), None]
            sy += [float(lo), float(hi), None]
        fig.add_trace({"type": "scatter", "mode": "lines", "name": "SACK block",
                       "x": sx, "y": sy, "line": {"color": "#9467bd", "width": 3},
                       "opacity": 0.6, "hoverinfo": "x+y"})
    if len(ts.ack_t):
        fig.add_trace({"type": "scatter", "mode": "lines", "name": "ACK",
                       "x": np.round(ts.ack_t, 6).tolist(), "y": ts.ack.tolist(),
                       "line": {"color": "#2ca02c", "shape": "hv", "width": 1.5}})
        fig.add_trace({"type": "scatter", "mode": "lines", "name": "receive window",
                       "x": np.round(ts.ack_t, 6).tolist(), "y": ts.win.tolist(),
                       "line": {"color": "#ff7f0e", "shape": "hv", "width": 1, "dash": "dot"}})
    fig.update_layout(
        height=360, xaxis={"title": "seconds since the first packet"},
        yaxis={"title": f"relative sequence number ({ts.direction.replace('_', ' ')})"},
    )
    return fig
