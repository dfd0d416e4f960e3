"""Figures of the protocol sections (realtime voice; QUIC / HTTP/3 reuses :mod:`.charts`).

As in :mod:`.charts`: each ``*_figure`` returns a :class:`~.charts.Figure` or ``None`` when
there is nothing to draw, and the data behind it comes from a separate ``*_rows`` /
``*_points`` function that tests can check without parsing plotly JSON. Capture strings
(response ids, event types) are passed through :func:`html.escape` before they reach
plotly.js, which renders a subset of HTML in hover labels and legend names.

- :func:`turn_latency_rows` / :func:`turn_latency_figure`: per realtime turn, the time from
  the request event (``response.create``, ``input_audio_buffer.commit``: the end of the
  user's turn, as :func:`pcaptools.analyses.realtime.turns` defines it) to the server's first
  event and on to the first audio chunk, as one stacked horizontal bar.
- :func:`audio_chunk_points` / :func:`audio_cadence_figure`: every audio chunk of the
  streams of :func:`pcaptools.analyses.realtime.audio_cadence` (response audio and
  microphone audio): the time since the previous chunk against capture time, with the
  chunks that stalled a playout buffer of the table's ``buffer_ms`` marked.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..analyses.realtime import OPENAI_REALTIME, EventNames, playout_stalls
from ..analyses.summary import fmt_ms
from .charts import Figure, ns

__all__ = [
    "AudioPoints",
    "audio_cadence_figure",
    "audio_chunk_points",
    "stream_label",
    "turn_latency_figure",
    "turn_latency_rows",
]

#: colours of the two parts of a turn bar
_TURN_PARTS = (
    ("first_event_ms", "request \u2192 server's first event", "#1f77b4"),
    ("first_audio_ms", "first event \u2192 first audio", "#ff7f0e"),
)
_KIND_LABEL = {"audio": "audio", "mic": "mic"}


def _text(v: Any) -> str:
    return "" if v is None or pd.isna(v) else str(v)


def stream_label(tcp_stream: int, stream_id: Any, response_index: Any, response_id: Any,
                 kind: str | None = None) -> str:
    """``"tcp.stream 0 resp_001"`` (``#2`` when the response has no id; ``h2 stream 3``
    when the WebSocket runs on an HTTP/2 stream), with ``kind`` first when given. Unescaped
    text (it holds the capture's response id)."""
    out = f"tcp.stream {int(tcp_stream)}"
    if stream_id is not None and not pd.isna(stream_id):
        out += f" h2 stream {int(stream_id)}"
    rid = _text(response_id)
    if rid:
        out += f" {rid[:40]}"
    elif response_index is not None and not pd.isna(response_index):
        out += f" #{int(response_index)}"
    return f"{kind} {out}" if kind else out


# -- turn latency ---------------------------------------------------------------------------------


def turn_latency_rows(turns: pd.DataFrame, max_rows: int) -> tuple[pd.DataFrame, int]:
    """The turns the turn-latency chart draws: those with a request event (time to first
    audio is measured from it), the first ``max_rows`` by request time. Columns ``label``
    (unescaped), ``first_event_ms``, ``first_audio_ms`` (NaN without audio),
    ``time_to_first_audio_ms``, ``request_frame``, ``first_audio_frame``. Also returns how
    many turns had a request (the chart's total)."""
    t = turns[turns["request_frame"].notna()].sort_values(["request_ts", "tcp_stream"],
                                                          kind="stable")
    total = len(t)
    t = t.head(max_rows)
    labels = [stream_label(a, b, c, d) for a, b, c, d in zip(
        t["tcp_stream"].tolist(), t["stream_id"].tolist(), t["response_index"].tolist(),
        t["response_id"].tolist(), strict=True)]
    rows = pd.DataFrame({
        "label": labels,
        "first_event_ms": t["first_event_ms"].to_numpy(dtype=np.float64),
        "first_audio_ms": t["first_audio_ms"].to_numpy(dtype=np.float64),
        "time_to_first_audio_ms": t["time_to_first_audio_ms"].to_numpy(dtype=np.float64),
        "request_frame": t["request_frame"].astype("Int64").to_numpy(dtype=object),
        "first_audio_frame": t["first_audio_frame"].astype("Int64").to_numpy(dtype=object),
    })
    return rows, total


def turn_latency_figure(rows: pd.DataFrame) -> Figure | None:
    """One horizontal bar per turn (first turn at the top): request event to the server's
    first event, then on to the first audio chunk; the whole bar is the time to first audio.
    A turn without audio has the first part only (its hover says so)."""
    if len(rows) == 0:
        return None
    labels = [html.escape(x) for x in rows["label"]]
    # (two turns with one label, e.g. no response ids on two connections' #0: keep them apart)
    seen: dict[str, int] = {}
    for i, x in enumerate(labels):
        k = seen.get(x, 0)
        seen[x] = k + 1
        if k:
            labels[i] = f"{x} ({k + 1})"
    fig = Figure()
    total = rows["time_to_first_audio_ms"].to_numpy(dtype=np.float64)
    for col, name, colour in _TURN_PARTS:
        v = rows[col].to_numpy(dtype=np.float64)
        hover = []
        for x, tot, rf, af in zip(v, total, rows["request_frame"], rows["first_audio_frame"],
                                  strict=True):
            if math.isnan(x):
                hover.append("no audio in this response")
                continue
            h = f"{html.escape(name)}: {fmt_ms(float(x))}"
            h += (f"<br>time to first audio {fmt_ms(float(tot))} (frames {rf} to {af})"
                  if not math.isnan(tot) else f"<br>no audio (request frame {rf})")
            hover.append(h)
        fig.add_trace({
            "type": "bar", "orientation": "h", "name": name, "y": labels,
            "x": np.nan_to_num(v, nan=0.0), "marker": {"color": colour},
            "hovertext": hover, "hoverinfo": "text",
        })
    n = len(rows)
    fig.update_layout(
        height=int(min(900, max(200, 26 * n + 140))), barmode="stack",
        legend={"traceorder": "normal"},
        xaxis={"title": "ms after the request event", "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "type": "category", "categoryorder": "array",
               "categoryarray": labels, "automargin": True},
    )
    return fig


# -- audio cadence --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AudioPoints:
    """The chunks of the audio cadence chart."""

    points: pd.DataFrame
    """one row per chunk: ``key`` (stream label, unescaped), ``kind`` (audio / mic),
    ``frame``, ``t_s`` (seconds since the capture's first packet), ``gap_ms`` (since the
    stream's previous chunk; NaN for its first), ``stall_ms`` (the playout stall this chunk
    ended; NaN when none)"""
    streams: int
    """streams drawn"""
    left_out: int
    """streams of the cadence table not drawn: beyond the limit, or whose chunks could not
    be picked out of realtime_events unambiguously (their count differs from the table's)"""


_POINT_COLS = ("key", "kind", "frame", "t_s", "gap_ms", "stall_ms")


def _chunk_events(cap: Any, names: EventNames) -> pd.DataFrame:
    """Audio chunks as :func:`~pcaptools.analyses.realtime.audio_cadence` counts them: the
    ok realtime events of an audio (server) or microphone (client) type with an audio size,
    and binary WebSocket messages; columns frame, ts_ns, tcp_stream, stream_id, direction,
    bytes, in capture order."""
    ev = cap.realtime_events
    typ = ev["type"].astype(object)
    c2s = ev["direction"].astype(str).eq("client_to_server").to_numpy(bool)
    is_audio = typ.isin(list(names.audio)).to_numpy(bool)
    is_mic = typ.isin(list(names.mic)).to_numpy(bool)
    keep = (ev["status"].astype(str).eq("ok").to_numpy(bool) & ev["audio_bytes"].notna()
            .to_numpy(bool) & ((c2s & is_mic) | (~c2s & is_audio)))
    e = ev[keep]
    parts = [pd.DataFrame({
        "frame": e["frame"].to_numpy(np.int64), "ts_ns": ns(e["ts"]),
        "tcp_stream": e["tcp_stream"].to_numpy(np.int64),
        "stream_id": e["stream_id"].astype("Int64").to_numpy(dtype=object),
        "direction": e["direction"].astype(str).to_numpy(),
        "bytes": e["audio_bytes"].to_numpy(dtype=np.float64)})]
    m = cap.ws_messages
    b = m[m["type"].astype(str) == "binary"]
    if len(b):
        size = b["decompressed_bytes"].where(b["compressed"].astype(bool), b["payload_bytes"])
        parts.append(pd.DataFrame({
            "frame": b["frame"].to_numpy(np.int64), "ts_ns": ns(b["ts"]),
            "tcp_stream": b["tcp_stream"].to_numpy(np.int64),
            "stream_id": b["stream_id"].astype("Int64").to_numpy(dtype=object),
            "direction": b["direction"].astype(str).to_numpy(),
            "bytes": size.to_numpy(dtype=np.float64)}))
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return out.sort_values(["frame", "ts_ns"], kind="stable").reset_index(drop=True)


def audio_chunk_points(cap: Any, cadence: pd.DataFrame, t0_ns: int, max_streams: int, *,
                       names: EventNames = OPENAI_REALTIME) -> AudioPoints:
    """Every chunk of the audio and mic rows of ``cadence`` (a table of
    :func:`~pcaptools.analyses.realtime.audio_cadence` of ``cap``), the first ``max_streams``
    streams by first chunk: the chunks of the row's connection and direction from its
    ``first_ts`` to its ``last_ts``. A stream whose chunks there do not number the row's
    ``chunks`` (two responses' audio interleaved) is left out rather than drawn wrong; so is
    one whose playout stalls, recomputed here with the row's ``buffer_ms``, do not equal its
    ``underruns``."""
    rows = cadence[cadence["kind"].astype(str).isin(["audio", "mic"]).to_numpy(bool)]
    rows = rows.sort_values(["first_ts", "kind"], kind="stable")
    empty = pd.DataFrame({c: pd.Series(dtype=object if c in ("key", "kind") else np.float64)
                          for c in _POINT_COLS})
    if not len(rows):
        return AudioPoints(empty, 0, 0)
    ev = _chunk_events(cap, names)
    parts: list[pd.DataFrame] = []
    left_out = max(0, len(rows) - max_streams)
    for r in rows.head(max_streams).to_dict("records"):
        lo, hi = (int(x) for x in ns(pd.Series([r["first_ts"], r["last_ts"]])))
        sid = r["stream_id"]
        same_sid = (ev["stream_id"].isna() if pd.isna(sid)
                    else ev["stream_id"].eq(int(sid)).fillna(False))
        sel = ev[(ev["tcp_stream"].to_numpy() == int(r["tcp_stream"]))
                 & same_sid.to_numpy(bool)
                 & (ev["direction"].to_numpy() == str(r["direction"]))
                 & (ev["ts_ns"].to_numpy() >= lo) & (ev["ts_ns"].to_numpy() <= hi)]
        if len(sel) != int(r["chunks"]) or int(sel["frame"].iloc[0]) != int(r["first_frame"]):
            left_out += 1
            continue
        arr = sel["ts_ns"].to_numpy(np.int64)
        stall = np.full(len(sel), np.nan)
        media = float(r["media_ms"])
        nbytes = float(sel["bytes"].sum())
        if not math.isnan(media) and nbytes > 0:
            dur = sel["bytes"].to_numpy(np.float64) * (media / nbytes)
            stalls = playout_stalls(arr.tolist(), dur.tolist(), buffer_ms=float(r["buffer_ms"]))
            if len(stalls) != int(r["underruns"]):
                left_out += 1
                continue
            for i, ms in stalls:
                stall[i] = ms
        elif int(r["underruns"]):
            left_out += 1
            continue
        gap = np.concatenate(([np.nan], np.diff(arr) / 1e6))
        kind = str(r["kind"])
        parts.append(pd.DataFrame({
            "key": stream_label(r["tcp_stream"], sid, r["response_index"], r["response_id"],
                                _KIND_LABEL.get(kind, kind)),
            "kind": kind, "frame": sel["frame"].to_numpy(np.int64),
            "t_s": (arr - t0_ns) / 1e9, "gap_ms": gap, "stall_ms": stall,
        }))
    if not parts:
        return AudioPoints(empty, 0, left_out)
    return AudioPoints(pd.concat(parts, ignore_index=True), len(parts), left_out)


def audio_cadence_figure(ap: AudioPoints) -> Figure | None:
    """Time since the previous chunk (ms) against capture time, one line per stream
    (response audio and microphone audio); the chunks that ended a playout stall as red
    crosses. A steady stream is a flat line at its chunk duration; a spike is a late chunk."""
    pts = ap.points[ap.points["gap_ms"].notna()]
    if len(pts) == 0:
        return None
    fig = Figure()
    for key, sub in pts.groupby("key", sort=False):
        name = html.escape(str(key))
        fig.add_trace({
            "type": "scatter", "mode": "lines+markers", "name": name,
            "x": sub["t_s"].to_numpy(), "y": sub["gap_ms"].to_numpy(),
            "marker": {"size": 5},
            "line": {"dash": "dot"} if (sub["kind"] == "mic").all() else {},
            "customdata": sub["frame"].to_numpy(),
            "hovertemplate": ("frame %{customdata}: %{y:.1f} ms after the previous chunk"
                              f"<extra>{name}</extra>"),
        })
    st = pts[pts["stall_ms"].notna()]
    if len(st):
        fig.add_trace({
            "type": "scatter", "mode": "markers", "name": "playout stall (underrun)",
            "x": st["t_s"].to_numpy(), "y": st["gap_ms"].to_numpy(),
            "marker": {"color": "#d62728", "symbol": "x", "size": 13,
                       "line": {"width": 2, "color": "#d62728"}},
            "hovertext": [f"frame {int(f)}: playback stalled {fmt_ms(float(s))}<br>"
                          f"{html.escape(str(k))}"
                          for f, s, k in zip(st["frame"], st["stall_ms"], st["key"],
                                             strict=True)],
            "hoverinfo": "text",
        })
    fig.update_layout(
        height=360, showlegend=pts["key"].nunique() <= 16,
        xaxis={"title": "seconds since the first packet"},
        yaxis={"title": "ms since the previous chunk", "rangemode": "tozero"},
    )
    return fig
