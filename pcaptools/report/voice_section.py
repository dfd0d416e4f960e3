"""The report's realtime voice section (issue #17) and its checklist line.

Shown only when the capture has realtime events (``cap.realtime_events``: WebSocket JSON
text messages) that name their type (a top-level ``type``) or carry audio; otherwise the
builder returns None and the page has no such section (other JSON over WebSocket is an app's
own protocol, not a voice session). It reads
the analyses of :mod:`pcaptools.analyses.realtime` (computed once per report):

- one summary line per session (WebSocket connection with realtime events): turns, time to
  first audio, audio received, underruns, how the connection ended and what followed;
- turn latency per turn (chart: the request event, i.e. the end of the user's turn as
  :func:`~pcaptools.analyses.realtime.turns` defines it, to the server's first event and to
  the first audio chunk) and the turns table;
- audio cadence per stream (response audio and microphone audio): a chart of the time between
  chunks with playout stalls marked, a histogram of those times, and the cadence table
  (jitter, late chunks, underruns with the analysis' playout buffer);
- reconnect storms and their attempts;
- the heartbeat audit of the sessions' connections (ping interval, pong latency, longest
  silences against the documented idle timeouts).

Every capture string (response ids, event types, paths, close reasons) goes through the
page's escaping (:meth:`~.html.ReportContext.table` and friends; :mod:`.proto_charts` escapes
what reaches plotly.js).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from ..analyses.realtime import (
    audio_cadence,
    heartbeat_audit,
    reconnect_attempts,
    reconnect_storms,
    turns,
)
from ..analyses.summary import fmt_ms
from . import charts, proto_charts
from .context import CheckContext, CheckParts, SectionContext, cached, store
from .context import opt_float as _f
from .context import records as _records
from .context import text as _text

__all__ = ["MAX_AUDIO_STREAMS", "MAX_TURN_BARS", "VoiceAnalyses", "voice_analyses",
           "voice_check", "voice_parts"]

Cell = Any

#: turns drawn in the turn-latency chart (the table has every one)
MAX_TURN_BARS = 200
#: audio streams drawn in the cadence chart (the table has every one)
MAX_AUDIO_STREAMS = 40

_AUDIT_TIMEOUTS = (("survives_nat_30s", "NAT 30 s"), ("survives_aws_alb_60s", "ALB 60 s"),
                   ("survives_nginx_proxy_read_60s", "nginx 60 s"))


@dataclass(frozen=True, slots=True)
class VoiceAnalyses:
    """The realtime analyses of one capture, as the report uses them."""

    turns: pd.DataFrame
    cadence: pd.DataFrame
    """audio and mic rows of audio_cadence (SSE rows left out: the streaming section)"""
    storms: pd.DataFrame
    attempts: pd.DataFrame
    audit: pd.DataFrame
    """heartbeat_audit rows of the sessions' connections"""
    sessions: pd.DataFrame
    """one row per (tcp_stream, stream_id) with realtime events: ``events`` (those with a
    type or audio)"""


def voice_analyses(ctx: CheckContext) -> VoiceAnalyses | None:
    """The analyses for the section and its checklist line (computed once per report), or
    None when the capture has no realtime events."""
    found, value = cached(ctx, "voice")
    if found:
        known: VoiceAnalyses | None = value
        return known
    cap = ctx.cap
    ev = cap.realtime_events
    # realtime API events name themselves (a top-level "type") or carry audio; other JSON
    # over WebSocket (an app's own messages) is not a voice session
    ev = ev[(ev["type"].notna() | ev["audio_bytes"].notna()).to_numpy(bool)]
    out: VoiceAnalyses | None = None
    if len(ev):
        cad = audio_cadence(cap, sse=False)
        sessions = (ev.assign(stream_id=ev["stream_id"].astype("Int64"))
                    .groupby(["tcp_stream", "stream_id"], dropna=False, sort=True)
                    .size().rename("events").reset_index())
        d = ctx.disconnects()  # (the report's, with the default thresholds)
        audit = heartbeat_audit(cap, verdicts=d)
        audit = audit[audit["tcp_stream"].isin(sessions["tcp_stream"].tolist())]
        out = VoiceAnalyses(turns(cap), cad, reconnect_storms(cap, verdicts=d),
                            reconnect_attempts(cap, verdicts=d), audit.reset_index(drop=True),
                            sessions)
    store(ctx, "voice", out)
    return out


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{int(k):,} {one if int(k) == 1 else (many or one + 's')}"


def _ms_list(v: pd.Series, top: int = 6) -> str:
    vals = [fmt_ms(float(x)) for x in v.dropna().tolist()]
    if len(vals) > top:
        return (f"median {fmt_ms(float(v.median()))}, max {fmt_ms(float(v.max()))} "
                f"({len(vals):,} turns)")
    return ", ".join(vals)


def _same(df: pd.DataFrame, tcp: int, sid: Any) -> pd.DataFrame:
    s = df["stream_id"].astype("Int64")
    m = s.isna() if pd.isna(sid) else s.eq(int(sid)).fillna(False)
    out: pd.DataFrame = df[(df["tcp_stream"].to_numpy() == tcp) & m.to_numpy(bool)]
    return out


def _session_lines(ctx: SectionContext, va: VoiceAnalyses) -> list[Cell]:
    cap = ctx.cap
    ends = {int(r["tcp_stream"]): (
        f"{charts.endpoint(str(r['client_addr']), int(r['client_port']))} \u2192 "
        f"{charts.endpoint(str(r['server_addr']), int(r['server_port']))}")
        for r in _records(cap.connections[["tcp_stream", "client_addr", "client_port",
                                           "server_addr", "server_port"]])}
    ws = cap.ws_connections
    lines: list[Cell] = []
    for r in _records(va.sessions):
        tcp, sid = int(r["tcp_stream"]), r["stream_id"]
        name = proto_charts.stream_label(tcp, sid, None, None)
        if tcp in ends:
            name += f" ({ends[tcp]})"
        w = _same(ws, tcp, sid)
        if len(w) and _text(w["path"].iloc[0]):
            name += f" {w['path'].iloc[0]}"
        parts = [_n(int(r["events"]), "realtime event")]
        t = _same(va.turns, tcp, sid)
        if len(t):
            part = _n(len(t), "response")
            ttfa = t["time_to_first_audio_ms"]
            if ttfa.notna().any():
                part += f", time to first audio {_ms_list(ttfa)}"
            parts.append(part)
            chunks = int(t["audio_chunks"].sum())
            if chunks:
                audio = f"{_n(chunks, 'audio chunk')}"
                ams = t["audio_ms"].dropna()
                if len(ams) == len(t):
                    audio += f" ({float(ams.sum()) / 1000:.1f} s of audio)"
                parts.append(audio)
        else:
            parts.append("no response")
        cd = _same(va.cadence, tcp, sid)
        a = cd[cd["kind"].astype(str) == "audio"]
        if len(a):
            u = int(a["underruns"].sum())
            buf = float(a["buffer_ms"].iloc[0])
            parts.append(f"{_n(u, 'underrun')} with a {buf:g} ms playout buffer"
                         + (f" ({fmt_ms(float(a['underrun_ms'].sum()))} stalled)" if u else ""))
        au = va.audit[va.audit["tcp_stream"] == tcp]
        if len(au):
            x = au.iloc[0]
            if int(x["client_pings"]) or int(x["server_pings"]):
                hb = f"pings: {int(x['client_pings']):,} from the client"
                if not pd.isna(x["client_ping_interval_ms"]):
                    hb += f" every {fmt_ms(float(x['client_ping_interval_ms']))}"
                hb += f", {int(x['server_pings']):,} from the server"
                if int(x["unanswered_pings"]):
                    hb += f", {int(x['unanswered_pings']):,} unanswered"
                parts.append(hb)
            verdict = _text(x["verdict"])
            if verdict:
                parts.append(f"ended: {verdict.replace('_', ' ')}")
        if len(w) and not verdict_of(au):
            end = _text(w["end_reason"].iloc[0])
            if end:
                parts.append(f"WebSocket {end.replace('_', ' ')}")
        st = va.storms[va.storms["previous_tcp_stream"].eq(tcp).fillna(False).to_numpy(bool)]
        for s in _records(st):
            parts.append(_storm_text(s))
        lines.append(f"{name}: " + "; ".join(parts) + ".")
    return lines


def verdict_of(audit_rows: pd.DataFrame) -> str:
    """The disconnects verdict of a heartbeat_audit row ('' when none)."""
    return _text(audit_rows["verdict"].iloc[0]) if len(audit_rows) else ""


def _storm_text(s: dict[str, Any]) -> str:
    out = (f"reconnect storm {int(s['storm'])}: {_n(int(s['attempts']), 'attempt')} "
           f"({int(s['failed_attempts']):,} failed)")
    if _text(s["intervals_ms"]):
        out += f", intervals {str(s['intervals_ms']).replace(',', ', ')} ms"
    if _f(s["backoff_ratio"]) is not None:
        out += f" (backoff \u00d7{float(s['backoff_ratio']):.2f})"
    if str(s["outcome"]) == "connected":
        out += f", connected on tcp.stream {int(s['connected_tcp_stream'])}"
        if _f(s["down_ms"]) is not None:
            out += f" after {float(s['down_ms']) / 1000:.1f} s without a connection"
    else:
        out += ", never connected in the capture"
    return out


def _turn_filter(r: dict[str, Any]) -> str:
    f = f"tcp.stream eq {int(r['tcp_stream'])}"
    lo = r["request_frame"] if not pd.isna(r["request_frame"]) else r["first_event_frame"]
    hi = r["end_frame"]
    if not pd.isna(lo) and not pd.isna(hi):
        f += f" && frame.number >= {int(lo)} && frame.number <= {int(hi)}"
    return f


def _turns_table(ctx: SectionContext, t: pd.DataFrame) -> Markup:
    rows: list[list[Cell]] = []
    for r in _records(t.head(ctx.max_table_rows)):
        fmt = _text(r["audio_format"])
        if fmt and not pd.isna(r["sample_rate_hz"]):
            fmt += f" {int(r['sample_rate_hz']) / 1000:g} kHz"
        rows.append([
            int(r["tcp_stream"]), _text(r["response_id"]) or f"#{int(r['response_index'])}",
            _text(r["request_type"]),
            None if pd.isna(r["request_frame"]) else int(r["request_frame"]),
            _f(r["first_event_ms"]), _f(r["time_to_first_audio_ms"]),
            None if pd.isna(r["first_audio_frame"]) else int(r["first_audio_frame"]),
            int(r["audio_chunks"]), _f(r["audio_ms"]), fmt, int(r["transcript_chars"]),
            _f(r["duration_ms"]), _text(r["status"]) or _text(r["end_reason"]),
            int(r["errors"]) or None, ctx.code(_turn_filter(r)),
        ])
    return ctx.table(
        ["tcp.stream", "response", "asked by", "request frame", "first event ms",
         "time to first audio ms", "first audio frame", "audio chunks", "audio ms", "format",
         "transcript chars", "duration ms", "end", "errors", "Wireshark filter"],
        rows, numeric=(0, 3, 4, 5, 6, 7, 8, 10, 11, 13), total=len(t),
        source="analyses.realtime.turns(cap)",
    )


def _cadence_table(ctx: SectionContext, cd: pd.DataFrame) -> Markup:
    rows: list[list[Cell]] = []
    for r in _records(cd.head(ctx.max_table_rows)):
        rows.append([
            _text(r["kind"]), int(r["tcp_stream"]),
            _text(r["response_id"]) or ("" if pd.isna(r["response_index"])
                                        else f"#{int(r['response_index'])}"),
            int(r["chunks"]), _f(r["media_ms"]), _f(r["span_ms"]), _f(r["nominal_ms"]),
            _f(r["interarrival_p50_ms"]), _f(r["interarrival_p95_ms"]),
            _f(r["interarrival_max_ms"]), _f(r["jitter_ms"]), int(r["late_chunks"]),
            int(r["underruns"]), _f(r["underrun_ms"]),
            None if pd.isna(r["first_underrun_frame"]) else int(r["first_underrun_frame"]),
        ])
    return ctx.table(
        ["stream", "tcp.stream", "response", "chunks", "audio ms", "span ms", "chunk ms",
         "gap p50 ms", "gap p95 ms", "gap max ms", "jitter ms", "late chunks", "underruns",
         "stalled ms", "first underrun frame"],
        rows, numeric=tuple(range(3, 15)), total=len(cd),
        source="analyses.realtime.audio_cadence(cap)",
    )


def _storms_tables(ctx: SectionContext, va: VoiceAnalyses) -> Markup:
    rows: list[list[Cell]] = []
    for s in _records(va.storms.head(ctx.max_table_rows)):
        rows.append([
            int(s["storm"]), _text(s["client_addr"]), _text(s["server"]),
            None if pd.isna(s["previous_tcp_stream"]) else int(s["previous_tcp_stream"]),
            _text(s["previous_verdict"]).replace("_", " "), _f(s["detect_ms"]),
            int(s["attempts"]), int(s["failed_attempts"]), int(s["syn_retransmissions"]),
            _text(s["intervals_ms"]).replace(",", ", "),
            "" if _f(s["backoff_ratio"]) is None else f"\u00d7{float(s['backoff_ratio']):.2f}",
            _text(s["outcome"]),
            None if pd.isna(s["connected_tcp_stream"]) else int(s["connected_tcp_stream"]),
            _f(s["down_ms"]),
        ])
    out = ctx.table(
        ["storm", "client", "server", "after tcp.stream", "its verdict", "gave up after ms",
         "attempts", "failed", "SYN resends", "intervals ms", "backoff", "outcome",
         "connected tcp.stream", "down ms"],
        rows, numeric=(0, 3, 5, 6, 7, 8, 10, 12, 13), mono=(1, 2), wrap=(9,),
        total=len(va.storms), source="analyses.realtime.reconnect_storms(cap)",
    )
    rows = []
    for a in _records(va.attempts.head(ctx.max_table_rows)):
        rows.append([
            int(a["storm"]), int(a["attempt"]), int(a["tcp_stream"]), _text(a["client"]),
            int(a["frame"]), _f(a["interval_ms"]), int(a["syn_count"]),
            _text(a["outcome"]).replace("_", " "),
            ctx.code(f"tcp.stream eq {int(a['tcp_stream'])}"),
        ])
    return out + ctx.table(
        ["storm", "attempt", "tcp.stream", "client", "SYN frame", "interval ms", "SYNs",
         "outcome", "Wireshark filter"],
        rows, numeric=(0, 1, 2, 4, 5, 6), mono=(3,), total=len(va.attempts),
        source="analyses.realtime.reconnect_attempts(cap)",
    )


def _audit_table(ctx: SectionContext, au: pd.DataFrame) -> Markup:
    rows: list[list[Cell]] = []
    for r in _records(au.head(ctx.max_table_rows)):
        fails = [label for col, label in _AUDIT_TIMEOUTS if r[col] is False]
        unknown = [label for col, label in _AUDIT_TIMEOUTS if pd.isna(r[col])]
        survives = ("survives all" if not fails and not unknown
                    else "fails " + ", ".join(fails) if fails else "unknown")
        died = ""
        if r["died_idle"]:
            died = f"died idle after {fmt_ms(float(r['fatal_idle_ms']))}"
            if _f(r["keepalive_interval_ms"]) is not None:
                died += (f"; a heartbeat every {fmt_ms(float(r['keepalive_interval_ms']))} "
                         "or less would have kept it alive")
        rows.append([
            int(r["tcp_stream"]), _text(r["protocol"]), int(r["client_pings"]),
            int(r["server_pings"]), _f(r["client_ping_interval_ms"]),
            _f(r["pong_latency_p50_ms"]), _f(r["pong_latency_max_ms"]),
            int(r["unanswered_pings"]), _f(r["client_longest_silence_ms"]),
            _f(r["server_longest_silence_ms"]), _f(r["longest_idle_ms"]), survives,
            _text(r["verdict"]).replace("_", " "), died,
        ])
    return ctx.table(
        ["tcp.stream", "protocol", "client pings", "server pings", "client interval ms",
         "pong p50 ms", "pong max ms", "unanswered", "client silence ms", "server silence ms",
         "idle ms", "idle timeouts (NAT 30 s, ALB 60 s, nginx 60 s)", "verdict", "died idle"],
        rows, numeric=tuple(range(2, 11)), wrap=(13,), total=len(au),
        source="analyses.realtime.heartbeat_audit(cap)",
    )


def voice_parts(ctx: SectionContext) -> tuple[Markup, str | None] | None:
    """The realtime voice section's body and note; None (no section on the page) when the
    capture has no realtime events."""
    va = voice_analyses(ctx)
    if va is None:
        return None
    parts: list[Markup] = [ctx.items(_session_lines(ctx, va))]
    notes = []
    t = va.turns
    if len(t):
        rows, with_request = proto_charts.turn_latency_rows(t, MAX_TURN_BARS)
        fig = proto_charts.turn_latency_figure(rows)
        if fig is not None:
            parts.append(ctx.figure(fig, "voice-turns"))
        parts.append(_turns_table(ctx, t))
        notes.append(
            "Turn latency: from the request event that asked for the response (the end of "
            "the user's turn: response.create or input_audio_buffer.commit) to the server's "
            "first event and to the first audio chunk, at the capture point "
            "(analyses.realtime.turns).")
        if with_request > len(rows):
            notes.append(f"The turn chart shows the first {len(rows):,} of {with_request:,} "
                         "turns.")
        if with_request < len(t):
            k = len(t) - with_request
            notes.append(f"{_n(k, 'response')} had no request event in the capture (the "
                         "capture started later, or the server answered on its own): no time "
                         "to first audio, not charted.")
    cd = va.cadence
    if len(cd):
        ap = proto_charts.audio_chunk_points(ctx.cap, cd, ctx.t0_ns, MAX_AUDIO_STREAMS)
        fig = proto_charts.audio_cadence_figure(ap)
        if fig is not None:
            parts.append(ctx.figure(fig, "voice-cadence"))
        gaps = ap.points.dropna(subset=["gap_ms"])
        hist = charts.ms_histogram_figure(
            {"response audio": gaps.loc[gaps["kind"] == "audio", "gap_ms"],
             "microphone": gaps.loc[gaps["kind"] == "mic", "gap_ms"]},
            "ms between consecutive chunks", "chunks")
        if hist is not None:
            parts.append(ctx.figure(hist, "voice-gaps"))
        parts.append(_cadence_table(ctx, cd))
        buf = float(cd["buffer_ms"].iloc[0])
        notes.append(
            "Audio cadence (analyses.realtime.audio_cadence): per response's audio and per "
            "turn's microphone audio, the time between chunks (chart; red crosses: chunks that "
            f"arrived after a {buf:g} ms playout buffer ran dry), its distribution, and "
            "RFC 3550 jitter against the audio's own clock.")
        if ap.left_out:
            notes.append(f"{_n(ap.left_out, 'audio stream')} not charted (beyond "
                         f"{MAX_AUDIO_STREAMS} streams, or chunks interleaved with another "
                         "response's); the table has every one.")
    if len(va.storms):
        parts.append(_storms_tables(ctx, va))
        notes.append("Reconnect storms: the attempts from one client to one server after a "
                     "failure, intervals start to start (analyses.realtime.reconnect_storms).")
    if len(va.audit):
        parts.append(_audit_table(ctx, va.audit))
        notes.append("Heartbeat audit of the sessions' connections: longest silences against "
                     "common idle timeouts (analyses.realtime.heartbeat_audit).")
    return Markup("".join(parts)), " ".join(notes) or None


def voice_check(ctx: CheckContext) -> CheckParts | None:
    """The checklist line: voice turn latency and audio underruns; None without realtime
    events (no line)."""
    va = voice_analyses(ctx)
    if va is None:
        return None
    t = va.turns
    n_sess = len(va.sessions)
    if not len(t):
        return CheckParts("info",
                     f"{_n(int(va.sessions['events'].sum()), 'realtime event')} on "
                     f"{_n(n_sess, 'session')}, no response.")
    text = f"{_n(len(t), 'turn')} on {_n(n_sess, 'session')}"
    ttfa = t["time_to_first_audio_ms"].dropna()
    worst = flt = None
    if len(ttfa) == 1:
        text += f", time to first audio {fmt_ms(float(ttfa.iloc[0]))}"
    elif len(ttfa):
        text += (f", time to first audio median {fmt_ms(float(ttfa.median()))} "
                 f"(max {fmt_ms(float(ttfa.max()))})")
        r = _records(t.iloc[[int(np.nanargmax(t["time_to_first_audio_ms"].to_numpy(
            dtype=np.float64)))]])[0]
        who = proto_charts.stream_label(r["tcp_stream"], r["stream_id"], r["response_index"],
                                        r["response_id"])
        worst = f"slowest: {who}, {fmt_ms(float(r['time_to_first_audio_ms']))}"
        flt = _turn_filter(r)
    status = "info"
    a = va.cadence[va.cadence["kind"].astype(str) == "audio"]
    if len(a):
        u = int(a["underruns"].sum())
        buf = float(a["buffer_ms"].iloc[0])
        text += f"; {_n(u, 'audio underrun')} with a {buf:g} ms playout buffer"
        if u:
            status = "warn"
            text += f" ({fmt_ms(float(a['underrun_ms'].sum()))} stalled)"
            b = _records(a[a["underruns"] > 0].head(1))[0]
            who = proto_charts.stream_label(b["tcp_stream"], b["stream_id"],
                                            b["response_index"], b["response_id"])
            worst = (f"{who}: {_n(int(b['underruns']), 'underrun')}, first at frame "
                     f"{int(b['first_underrun_frame'])}")
            flt = (f"tcp.stream eq {int(b['tcp_stream'])} && frame.number == "
                   f"{int(b['first_underrun_frame'])}")
    if len(va.storms):
        k = int(va.storms["attempts"].sum())
        text += f"; {_n(len(va.storms), 'reconnect storm')} ({_n(k, 'attempt')})"
        status = "warn"
    return CheckParts(status, text + ".", worst, flt)
