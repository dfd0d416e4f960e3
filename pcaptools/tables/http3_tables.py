"""The HTTP/3 tables: ``http3_connections`` (SETTINGS, QPACK and GOAWAY per connection),
``http3_frames`` (one row per HTTP/3 frame), ``http3_streams`` (one row per request stream, the
shape of ``http2_streams``), ``http3_pushes`` (one row per server push: its promised request
and its push stream) and ``http3_sse_events`` (the server-sent events of
``text/event-stream`` responses, the shape of ``sse_events``), built from the
:class:`~pcaptools.protocols.http3.Http3Observer` of every QUIC connection that negotiated
ALPN ``h3``.

HTTP/3 runs over QUIC connections, not TCP ones: rows are keyed by ``quic_connection``
(``quic_connections.quic_connection``, tshark's ``quic.connection.number``) and the QUIC
stream id, never by a ``tcp_stream``. The SSE events of HTTP/3 responses are kept out of
``sse_events`` (whose rows are keyed by ``tcp_stream``) for that reason; both tables have the
same event columns, so ``pd.concat`` of the two gives every event of a capture.

HTTP/3 needs the QUIC packets decrypted (a key log): without one these tables are empty and
``quic_connections`` says why. tshark 4.0 has no HTTP/3 dissector, so no column here is
compared with tshark; the tests compare them with what the aioquic peers sent and with the
recorded timelines of the shipped captures.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..protocols.http3 import Http3Frame, Http3StreamEnded
from ..protocols.http3.frames import error_name, frame_type_name, settings_text
from ..protocols.sse import SseEvent
from ..tcp.stream import Direction
from .http_tables import _coding_columns
from .schema import TS_DTYPE, Column, TableSchema

if TYPE_CHECKING:  # (the observer module, with pylsqpack, is imported by a load with HTTP/3)
    from ..protocols.http3.observer import Http3Observer, Http3Push

__all__ = [
    "HTTP3_CONNECTIONS",
    "HTTP3_FRAMES",
    "HTTP3_PUSHES",
    "HTTP3_SSE_EVENTS",
    "HTTP3_STREAMS",
    "HTTP3_TABLES",
    "http3_tables",
]

_QUIC_CONNECTION = Column("quic_connection", "int64", None,
                          "quic_connections.quic_connection of the connection (tshark "
                          "quic.connection.number)")
_STREAM_ID = Column("stream_id", "int64", None,
                    "QUIC stream id (RFC 9000 §2.1; request streams are 0, 4, 8...)")

HTTP3_FRAMES = TableSchema(
    name="http3_frames",
    grain="one row per HTTP/3 frame on a request, push or control stream (QPACK encoder and "
    "decoder streams carry instructions, not frames); needs a key log",
    key=("quic_connection", "stream_id", "direction", "frame", "index"),
    columns=(
        Column("frame", "int64", None,
               "packet that delivered the frame's last byte (of its header, for DATA and "
               "skipped frames: of its last payload byte)"),
        Column("ts", TS_DTYPE, None, "time of frame"),
        _QUIC_CONNECTION,
        _STREAM_ID,
        Column("index", "int64", None,
               "0-based order of the frame among its connection's frames, in the order they "
               "were parsed"),
        Column("direction", "category", None, "client_to_server or server_to_client"),
        Column("stream_kind", "category", None, "request, push or control"),
        Column("type", "category", None,
               "DATA, HEADERS, CANCEL_PUSH, SETTINGS, PUSH_PROMISE, GOAWAY, MAX_PUSH_ID; "
               "reserved (grease 0x1f*N+0x21), http2_only (0x02, 0x06, 0x08, 0x09) or "
               "unknown: skipped"),
        Column("type_code", "int64", None, "frame type code"),
        Column("length", "int64", "bytes", "payload length from the frame header"),
        Column("method", "string", None, "HEADERS of a request: :method"),
        Column("path", "string", None, "HEADERS of a request: :path", secret="url"),
        Column("status", "Int64", None, "HEADERS of a response: :status"),
        Column("qpack", "category", None,
               "HEADERS / PUSH_PROMISE field section: decoded (at once), blocked (waited "
               "for encoder-stream bytes, decoded in decoded_frame), failed "
               "(http3.qpack_decode_failed), never_decoded (http3.qpack_blocked: the "
               "encoder-stream bytes or SETTINGS it needs were not captured), too_long "
               "(http3.frame_too_long)"),
        Column("decoded_frame", "Int64", None,
               "packet whose bytes made the field section decodable (frame when decoded at "
               "once)"),
        Column("settings", "string", None,
               "SETTINGS: NAME=value;... in wire order (QPACK_MAX_TABLE_CAPACITY, "
               "MAX_FIELD_SECTION_SIZE, QPACK_BLOCKED_STREAMS, ENABLE_CONNECT_PROTOCOL, "
               "H3_DATAGRAM, reserved_0x.., 0x..)"),
        Column("goaway_id", "Int64", None,
               "GOAWAY: stream id (from the server) or push id (from the client)"),
        Column("push_id", "Int64", None, "PUSH_PROMISE, CANCEL_PUSH, MAX_PUSH_ID: push id"),
        Column("headers", "object", None,
               "HEADERS / PUSH_PROMISE: decoded field list ((name, value) tuples; "
               "credentials redacted unless show_secrets); None if not decoded",
               secret="headers"),
    ),
)

HTTP3_STREAMS = TableSchema(
    name="http3_streams",
    grain="one row per HTTP/3 request stream (client-initiated bidirectional QUIC stream) "
    "per QUIC connection; needs a key log",
    key=("quic_connection", "stream_id"),
    columns=(
        _QUIC_CONNECTION,
        _STREAM_ID,
        Column("partial", "bool", None,
               "the first bytes of the stream were not captured (its request HEADERS may be "
               "missing)"),
        Column("method", "string", None, ":method"),
        Column("scheme", "string", None, ":scheme"),
        Column("authority", "string", None, ":authority (else the host header)",
               secret="authority"),
        Column("path", "string", None, ":path", secret="url"),
        Column("status", "Int64", None,
               ":status of the final (non-1xx) response; NA when its field section was not "
               "decoded"),
        Column("content_type", "string", None, "response content-type"),
        Column("informational", "int64", None, "1xx responses before the final one"),
        Column("first_frame", "int64", None, "packet of the first byte seen on the stream"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("request_frame", "Int64", None,
               "packet that completed the request HEADERS frame"),
        Column("request_ts", TS_DTYPE, None, "time of request_frame"),
        Column("request_end_ts", TS_DTYPE, None,
               "FIN of the client's side of the stream (request fully sent)"),
        Column("response_headers_frame", "Int64", None,
               "packet that completed the final response HEADERS frame (its time, even when "
               "QPACK could decode it only later)"),
        Column("response_headers_ts", TS_DTYPE, None, "time of response_headers_frame"),
        Column("first_data_ts", TS_DTYPE, None, "first DATA frame from the server"),
        Column("end_frame", "int64", None,
               "packet that ended the stream: the server's FIN (end_stream), the first "
               "RESET_STREAM (reset), or the stream's last packet (open_at_end)"),
        Column("end_ts", TS_DTYPE, None, "time of end_frame"),
        Column("ttfb_ms", "float64", "ms",
               "response_headers_ts minus request_end_ts (request_ts when the request never "
               "ended); NaN if no response"),
        Column("first_data_ms", "float64", "ms",
               "first_data_ts minus the same request time: time to the first body byte"),
        Column("duration_ms", "float64", "ms",
               "end_ts minus request_ts (first_ts when the request was not seen)"),
        Column("client_data_bytes", "int64", "bytes", "DATA payload bytes sent by the client"),
        Column("server_data_bytes", "int64", "bytes",
               "DATA payload bytes sent by the server (bytes lost inside DATA frames "
               "included): the wire body bytes, still content-encoded (decoded: "
               "response_decoded_bytes)"),
        Column("client_header_bytes", "int64", "bytes",
               "QPACK field section bytes of the client's HEADERS frames"),
        Column("server_header_bytes", "int64", "bytes",
               "QPACK field section bytes of the server's HEADERS frames"),
        Column("client_frames", "int64", "frames", "HTTP/3 frames on this stream from the client"),
        Column("server_frames", "int64", "frames", "HTTP/3 frames on this stream from the server"),
        Column("end_reason", "category", None,
               "end_stream (both sides ended with FIN), reset (RESET_STREAM: see reset_by), "
               "open_at_end (neither by the connection's end: its CONNECTION_CLOSE or the "
               "end of the capture)"),
        Column("reset_error", "category", None,
               "RESET_STREAM error code name (H3_REQUEST_CANCELLED...)"),
        Column("reset_error_code", "Int64", None, "RESET_STREAM application error code"),
        Column("reset_by", "category", None, "client or server: who sent the RESET_STREAM"),
        Column("desynced", "bool", None,
               "part of the stream was not parsed: bytes lost outside a DATA payload, a frame "
               "that does not parse, or a FIN inside a frame (a warning row says which)"),
        Column("sse_events", "int64", "events",
               "server-sent events parsed from the response (text/event-stream), after "
               "content decoding (http3_sse_events)"),
        *_coding_columns("server_data_bytes (the wire body bytes)"),
        Column("request_headers", "object", None,
               "request field list ((name, value) tuples); None if not decoded",
               secret="headers"),
        Column("response_headers", "object", None,
               "final response field list; None if not decoded", secret="headers"),
    ),
)

HTTP3_SSE_EVENTS = TableSchema(
    name="http3_sse_events",
    grain="one row per server-sent event of a text/event-stream response over HTTP/3 (the "
    "columns of sse_events, keyed by quic_connection instead of tcp_stream)",
    key=("quic_connection", "stream_id", "index"),
    columns=(
        Column("frame", "int64", None, "packet that delivered the blank line ending the event"),
        Column("ts", TS_DTYPE, None, "time of that packet: when the event was complete"),
        _QUIC_CONNECTION,
        Column("http_version", "category", None, "3"),
        _STREAM_ID,
        Column("index", "int64", None, "0-based number of the event within its response"),
        Column("event", "string", None, "event type (the event field; 'message' by default)"),
        Column("id", "string", None,
               "last event ID in effect (persists across events); NA if never set"),
        Column("retry_ms", "Int64", "ms", "retry field of this event; NA when it has none, or one "
               "longer than int64 holds (warning sse.bad_retry)"),
        Column("data", "string", None,
               "data lines joined with LF; values of credential-looking JSON fields "
               "redacted unless show_secrets", secret="text"),
        Column("data_bytes", "int64", "bytes",
               "bytes of the data lines as received, joined with LF"),
        Column("json_ok", "boolean", None,
               "data parsed as JSON (True), looked like JSON but did not parse (False), NA: "
               "not JSON"),
        Column("delta_text", "string", None,
               "LLM streamed text (as sse_events.delta_text: OpenAI, Anthropic...)"),
        Column("done", "bool", None, "data is the [DONE] end marker"),
        Column("finish_reason", "string", None,
               "choices[0].finish_reason / delta.stop_reason when present"),
    ),
)

def _sides(what: str, dtype: str, unit: str | None, meaning: str) -> tuple[Column, ...]:
    return (
        Column(f"client_{what}", dtype, unit, f"{meaning} (client)"),
        Column(f"server_{what}", dtype, unit, f"{meaning} (server)"),
    )


HTTP3_CONNECTIONS = TableSchema(
    name="http3_connections",
    grain="one row per QUIC connection whose streams reached the HTTP/3 observer (ALPN h3 "
    "and a key log)",
    key=("quic_connection",),
    columns=(
        _QUIC_CONNECTION,
        *_sides("settings", "string", None,
                "SETTINGS sent, NAME=value;... (NA: no SETTINGS captured)"),
        *_sides("qpack_max_table_capacity", "Int64", "bytes",
                "SETTINGS_QPACK_MAX_TABLE_CAPACITY announced: the dynamic table the other "
                "side's encoder may use"),
        *_sides("qpack_blocked_streams", "Int64", "streams",
                "SETTINGS_QPACK_BLOCKED_STREAMS announced"),
        *_sides("control_stream", "Int64", None, "stream id of the control stream"),
        *_sides("encoder_stream_bytes", "int64", "bytes", "QPACK encoder stream bytes"),
        *_sides("field_sections", "int64", None,
                "QPACK field sections sent (HEADERS, PUSH_PROMISE) that were decoded"),
        *_sides("blocked_field_sections", "int64", None,
                "of those, the ones that waited for encoder-stream bytes"),
        *_sides("undecoded_field_sections", "int64", None,
                "field sections never decoded (http3.qpack_blocked) or that failed "
                "(http3.qpack_decode_failed)"),
        Column("request_streams", "int64", "streams", "rows of http3_streams"),
        Column("desynced_streams", "int64", "streams",
               "request streams with a part not parsed (http3_streams.desynced)"),
        Column("frames", "int64", "frames",
               "HTTP/3 frames parsed on request, push and control streams (rows of "
               "http3_frames, plus any past its row limit)"),
        Column("reserved_frames", "int64", "frames", "reserved (grease) frames skipped"),
        Column("unknown_frames", "int64", "frames", "frames of unknown types skipped"),
        Column("goaway_by", "category", None, "client or server: who sent the last GOAWAY"),
        Column("goaway_id", "Int64", None, "its stream id (server) or push id (client)"),
    ),
)

HTTP3_PUSHES = TableSchema(
    name="http3_pushes",
    grain="one row per server push (RFC 9114 §4.6) of a QUIC connection: a push id named by "
    "a PUSH_PROMISE on a request stream, by a push stream, or by a CANCEL_PUSH",
    key=("quic_connection", "push_id"),
    columns=(
        _QUIC_CONNECTION,
        Column("push_id", "int64", None, "the push id"),
        Column("promises", "int64", "frames",
               "PUSH_PROMISE frames with this push id (0: the promise was not captured)"),
        Column("promise_stream_id", "Int64", None,
               "request stream (http3_streams.stream_id) of the first PUSH_PROMISE: the "
               "request the push belongs to"),
        Column("promise_frame", "Int64", None, "packet that completed that PUSH_PROMISE"),
        Column("promise_ts", TS_DTYPE, None, "time of promise_frame"),
        Column("method", "string", None,
               ":method of the promised request (its field section); NA if not decoded"),
        Column("scheme", "string", None, ":scheme of the promised request"),
        Column("authority", "string", None, ":authority of the promised request",
               secret="authority"),
        Column("path", "string", None, ":path of the promised request", secret="url"),
        Column("push_stream_id", "Int64", None,
               "the push stream (server-initiated unidirectional, type 0x01) carrying the "
               "response; NA when no push stream with this push id was captured"),
        Column("push_stream_frame", "Int64", None,
               "packet that delivered the push stream's push id"),
        Column("push_stream_ts", TS_DTYPE, None, "time of push_stream_frame"),
        Column("status", "Int64", None, "pushed response :status; NA if not seen or decoded"),
        Column("content_type", "string", None, "pushed response content-type"),
        Column("informational", "int64", None, "1xx field sections before the final one"),
        Column("response_headers_frame", "Int64", None,
               "packet that completed the pushed response's final HEADERS frame"),
        Column("data_bytes", "int64", "bytes", "DATA payload bytes of the push stream"),
        Column("end_reason", "category", None,
               "end_stream (the push stream ended with FIN), reset (RESET_STREAM), open (it "
               "had not ended by the end of the capture), not_seen (no push stream)"),
        Column("end_frame", "Int64", None, "packet with the FIN or RESET_STREAM"),
        Column("reset_error_code", "Int64", None, "RESET_STREAM application error code"),
        Column("cancelled_by", "category", None,
               "client or server: who sent CANCEL_PUSH for this push id; NA: nobody"),
        Column("request_headers", "object", None,
               "promised request field list ((name, value) tuples); None if not decoded",
               secret="headers"),
        Column("response_headers", "object", None,
               "pushed response field list; None if not decoded", secret="headers"),
    ),
)

HTTP3_TABLES: dict[str, TableSchema] = {
    "http3_connections": HTTP3_CONNECTIONS,
    "http3_frames": HTTP3_FRAMES,
    "http3_streams": HTTP3_STREAMS,
    "http3_pushes": HTTP3_PUSHES,
    "http3_sse_events": HTTP3_SSE_EVENTS,
}
"""the tables this module builds, by Capture attribute name"""


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else (a - b) / 1e6


def _party(d: Direction | None) -> str | None:
    if d is None:
        return None
    return "client" if d == Direction.CLIENT_TO_SERVER else "server"


def _field(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    for k, v in headers:
        if k == name:
            return str(v)
    return None


def _frame_row(i: int, f: Http3Frame) -> tuple[Any, ...]:
    h = f.headers
    status = _field(h, ":status")
    return (
        f.frame, f.ts_ns, f.quic_connection, f.stream_id, i, f.direction.label, f.stream_kind,
        frame_type_name(f.type), f.type, f.length, _field(h, ":method"),
        _field(h, ":path"),
        int(status) if status is not None and status.isdigit() else None,
        f.qpack, f.decoded_frame,
        settings_text(f.settings) if f.settings is not None else None,
        f.goaway_id, f.push_id, h,
    )


def _stream_row(e: Http3StreamEnded) -> tuple[Any, ...]:
    req_t = e.request_end_ts_ns if e.request_end_ts_ns is not None else e.request_ts_ns
    return (
        e.quic_connection, e.stream_id, e.partial, e.method, e.scheme,
        e.authority, e.path, e.status, e.content_type,
        e.informational, e.first_frame, e.first_ts_ns, e.request_frame, e.request_ts_ns,
        e.request_end_ts_ns, e.response_headers_frame, e.response_headers_ts_ns,
        e.first_data_ts_ns, e.end_frame, e.end_ts_ns,
        _ms(e.response_headers_ts_ns, req_t), _ms(e.first_data_ts_ns, req_t),
        _ms(e.end_ts_ns, e.request_ts_ns if e.request_ts_ns is not None else e.first_ts_ns),
        e.client_data_bytes, e.server_data_bytes, e.client_header_bytes,
        e.server_header_bytes, e.client_frames, e.server_frames, e.end_reason,
        error_name(e.reset_error_code), e.reset_error_code, _party(e.reset_by), e.desynced,
        e.sse_events, e.content_encoding, e.decoded_body_bytes, e.content_decoding,
        e.request_headers, e.response_headers,
    )


def _push_row(obs: Http3Observer, p: Http3Push) -> tuple[Any, ...]:
    end, end_frame, code = obs.push_end(p)
    req = p.request_headers
    return (
        obs.connection, p.push_id, p.promises, p.promise_stream_id, p.promise_frame,
        p.promise_ts, _field(req, ":method"), _field(req, ":scheme"),
        _field(req, ":authority"), _field(req, ":path"),
        p.stream_id, p.stream_frame, p.stream_ts, p.status,
        _field(p.response_headers, "content-type"), p.informational, p.response_frame,
        p.data_bytes, end, end_frame, code, _party(p.cancelled_by), req, p.response_headers,
    )


def _sse_rows(connection: int, events: list[SseEvent]) -> list[tuple[Any, ...]]:
    return [
        (e.frame, e.ts_ns, connection, "3", e.stream_id, e.index, e.event_type, e.event_id,
         e.retry_ms, e.data, e.data_bytes, e.json_ok, e.delta_text, e.done, e.finish_reason)
        for e in events
    ]


def _connection_row(obs: Http3Observer) -> tuple[Any, ...]:
    c2s, s2c = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
    cs, ss = obs.settings.get(c2s), obs.settings.get(s2c)
    qc, qs = obs.qpack(c2s), obs.qpack(s2c)
    by: Direction | None = None
    if obs.goaway:
        by = s2c if s2c in obs.goaway else c2s  # the server's GOAWAY counts if both sent one
    return (
        obs.connection,
        settings_text(cs) if cs is not None else None,
        settings_text(ss) if ss is not None else None,
        dict(cs).get(0x01, 0) if cs is not None else None,
        dict(ss).get(0x01, 0) if ss is not None else None,
        dict(cs).get(0x07, 0) if cs is not None else None,
        dict(ss).get(0x07, 0) if ss is not None else None,
        obs.uni_stream(c2s, "control"), obs.uni_stream(s2c, "control"),
        qc.encoder_bytes, qs.encoder_bytes, qc.decoded, qs.decoded, qc.blocked, qs.blocked,
        qc.failed + qc.never, qs.failed + qs.never,
        len(obs.streams), obs.desynced_streams, len(obs.frames) + obs.frame_rows_dropped,
        obs.reserved_frames, obs.unknown_frames,
        _party(by), obs.goaway[by] if by is not None else None,
    )


def http3_tables(observers: Iterable[Http3Observer]) -> dict[str, pd.DataFrame]:
    """The five HTTP/3 tables from the observers of a load's QUIC connections (empty, with
    every column, when there are none): frames and events in capture order (frame, then
    connection), streams by connection and stream id. Values are kept as seen: ``load()``
    redacts the columns marked ``secret`` (as every table's) unless ``show_secrets``."""
    frames: list[tuple[Any, ...]] = []
    streams: list[tuple[Any, ...]] = []
    pushes: list[tuple[Any, ...]] = []
    sse: list[tuple[Any, ...]] = []
    conns: list[tuple[Any, ...]] = []
    for obs in sorted(observers, key=lambda o: o.connection):
        conns.append(_connection_row(obs))
        frames += [_frame_row(i, f) for i, f in enumerate(obs.frames)]
        streams += [_stream_row(e) for e in sorted(obs.streams, key=lambda e: e.stream_id)]
        pushes += [_push_row(obs, p) for _, p in sorted(obs.pushes.items())]
        sse += _sse_rows(obs.connection, obs.sse)
    # capture order, as every per-record table (and as the parallel load merges them)
    frames.sort(key=lambda r: (r[0], r[2]))
    sse.sort(key=lambda r: (r[0], r[2]))
    return {
        "http3_connections": HTTP3_CONNECTIONS.frame(conns),
        "http3_frames": HTTP3_FRAMES.frame(frames),
        "http3_streams": HTTP3_STREAMS.frame(streams),
        "http3_pushes": HTTP3_PUSHES.frame(pushes),
        "http3_sse_events": HTTP3_SSE_EVENTS.frame(sse),
    }
