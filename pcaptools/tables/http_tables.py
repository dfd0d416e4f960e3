"""Schemas and builders of the HTTP tables: http2_frames, http2_streams, http2_connections,
http_requests (HTTP/1.x) and sse_events.

The observers (:mod:`pcaptools.protocols.http1`, :mod:`~pcaptools.protocols.http2`,
:mod:`~pcaptools.protocols.sse`) return events; :class:`HttpTablesBuilder` turns each one
into a row tuple at once (times stay integer ns) and :meth:`HttpTablesBuilder.tables`
builds the DataFrames. Events of other kinds are ignored, so the pipeline can hand it
everything an observer returns.

Comparing with tshark: ``http2_frames`` has one row per frame where tshark has one
``http2.type`` value, on the same ``frame`` (the packet that delivered the frame's last
byte); ``http_requests.request_frame`` / ``response_frame`` are the frames tshark marks
``http.request`` / ``http.response``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from .._columns import NA, CodeColumn, IntColumn
from ..protocols._base import Direction
from ..protocols.http1 import HttpExchange, ProtocolSwitched, parse_retry_after
from ..protocols.http2 import (
    ERROR_CODES,
    FRAME_TYPES,
    SETTINGS_NAMES,
    Http2ConnectionEnded,
    Http2Frame,
    Http2StreamEnded,
    flags_text,
)
from ..protocols.sse import SseEvent
from .schema import TS_DTYPE, Column, TableSchema

__all__ = [
    "HTTP2_CONNECTIONS",
    "HTTP2_FRAMES",
    "HTTP2_STREAMS",
    "HTTP_REQUESTS",
    "HTTP_TABLES",
    "SECRET_HEADERS",
    "SSE_EVENTS",
    "HttpTablesBuilder",
    "redact_headers",
    "settings_text",
]

#: header names whose values are credentials: redacted in every table unless
#: ``load(show_secrets=True)`` (compared lower-case; HTTP/2 names are lower-case on the wire)
SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
    "x-auth-token", "x-goog-api-key", "openai-organization", "anthropic-api-key",
})  # fmt: skip


def redact_headers(
    headers: tuple[tuple[str, str], ...] | None,
) -> tuple[tuple[str, str], ...] | None:
    """``headers`` with the value of every :data:`SECRET_HEADERS` header replaced by
    ``<redacted: N bytes>`` (the length stays visible, the credential does not)."""
    if headers is None or not any(k.lower() in SECRET_HEADERS for k, _ in headers):
        return headers
    return tuple(
        (k, f"<redacted: {len(v)} bytes>") if k.lower() in SECRET_HEADERS else (k, v)
        for k, v in headers
    )


_TCP_STREAM = Column("tcp_stream", "int64", None, "Wireshark tcp.stream index of the connection")
_DIRECTION = Column("direction", "category", None, "client_to_server or server_to_client")

HTTP2_FRAMES = TableSchema(
    name="http2_frames",
    grain="one row per complete HTTP/2 frame (cleartext h2c or decrypted TLS)",
    key=("tcp_stream", "frame", "direction", "stream_id", "type"),
    columns=(
        Column(
            "frame",
            "int64",
            None,
            "packet that delivered the frame's last byte (where tshark shows the frame)",
        ),
        Column("ts", TS_DTYPE, None, "capture time of that packet"),
        _TCP_STREAM,
        _DIRECTION,
        Column("stream_id", "int64", None, "http2.streamid (0 for connection frames)"),
        Column(
            "type",
            "category",
            None,
            "DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, "
            "WINDOW_UPDATE, CONTINUATION or unknown",
        ),
        Column("type_code", "int64", None, "http2.type: the frame type number"),
        Column("flags", "int64", None, "http2.flags"),
        Column(
            "flag_names",
            "category",
            None,
            "the flags set, by name, '|'-joined (END_STREAM|END_HEADERS, ACK...)",
        ),
        Column("length", "int64", "bytes", "http2.length: payload length from the frame header"),
        Column("pad_length", "Int64", "bytes", "padding length when the PADDED flag is set"),
        Column("end_stream", "bool", None, "DATA/HEADERS with END_STREAM"),
        Column("ack", "bool", None, "SETTINGS/PING with ACK"),
        Column("data_bytes", "Int64", "bytes", "DATA: payload bytes excluding padding"),
        Column(
            "header_block_bytes",
            "Int64",
            "bytes",
            "HEADERS/PUSH_PROMISE/CONTINUATION: HPACK fragment bytes in this frame",
        ),
        Column("method", "string", None, ":method of the header block this frame completed"),
        Column("path", "string", None, ":path of the header block this frame completed"),
        Column("status", "Int64", None, ":status of the header block this frame completed"),
        Column(
            "headers",
            "object",
            None,
            "decoded header list ((name, value) tuples) on the frame that ended a header block; "
            "None when undecodable or not a header frame",
        ),
        Column(
            "settings",
            "string",
            None,
            "SETTINGS (not ACK): NAME=value pairs, ';'-joined, in wire order",
        ),
        Column("window_increment", "Int64", "bytes", "WINDOW_UPDATE increment"),
        Column(
            "error",
            "category",
            None,
            "RST_STREAM/GOAWAY error code name (NO_ERROR, CANCEL, ...; 0x.. if unknown)",
        ),
        Column("error_code", "Int64", None, "RST_STREAM/GOAWAY error code"),
        Column("ping_data", "string", None, "PING opaque data, hex"),
        Column(
            "ping_rtt_ms",
            "float64",
            "ms",
            "PING with ACK: time since the PING with the same data from the other side",
        ),
        Column("last_stream_id", "Int64", None, "GOAWAY last stream id"),
        Column(
            "goaway_debug",
            "string",
            None,
            "GOAWAY additional debug data (UTF-8, invalid bytes replaced)",
        ),
        Column("promised_stream_id", "Int64", None, "PUSH_PROMISE promised stream id"),
        Column(
            "priority_exclusive",
            "boolean",
            None,
            "PRIORITY / HEADERS with PRIORITY: exclusive flag",
        ),
        Column(
            "priority_dependency",
            "Int64",
            None,
            "PRIORITY / HEADERS with PRIORITY: stream dependency",
        ),
        Column(
            "priority_weight",
            "Int64",
            None,
            "PRIORITY / HEADERS with PRIORITY: weight field as sent (real weight is +1)",
        ),
    ),
)

HTTP2_STREAMS = TableSchema(
    name="http2_streams",
    grain="one row per HTTP/2 stream per TCP connection (every stream id > 0 seen in a frame)",
    key=("tcp_stream", "stream_id"),
    columns=(
        _TCP_STREAM,
        Column("stream_id", "int64", None, "HTTP/2 stream identifier (RFC 9113 §5.1.1)"),
        Column("pushed", "bool", None, "server push: the request is a PUSH_PROMISE"),
        Column(
            "parent_stream_id",
            "Int64",
            None,
            "pushed streams: the stream that carried the PUSH_PROMISE",
        ),
        Column(
            "partial",
            "bool",
            None,
            "the request HEADERS was not captured (capture started mid-stream)",
        ),
        Column("method", "string", None, ":method"),
        Column("scheme", "string", None, ":scheme"),
        Column("authority", "string", None, ":authority (else the host header)"),
        Column("path", "string", None, ":path"),
        Column("status", "Int64", None, ":status of the final (non-1xx) response"),
        Column("content_type", "string", None, "response content-type"),
        Column("informational", "int64", None, "1xx responses before the final one"),
        Column("first_frame", "int64", None, "packet of the first frame seen on the stream"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("request_frame", "Int64", None, "packet that completed the request header block"),
        Column("request_ts", TS_DTYPE, None, "time of request_frame"),
        Column("request_end_ts", TS_DTYPE, None, "END_STREAM from the client (request fully sent)"),
        Column(
            "response_headers_frame",
            "Int64",
            None,
            "packet that completed the final response header block",
        ),
        Column("response_headers_ts", TS_DTYPE, None, "time of response_headers_frame"),
        Column("first_data_ts", TS_DTYPE, None, "first DATA frame from the server"),
        Column(
            "end_frame",
            "int64",
            None,
            "packet of the frame that ended the stream (END_STREAM, RST_STREAM, GOAWAY), "
            "of the connection's end (connection_closed) or the stream's last frame "
            "(open_at_eof, idle, evicted)",
        ),
        Column("end_ts", TS_DTYPE, None, "time of end_frame"),
        Column(
            "ttfb_ms",
            "float64",
            "ms",
            "response_headers_ts minus request_end_ts (request_ts when the request never "
            "ended); NaN if no response",
        ),
        Column(
            "first_data_ms",
            "float64",
            "ms",
            "first_data_ts minus the same request time: time to the first body byte",
        ),
        Column(
            "duration_ms",
            "float64",
            "ms",
            "end_ts minus request_ts (first_ts when the request was not seen)",
        ),
        Column(
            "client_data_bytes",
            "int64",
            "bytes",
            "DATA payload bytes sent by the client, padding excluded",
        ),
        Column(
            "server_data_bytes",
            "int64",
            "bytes",
            "DATA payload bytes sent by the server, padding excluded",
        ),
        Column(
            "client_header_bytes",
            "int64",
            "bytes",
            "HPACK header block bytes sent by the client (HEADERS + CONTINUATION)",
        ),
        Column(
            "server_header_bytes",
            "int64",
            "bytes",
            "HPACK header block bytes sent by the server (PUSH_PROMISE blocks included)",
        ),
        Column("client_frames", "int64", "frames", "frames on this stream sent by the client"),
        Column("server_frames", "int64", "frames", "frames on this stream sent by the server"),
        Column(
            "end_reason",
            "category",
            None,
            "end_stream (both sides ended), rst_stream, goaway (above the GOAWAY's last id), "
            "connection_closed, open_at_eof, idle (only PRIORITY frames: never opened), "
            "evicted (over 100 000 streams open at once: the oldest was summarised early)",
        ),
        Column("rst_error", "category", None, "RST_STREAM error code name"),
        Column("rst_error_code", "Int64", None, "RST_STREAM error code"),
        Column("rst_by", "category", None, "client or server: who sent the RST_STREAM"),
        Column(
            "sse_events",
            "int64",
            "events",
            "server-sent events parsed from the response (text/event-stream)",
        ),
        Column(
            "request_headers",
            "object",
            None,
            "request header list ((name, value) tuples); None if not decoded",
        ),
        Column(
            "response_headers", "object", None, "final response header list; None if not decoded"
        ),
    ),
)

HTTP2_CONNECTIONS = TableSchema(
    name="http2_connections",
    grain="one row per TCP connection carrying HTTP/2",
    key=("tcp_stream",),
    columns=(
        _TCP_STREAM,
        Column(
            "start",
            "category",
            None,
            "preface (connection preface seen), upgrade (h2c via HTTP/1.1 Upgrade), mid_stream",
        ),
        Column(
            "preface_frame", "Int64", None, "packet that completed the client connection preface"
        ),
        Column(
            "client_settings",
            "string",
            None,
            "last value of every setting the client sent: NAME=value;...",
        ),
        Column("server_settings", "string", None, "last value of every setting the server sent"),
        Column(
            "client_max_concurrent_streams",
            "Int64",
            "streams",
            "SETTINGS_MAX_CONCURRENT_STREAMS the client allowed",
        ),
        Column(
            "server_max_concurrent_streams",
            "Int64",
            "streams",
            "SETTINGS_MAX_CONCURRENT_STREAMS the server allowed",
        ),
        Column(
            "client_initial_window_size",
            "Int64",
            "bytes",
            "SETTINGS_INITIAL_WINDOW_SIZE sent by the client",
        ),
        Column(
            "server_initial_window_size",
            "Int64",
            "bytes",
            "SETTINGS_INITIAL_WINDOW_SIZE sent by the server",
        ),
        Column(
            "client_max_frame_size", "Int64", "bytes", "SETTINGS_MAX_FRAME_SIZE sent by the client"
        ),
        Column(
            "server_max_frame_size", "Int64", "bytes", "SETTINGS_MAX_FRAME_SIZE sent by the server"
        ),
        Column("streams", "int64", "streams", "streams seen (rows of http2_streams)"),
        Column("peak_open_streams", "int64", "streams", "most streams open at the same time"),
        Column("client_frames", "int64", "frames", "frames sent by the client"),
        Column("server_frames", "int64", "frames", "frames sent by the server"),
        Column(
            "client_bytes", "int64", "bytes", "HTTP/2 bytes sent by the client (preface and frames)"
        ),
        Column("server_bytes", "int64", "bytes", "HTTP/2 bytes sent by the server"),
        Column(
            "client_skipped_bytes",
            "int64",
            "bytes",
            "client bytes not parsed (lost, searched for alignment, desynced)",
        ),
        Column("server_skipped_bytes", "int64", "bytes", "server bytes not parsed"),
        Column("ping_count", "int64", "pings", "PINGs answered by an ACK with the same data"),
        Column("ping_rtt_min_ms", "float64", "ms", "smallest PING round trip"),
        Column("ping_rtt_avg_ms", "float64", "ms", "mean PING round trip"),
        Column("ping_rtt_max_ms", "float64", "ms", "largest PING round trip"),
        Column("goaway_frame", "Int64", None, "packet of the first GOAWAY"),
        Column("goaway_ts", TS_DTYPE, None, "time of goaway_frame"),
        Column("goaway_by", "category", None, "client or server"),
        Column("goaway_last_stream_id", "Int64", None, "last stream id of the first GOAWAY"),
        Column("goaway_error", "category", None, "error code name of the first GOAWAY"),
        Column(
            "client_flow_stalls",
            "Int64",
            "stalls",
            "times a flow-control window (connection or stream) for client data reached 0; "
            "NA when the start was not seen",
        ),
        Column("server_flow_stalls", "Int64", "stalls", "same for server data"),
        Column(
            "client_stalled_ms",
            "float64",
            "ms",
            "time the connection-level window for client data stayed at or below 0",
        ),
        Column("server_stalled_ms", "float64", "ms", "same for server data"),
        Column(
            "hpack_errors",
            "int64",
            "blocks",
            "header blocks that could not be decoded (see warnings http2.hpack_decode_failed)",
        ),
        Column(
            "desynced",
            "bool",
            None,
            "a direction could not be parsed to its end (see warnings http2.desynced)",
        ),
        Column(
            "end_frame",
            "int64",
            None,
            "packet at which the connection was finalised (last FIN/RST, or last packet)",
        ),
        Column("end_ts", TS_DTYPE, None, "time of end_frame"),
    ),
)

HTTP_REQUESTS = TableSchema(
    name="http_requests",
    grain="one row per HTTP/1.x request/response exchange (either side may be missing)",
    key=("tcp_stream", "request_index"),
    columns=(
        _TCP_STREAM,
        Column(
            "request_index",
            "int64",
            None,
            "1-based order of the exchange on the connection, as observed (sse_events refer to it)",
        ),
        Column(
            "position",
            "Int64",
            None,
            "1-based position of the request on the connection (1 = first: >1 means the "
            "connection was reused); "
            "NA when earlier requests may have been missed (mid-stream start, lost bytes)",
        ),
        Column("method", "string", None, "request method"),
        Column("host", "string", None, "Host header"),
        Column("path", "string", None, "request target as sent"),
        Column(
            "http_version", "category", None, "version of the request (else the response): 1.0, 1.1"
        ),
        Column(
            "status",
            "Int64",
            None,
            "final status code (1xx interim responses are in interim_statuses)",
        ),
        Column("reason", "string", None, "reason phrase"),
        Column("content_type", "string", None, "response Content-Type"),
        Column(
            "request_frame",
            "Int64",
            None,
            "packet that completed the request (tshark's http.request frame); NA if incomplete",
        ),
        Column(
            "response_frame",
            "Int64",
            None,
            "packet that completed the response (tshark's http.response frame); NA if incomplete",
        ),
        Column(
            "request_header_bytes", "Int64", "bytes", "request line + header fields + blank line"
        ),
        Column("request_body_bytes", "Int64", "bytes", "request body after de-chunking"),
        Column(
            "response_header_bytes",
            "Int64",
            "bytes",
            "status line + header fields + blank line (final response)",
        ),
        Column(
            "response_body_bytes",
            "Int64",
            "bytes",
            "response body after de-chunking (bytes lost in gaps included)",
        ),
        Column(
            "response_wire_bytes",
            "Int64",
            "bytes",
            "response bytes on the wire: headers + body with chunk framing",
        ),
        Column("chunked", "boolean", None, "response used Transfer-Encoding: chunked"),
        Column(
            "until_close", "boolean", None, "response body was delimited by the connection closing"
        ),
        Column("request_ts", TS_DTYPE, None, "first byte of the request"),
        Column("request_end_ts", TS_DTYPE, None, "request complete"),
        Column(
            "response_ts", TS_DTYPE, None, "first byte of the first response (interim 1xx included)"
        ),
        Column("response_headers_ts", TS_DTYPE, None, "final response header section complete"),
        Column("response_end_ts", TS_DTYPE, None, "response complete"),
        Column(
            "ttfb_ms",
            "float64",
            "ms",
            "response_ts minus request_end_ts (request_ts when the request did not complete)",
        ),
        Column("duration_ms", "float64", "ms", "response_end_ts minus request_ts"),
        Column(
            "interim_statuses",
            "string",
            None,
            "1xx statuses before the final response, comma-separated (e.g. 100)",
        ),
        Column(
            "upgrade",
            "category",
            None,
            "protocol the connection switched to after this exchange: h2c, websocket, connect...",
        ),
        Column("retry_after", "string", None, "Retry-After header as sent (429/503/3xx)"),
        Column(
            "retry_after_s",
            "float64",
            "s",
            "Retry-After in seconds (an HTTP-date is taken relative to the Date header)",
        ),
        Column("sse_events", "int64", "events", "server-sent events parsed from the response"),
        Column(
            "end_reason",
            "category",
            None,
            "complete, connection_closed, open_at_eof, desynced (bytes lost or unparsable), "
            "evicted (over 10 000 requests awaited a response: the oldest was given up)",
        ),
        Column(
            "request_headers",
            "object",
            None,
            "request header list ((lower-cased name, value) tuples)",
        ),
        Column("response_headers", "object", None, "final response header list"),
    ),
)

SSE_EVENTS = TableSchema(
    name="sse_events",
    grain="one row per server-sent event (text/event-stream responses over HTTP/1.x or HTTP/2)",
    key=("tcp_stream", "stream_id", "request_index", "index"),
    columns=(
        Column("frame", "int64", None, "packet that delivered the blank line ending the event"),
        Column("ts", TS_DTYPE, None, "time of that packet: when the event was complete"),
        _TCP_STREAM,
        Column("http_version", "category", None, "1.1 or 2"),
        Column("stream_id", "Int64", None, "HTTP/2 stream id (http2_streams); NA for HTTP/1.x"),
        Column(
            "request_index",
            "Int64",
            None,
            "HTTP/1.x exchange (http_requests.request_index); NA for HTTP/2",
        ),
        Column("index", "int64", None, "0-based number of the event within its response"),
        Column("event", "string", None, "event type (the event field; 'message' by default)"),
        Column(
            "id",
            "string",
            None,
            "last event ID in effect (persists across events); NA if never set",
        ),
        Column("retry_ms", "Int64", "ms", "retry field of this event"),
        Column("data", "string", None, "data lines joined with LF"),
        Column("data_bytes", "int64", "bytes", "UTF-8 length of data"),
        Column(
            "json_ok",
            "boolean",
            None,
            "data parsed as JSON (True), looked like JSON but did not parse (False: see "
            "sse.bad_json), NA: not JSON",
        ),
        Column(
            "delta_text",
            "string",
            None,
            "LLM streamed text: choices[0].delta.content (OpenAI chat), choices[0].text, "
            "Responses API delta, Anthropic delta.text",
        ),
        Column("done", "bool", None, "data is the [DONE] end marker"),
        Column(
            "finish_reason",
            "string",
            None,
            "choices[0].finish_reason / delta.stop_reason when present",
        ),
    ),
)

#: the tables this module builds, by Capture attribute name
HTTP_TABLES: dict[str, TableSchema] = {
    "http2_frames": HTTP2_FRAMES,
    "http2_streams": HTTP2_STREAMS,
    "http2_connections": HTTP2_CONNECTIONS,
    "http_requests": HTTP_REQUESTS,
    "sse_events": SSE_EVENTS,
}


def settings_text(settings: Iterable[tuple[int, int]]) -> str:
    """``((3, 100), (4, 65535))`` -> ``MAX_CONCURRENT_STREAMS=100;INITIAL_WINDOW_SIZE=65535``."""
    return ";".join(f"{SETTINGS_NAMES.get(k, f'0x{k:x}')}={v}" for k, v in settings)


def _error_name(code: int | None) -> str | None:
    if code is None:
        return None
    return ERROR_CODES.get(code, f"0x{code:x}")


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else (a - b) / 1e6


def _party(d: Direction | None) -> str | None:
    if d is None:
        return None
    return "client" if d == Direction.CLIENT_TO_SERVER else "server"


def _hv(headers: tuple[tuple[str, str], ...] | None, name: str) -> str | None:
    if headers is None:
        return None
    for k, v in headers:
        if k == name:
            return v
    return None


_FRAME_INTS = (
    "frame", "ts", "tcp_stream", "stream_id", "type_code", "flags", "length", "pad_length",
    "end_stream", "ack", "data_bytes", "header_block_bytes", "status", "window_increment",
    "error_code", "ping_rtt_ns", "last_stream_id", "promised_stream_id", "priority_exclusive",
    "priority_dependency", "priority_weight",
)  # fmt: skip
_FRAME_SPARSE = ("method", "path", "headers", "settings", "ping_data", "goaway_debug")


class _FrameColumns:
    """http2_frames rows as typed arrays (~190 bytes a row): int columns with an NA sentinel,
    category codes, and the rare text/object values kept only for the rows that have them."""

    __slots__ = ("_app", "codes", "ints", "n", "redact", "sparse")

    def __init__(self, redact: Callable[[Any], Any] = redact_headers) -> None:
        self.redact = redact
        self.ints = {name: IntColumn() for name in _FRAME_INTS}
        self.codes = {name: CodeColumn() for name in ("direction", "type", "flag_names", "error")}
        self.sparse: dict[str, dict[int, object]] = {name: {} for name in _FRAME_SPARSE}
        self._app = tuple(self.ints[name].data.append for name in _FRAME_INTS)
        self.n = 0

    def add(self, e: Http2Frame) -> None:
        t = e.type
        flags = e.flags
        h = e.headers
        (frame, ts, tcp, sid, typ, fl, length, pad, end_stream, ack, data_bytes, hb_bytes, status,
         winc, err, rtt, last, promised, excl, dep, weight) = self._app  # fmt: skip
        frame(e.frame)
        ts(e.ts_ns)
        tcp(e.tcp_stream)
        sid(e.stream_id)
        typ(t)
        fl(flags)
        length(e.length)
        pad(_na(e.pad_length))
        end_stream(1 if t in (0, 1) and flags & 1 else 0)
        ack(1 if t in (4, 6) and flags & 1 else 0)
        data_bytes(_na(e.data_bytes))
        hb_bytes(_na(e.header_block_bytes))
        winc(_na(e.window_increment))
        err(_na(e.error_code))
        rtt(_na(e.ping_rtt_ns))
        last(_na(e.last_stream_id))
        promised(_na(e.promised_stream_id))
        excl(NA if e.priority_exclusive is None else int(e.priority_exclusive))
        dep(_na(e.priority_dependency))
        weight(_na(e.priority_weight))
        codes = self.codes
        for name, value in (
            ("direction", e.direction.label),
            ("type", FRAME_TYPES[t] if t < 10 else "unknown"),
            ("flag_names", flags_text(t, flags) or None),
            ("error", _error_name(e.error_code)),
        ):
            col = codes[name]
            col.data.append(-1 if value is None else col.code(value))  # -1: NA
        row = self.n
        self.n += 1
        sp = self.sparse
        st = None
        if h is not None:
            sp["headers"][row] = self.redact(h)
            for k, v in h:
                if k == ":method":
                    sp["method"][row] = v
                elif k == ":path":
                    sp["path"][row] = v
                elif k == ":status" and st is None:
                    st = v
        status(int(st) if st and st.isascii() and st.isdigit() and len(st) <= 3 else NA)
        if e.settings is not None:
            sp["settings"][row] = settings_text(e.settings)
        if e.ping_data is not None:
            sp["ping_data"][row] = e.ping_data.hex()
        if e.debug_data is not None:
            sp["goaway_debug"][row] = e.debug_data.decode("utf-8", "replace")

    def columns(self) -> dict[str, Any]:
        ints = self.ints
        out: dict[str, Any] = {}
        for name in ("frame", "ts", "tcp_stream", "stream_id", "type_code", "flags", "length"):
            out[name] = ints[name].to_numpy()
        for name in ("pad_length", "data_bytes", "header_block_bytes", "status", "window_increment",
                     "error_code", "last_stream_id", "promised_stream_id", "priority_dependency",
                     "priority_weight"):  # fmt: skip
            out[name] = ints[name].to_nullable()
        out["end_stream"] = ints["end_stream"].to_numpy().astype(bool)
        out["ack"] = ints["ack"].to_numpy().astype(bool)
        out["priority_exclusive"] = ints["priority_exclusive"].to_boolean()
        out["ping_rtt_ms"] = ints["ping_rtt_ns"].to_float_ms()
        for name, col in self.codes.items():
            out[name] = col.to_categorical()
        for name, values in self.sparse.items():
            dense: list[object] = [None] * self.n
            for row, v in values.items():
                dense[row] = v
            out[name] = dense
        return out


def _na(v: int | None) -> int:
    return NA if v is None else v


class HttpTablesBuilder:
    """Collects the rows of the HTTP tables from observer events (others are ignored)."""

    def __init__(self, *, show_secrets: bool = False) -> None:
        """``show_secrets=False`` (the default): values of :data:`SECRET_HEADERS` are redacted."""
        self._redact: Callable[[Any], Any] = (lambda h: h) if show_secrets else redact_headers
        self.frames = _FrameColumns(self._redact)
        """http2_frames rows in typed columns (the table that grows with packets)"""
        self.streams: list[tuple[Any, ...]] = []
        self.connections: list[tuple[Any, ...]] = []
        self.requests: list[tuple[Any, ...]] = []
        self.sse: list[tuple[Any, ...]] = []
        self.switches: list[ProtocolSwitched] = []
        self._handlers: dict[type, Callable[[Any], None]] = {
            Http2Frame: self._frame,
            Http2StreamEnded: self._stream,
            Http2ConnectionEnded: self._connection,
            HttpExchange: self._exchange,
            SseEvent: self._sse,
            ProtocolSwitched: self.switches.append,
        }

    def add(self, event: object) -> None:
        """Record one event (any type; unknown types are ignored)."""
        h = self._handlers.get(type(event))
        if h is not None:
            h(event)

    def add_all(self, events: Iterable[object]) -> None:
        handlers = self._handlers
        for e in events:
            h = handlers.get(type(e))
            if h is not None:
                h(e)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The five tables (empty ones keep their columns and dtypes)."""
        return {
            "http2_frames": HTTP2_FRAMES.frame(columns=self.frames.columns()),
            "http2_streams": HTTP2_STREAMS.frame(self.streams),
            "http2_connections": HTTP2_CONNECTIONS.frame(self.connections),
            "http_requests": HTTP_REQUESTS.frame(self.requests),
            "sse_events": SSE_EVENTS.frame(self.sse),
        }

    # ------------------------------------------------------------------ rows

    def _frame(self, e: Http2Frame) -> None:
        self.frames.add(e)

    def _stream(self, e: Http2StreamEnded) -> None:
        req_t = e.request_end_ts_ns if e.request_end_ts_ns is not None else e.request_ts_ns
        self.streams.append(
            (
                e.tcp_stream,
                e.stream_id,
                e.pushed,
                e.parent_stream_id,
                e.partial,
                e.method,
                e.scheme,
                e.authority,
                e.path,
                e.status,
                e.content_type,
                e.informational,
                e.first_frame,
                e.first_ts_ns,
                e.request_frame,
                e.request_ts_ns,
                e.request_end_ts_ns,
                e.response_headers_frame,
                e.response_headers_ts_ns,
                e.first_data_ts_ns,
                e.end_frame,
                e.end_ts_ns,
                _ms(e.response_headers_ts_ns, req_t),
                _ms(e.first_data_ts_ns, req_t),
                _ms(e.end_ts_ns, e.request_ts_ns if e.request_ts_ns is not None else e.first_ts_ns),
                e.client_data_bytes,
                e.server_data_bytes,
                e.client_header_bytes,
                e.server_header_bytes,
                e.client_frames,
                e.server_frames,
                e.end_reason,
                _error_name(e.rst_error_code),
                e.rst_error_code,
                _party(e.rst_by),
                e.sse_events,
                self._redact(e.request_headers),
                self._redact(e.response_headers),
            )
        )

    def _connection(self, e: Http2ConnectionEnded) -> None:
        cs, ss = dict(e.client_settings), dict(e.server_settings)
        known = e.flow_control_known
        self.connections.append(
            (
                e.tcp_stream,
                e.start,
                e.preface_frame,
                settings_text(e.client_settings),
                settings_text(e.server_settings),
                cs.get(3),
                ss.get(3),
                cs.get(4),
                ss.get(4),
                cs.get(5),
                ss.get(5),
                e.streams,
                e.peak_open_streams,
                e.client_frames,
                e.server_frames,
                e.client_bytes,
                e.server_bytes,
                e.client_skipped_bytes,
                e.server_skipped_bytes,
                e.ping_count,
                e.ping_rtt_min_ns / 1e6 if e.ping_rtt_min_ns is not None else None,
                e.ping_rtt_sum_ns / e.ping_count / 1e6 if e.ping_count else None,
                e.ping_rtt_max_ns / 1e6 if e.ping_rtt_max_ns is not None else None,
                e.goaway_frame,
                e.goaway_ts_ns,
                _party(e.goaway_by),
                e.goaway_last_stream_id,
                _error_name(e.goaway_error_code),
                e.client_flow_stalls if known else None,
                e.server_flow_stalls if known else None,
                e.client_stalled_ns / 1e6 if known else None,
                e.server_stalled_ns / 1e6 if known else None,
                e.hpack_errors,
                e.desynced,
                e.frame,
                e.ts_ns,
            )
        )

    def _exchange(self, e: HttpExchange) -> None:
        q, r = e.request, e.response
        req_start = q.start_ts_ns if q is not None else None
        req_end = q.end_ts_ns if q is not None else None
        first_resp = e.first_response_ts_ns
        retry = r.header("retry-after") if r is not None else None
        self.requests.append(
            (
                e.tcp_stream,
                e.request_index,
                e.position,
                q.method if q is not None else None,
                q.header("host") if q is not None else None,
                q.target if q is not None else None,
                q.version if q is not None else (r.version if r is not None else None),
                r.status if r is not None else None,
                r.reason if r is not None else None,
                r.header("content-type") if r is not None else None,
                q.end_frame if q is not None else None,
                r.end_frame if r is not None else None,
                q.header_bytes if q is not None else None,
                q.body_bytes if q is not None else None,
                r.header_bytes if r is not None else None,
                r.body_bytes if r is not None else None,
                r.wire_bytes if r is not None else None,
                r.chunked if r is not None else None,
                r.until_close if r is not None else None,
                req_start,
                req_end,
                first_resp,
                r.head_ts_ns if r is not None else None,
                r.end_ts_ns if r is not None else None,
                _ms(first_resp, req_end if req_end is not None else req_start),
                _ms(r.end_ts_ns if r is not None else None, req_start),
                ",".join(str(s) for s in e.interim_statuses) or None,
                e.upgrade,
                retry,
                parse_retry_after(retry, r.header("date")) if r is not None else None,
                e.sse_events,
                e.end_reason,
                self._redact(q.headers) if q is not None else None,
                self._redact(r.headers) if r is not None else None,
            )
        )

    def _sse(self, e: SseEvent) -> None:
        self.sse.append(
            (
                e.frame,
                e.ts_ns,
                e.tcp_stream,
                "2" if e.stream_id is not None else "1.1",
                e.stream_id,
                e.request_index,
                e.index,
                e.event_type,
                e.event_id,
                e.retry_ms,
                e.data,
                e.data_bytes,
                e.json_ok,
                e.delta_text,
                e.done,
                e.finish_reason,
            )
        )
