"""The body of the report's "Why was it slow" section (:func:`slow_parts`; the builder
in :data:`.html.SECTIONS` wraps it: this module must not import :mod:`.html`): the
slowest requests with their time split in words and as stacked bars, every stall with its
cause, and a time-sequence chart of the few worst connections
(:mod:`pcaptools.analyses.slow`; charts in :mod:`.slow_charts`).

Bounded on big captures: :data:`MAX_SLOW_REQUESTS` requests in the split, the stalls table
under the report's table-row limit, :data:`MAX_SEQUENCE_CONNECTIONS` connections charted and
:data:`MAX_SEQUENCE_POINTS` segments (and ACKs) per chart (``pcaptools.limits``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import pandas as pd
from markupsafe import Markup

from ..analyses.slow import CADENCE_FACTOR, MIN_STALL_MS, request_timing, stalls
from . import slow_charts
from .charts import Figure

__all__ = ["MAX_SEQUENCE_CONNECTIONS", "MAX_SEQUENCE_POINTS", "MAX_SLOW_REQUESTS", "TITLE",
           "slow_analyses", "slow_parts"]

#: the section's title
TITLE = "Why was it slow"
Cell = str | int | float | Markup | None


class ReportContextLike(Protocol):
    """What this section uses of :class:`.html.ReportContext`."""

    cap: Any
    t0_ns: int
    max_table_rows: int
    _cache: dict[str, Any]

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Cell]], *,
              numeric: Iterable[int] = (), mono: Iterable[int] = (), wrap: Iterable[int] = (),
              total: int | None = None, source: str | None = None) -> Markup: ...

    def figure(self, fig: Figure, fig_id: str) -> Markup: ...

    @staticmethod
    def code(text: str) -> Markup: ...

    def disconnects(self) -> pd.DataFrame: ...

    def latency(self) -> pd.DataFrame: ...


#: requests shown in the time split (the slowest by total time)
MAX_SLOW_REQUESTS = 10
#: connections given a time-sequence chart (those that stalled longest)
MAX_SEQUENCE_CONNECTIONS = 3
#: data segments (and as many ACKs and SACK blocks) per time-sequence chart; beyond, evenly
#: thinned (resends kept)
MAX_SEQUENCE_POINTS = 2000


#: the stall rule in words, for the note
_RULE = (f"a gap in delivery of at least {MIN_STALL_MS:.0f} ms and, while streaming, "
         f"{CADENCE_FACTOR:g} times the stream's cadence, or a lost server segment")


class _Cached(Protocol):
    cap: Any
    _cache: dict[str, Any]

    def disconnects(self) -> pd.DataFrame: ...

    def latency(self) -> pd.DataFrame: ...


def slow_analyses(ctx: _Cached) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(stalls, request_timing) of the capture, computed once per report."""
    if "slow" not in ctx._cache:
        # the report's disconnects() and stream_latency(), computed once: the black-hole
        # verdicts of loss stalls, the requests
        lat = ctx.latency()
        st = stalls(ctx.cap, verdicts=ctx.disconnects(), latency=lat)
        ctx._cache["slow"] = (st, request_timing(ctx.cap, stall_table=st, latency=lat))
    got: tuple[pd.DataFrame, pd.DataFrame] = ctx._cache["slow"]
    return got


def slow_parts(ctx: ReportContextLike) -> tuple[Markup | None, str]:
    """(body, note) of the section; body None (and the note says why) without requests."""
    st, rt = slow_analyses(ctx)
    if len(rt) == 0 and len(st) == 0:
        return None, "No HTTP request in this capture."
    parts: list[Markup] = []
    slowest = rt.sort_values(["total_ms", "ttfb_ms"], ascending=False, na_position="last")
    slowest = slowest.head(MAX_SLOW_REQUESTS)
    if len(slowest):
        fig = slow_charts.time_split_figure(slowest)
        if fig is not None:
            parts.append(ctx.figure(fig, "slow-split"))
        rows: list[list[Cell]] = [
            [_num(r["total_ms"]), _num(r["ttft_ms"]), _text(r["path"]), str(r["sentence"]),
             ctx.code(str(r["wireshark_filter"]))]
            for r in slowest.to_dict("records")
        ]
        parts.append(ctx.table(["total ms", "TTFT ms", "path", "where the time went",
                                "Wireshark filter"], rows, numeric=(0, 1), wrap=(2, 3)))
    if len(st):
        srows: list[list[Cell]] = []
        for r in st.head(ctx.max_table_rows).to_dict("records"):
            srows.append([
                round((pd.Timestamp(r["start_ts"]).value - ctx.t0_ns) / 1e9, 6),
                _num(r["duration_ms"]), _conn(r), _text(r["streams"]), str(r["cause"]),
                _text(r["mechanism"]), _text(r["hol_blocked_count"]),
                _text(r["evidence_frames"]), str(r["detail"]), ctx.code(str(r["wireshark_filter"])),
            ])
        parts.append(ctx.table(
            ["start s", "duration ms", "connection", "streams", "cause", "mechanism",
             "HOL-blocked streams", "evidence frames", "what happened", "Wireshark filter"],
            srows, numeric=(0, 1, 6), wrap=(3, 7, 8), total=len(st), source="stalls(cap)"))
    seq_note = _sequence_charts(ctx, st, parts)
    causes = st["cause"].astype(str).value_counts() if len(st) else pd.Series(dtype=int)
    note = (
        f"{len(rt):,} request{'' if len(rt) == 1 else 's'}; the {len(slowest)} slowest by total "
        "time with their time split (pcaptools.analyses.slow.request_timing: the parts add up "
        "to the total; the network round trip is an RTT measured on the connection before the "
        "request). "
        + (f"{len(st):,} stall{'' if len(st) == 1 else 's'} ("
           + ", ".join(f"{n} {str(c).replace('_', ' ')}" for c, n in causes.items())
           + f"; pcaptools.analyses.slow.stalls: {_RULE}). " if len(st)
           else f"No stall ({_RULE}). ")
        + seq_note
    )
    return Markup("".join(parts)), note


def _sequence_charts(ctx: ReportContextLike, st: pd.DataFrame, parts: list[Markup]) -> str:
    tcp = st[st["tcp_stream"].notna()] if len(st) else st
    if len(tcp) == 0:
        return ""
    if len(ctx.cap.packets) == 0:
        return ("No time-sequence chart: it needs the packets table (the capture was loaded "
                "with packets=False; load with packets=True).")
    worst = (tcp.groupby(tcp["tcp_stream"].astype(int))["duration_ms"].sum()
             .sort_values(ascending=False, kind="stable"))
    chosen = [int(s) for s in worst.index[:MAX_SEQUENCE_CONNECTIONS]]
    sampled = False
    conns = ctx.cap.connections.set_index("tcp_stream")
    for s in chosen:
        up = int(conns["client_bytes"].get(s, 0)) if s in conns.index else 0
        down = int(conns["server_bytes"].get(s, 0)) if s in conns.index else 0
        # the direction that carried the data (both when the upload was as large)
        dirs = ["server_to_client"] + (["client_to_server"] if up >= down else [])
        for d in dirs:
            ts = slow_charts.time_sequence_rows(ctx.cap.packets, s, d, ctx.t0_ns,
                                                MAX_SEQUENCE_POINTS, ctx.cap.tcp_sack_blocks)
            if ts is None:
                continue
            sampled |= ts.sampled
            fig = slow_charts.time_sequence_figure(ts)
            fig.update_layout(title={"text": f"tcp.stream {s}, {d.replace('_', ' ')}"})
            parts.append(ctx.figure(fig, f"slow-seq-{s}-{d[0]}"))
    note = (f"Time-sequence charts (tcptrace style: segments as bars, retransmissions red, ACK "
            f"and receive-window lines, the receiver's SACK blocks as purple bars; the "
            f"server's data, and the client's when it sent as much) of the {len(chosen)} "
            f"connection{'' if len(chosen) == 1 else 's'} that stalled longest"
            + (f" (of {len(worst)})" if len(worst) > len(chosen) else "") + ".")
    if sampled:
        note += (f" Charts thinned to {MAX_SEQUENCE_POINTS:,} segments, ACKs and SACK blocks "
                 "(resends kept).")
    return note


def _num(v: Any) -> float | None:
    return None if v is None or pd.isna(v) or math.isinf(float(v)) else round(float(v), 1)


def _text(v: Any) -> str:
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def _conn(r: Mapping[Any, Any]) -> str:
    if r["tcp_stream"] is not None and not pd.isna(r["tcp_stream"]):
        return f"tcp.stream {int(r['tcp_stream'])}"
    return f"QUIC {int(r['quic_connection'])}"
