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

import struct
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._columns import NA, CodeColumn, IntColumn, TextColumn, boolean, nullable
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
from ..redaction import SECRET_HEADERS, redact_headers
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

# Credentials (SECRET_HEADERS, redact_headers, redact_url) live in the layer-0 module
# pcaptools.redaction, so protocol observers can use them too; re-exported here.

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
        Column("path", "string", None, ":path of the header block this frame completed",
               secret="url"),
        Column("status", "Int64", None, ":status of the header block this frame completed"),
        Column(
            "headers",
            "object",
            None,
            "decoded header list ((name, value) tuples) on the frame that ended a header block; "
            "None when undecodable or not a header frame",
            secret="headers",
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
            secret="text",
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


def _coding_columns(wire: str) -> tuple[Column, ...]:
    """content_encoding, response_decoded_bytes, content_decoding (``wire``: the wire column)"""
    return (
        Column(
            "content_encoding",
            "string",
            None,
            "response Content-Encoding as sent (gzip, deflate, br, zstd, stacked: 'gzip, br'); "
            "NA when absent",
        ),
        Column(
            "response_decoded_bytes",
            "Int64",
            "bytes",
            "response body bytes after content decoding (gzip, deflate, br, zstd), decoded as "
            "they arrived and up to where decoding stopped (see content_decoding); equals "
            f"{wire} for an identity body; NA when not decoded (unsupported coding)",
        ),
        Column(
            "content_decoding",
            "category",
            None,
            "how the body was content-decoded: identity (no Content-Encoding), decoded (every "
            "coding's stream ended properly), corrupt / truncated (damaged, or the body ended "
            "first: http.content_decoding_failed), gap (bytes lost: http.content_decoding_gap), "
            "limit (http.content_decoding_limit), unsupported "
            "(http.content_encoding_unsupported), incomplete (the body did not end: cut, or "
            "open at the end of the capture); NA: no body byte seen",
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
        Column("authority", "string", None, ":authority (else the host header)",
               secret="authority"),
        Column("path", "string", None, ":path", secret="url"),
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
            "DATA payload bytes sent by the server, padding excluded: the wire body bytes, "
            "still content-encoded (decoded: response_decoded_bytes)",
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
            "server-sent events parsed from the response (text/event-stream), after content "
            "decoding",
        ),
        *_coding_columns("server_data_bytes (the wire body bytes)"),
        Column(
            "request_headers",
            "object",
            None,
            "request header list ((name, value) tuples); None if not decoded",
            secret="headers",
        ),
        Column(
            "response_headers", "object", None, "final response header list; None if not decoded",
            secret="headers",
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
        Column("host", "string", None, "Host header", secret="authority"),
        Column("path", "string", None, "request target as sent", secret="url"),
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
            "response body after de-chunking, still content-encoded: the wire body bytes "
            "(bytes lost in gaps included; decoded: response_decoded_bytes)",
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
        Column(
            "sse_events",
            "int64",
            "events",
            "server-sent events parsed from the response, after content decoding",
        ),
        *_coding_columns("response_body_bytes (the wire body bytes, after de-chunking)"),
        Column(
            "end_reason",
            "category",
            None,
            "complete, connection_closed, open_at_eof, desynced (bytes lost or unparsable), "
            "evicted (over 10 000 requests awaited a response: the oldest was given up)",
        ),
        Column(
            "paired",
            "boolean",
            None,
            "the row holds a request and the final response that answers it. Pairing is by "
            "stream position (a response answers the request outstanding when its first byte "
            "arrived), so after a capture gap a response is never put on another request; "
            "ttfb_ms and duration_ms are NaN when False",
        ),
        Column(
            "unpaired_reason",
            "category",
            None,
            "why not paired (NA when paired): response_not_captured (the server direction "
            "lost bytes where this request's response was), no_response (nothing lost, no "
            "response before the connection or capture ended), request_not_captured (a "
            "response while no request was outstanding: its request was sent before the "
            "capture began or lost in a capture gap, or rarely never sent, as for an "
            "unsolicited 408), ambiguous (after a gap "
            "on a pipelining connection the request a response answers cannot be told), "
            "evicted",
        ),
        Column(
            "request_headers",
            "object",
            None,
            "request header list ((lower-cased name, value) tuples)",
            secret="headers",
        ),
        Column("response_headers", "object", None, "final response header list",
               secret="headers"),
    ),
)

SSE_EVENTS = TableSchema(
    name="sse_events",
    grain="one row per server-sent event (text/event-stream responses over HTTP/1.x or HTTP/2; "
    "those of HTTP/3 are in http3_sse_events)",
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
        Column("retry_ms", "Int64", "ms", "retry field of this event; NA when it has none, or one "
               "longer than int64 holds (warning sse.bad_retry)"),
        Column(
            "data",
            "string",
            None,
            "data lines joined with LF",
            secret="text",
        ),
        Column(
            "data_bytes",
            "int64",
            "bytes",
            "bytes of the data lines as received, joined with LF: the UTF-8 length of data, "
            "unless the stream held invalid UTF-8 (counted as received, while data shows "
            "U+FFFD for it)",
        ),
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


_FRAME_INTS = (
    "frame", "ts", "tcp_stream", "stream_id", "type_code", "flags", "length", "pad_length",
    "end_stream", "ack", "data_bytes", "header_block_bytes", "status", "window_increment",
    "error_code", "ping_rtt_ns", "last_stream_id", "promised_stream_id", "priority_exclusive",
    "priority_dependency", "priority_weight",
)  # fmt: skip
_FRAME_SPARSE = ("method", "path", "headers", "settings", "ping_data", "goaway_debug")
_FRAME_ROW = struct.Struct(f"={len(_FRAME_INTS)}q").pack
"""a frame's :data:`_FRAME_INTS` as the bytes of ``array('q')`` items (native byte order): one
C call, where ``array.extend`` parses each item (see :func:`_extend_ints`)"""


class _FrameColumns:
    """http2_frames rows as typed arrays (~190 bytes a row): the int columns row by row in one
    ``array('q')`` (one struct-packed row per frame; NA is a sentinel), category codes (cached per
    frame type, flags and direction), and the rare text/object values kept only for the rows
    that have them."""

    __slots__ = ("_code_app", "_codes_of", "codes", "n", "rows", "sparse")

    def __init__(self) -> None:
        self.rows = array("q")
        """the :data:`_FRAME_INTS` of each frame, row after row"""
        self.codes = {name: CodeColumn() for name in ("direction", "type", "flag_names", "error")}
        self.sparse: dict[str, dict[int, object]] = {name: {} for name in _FRAME_SPARSE}
        self._codes_of: dict[tuple[int, int, Direction], tuple[int, int, int]] = {}
        """(type, flags, direction) -> codes of direction, type and flag_names"""
        self._code_app = tuple(self.codes[name].data.append for name in self.codes)
        self.n = 0

    def _new_codes(self, t: int, flags: int, d: Direction) -> tuple[int, int, int]:
        codes = self.codes
        fn = flags_text(t, flags) or None
        return (
            codes["direction"].code(d.label),
            codes["type"].code(FRAME_TYPES[t] if t < 10 else "unknown"),
            -1 if fn is None else codes["flag_names"].code(fn),  # -1: NA
        )

    def add(self, e: Http2Frame) -> None:
        t = e.type
        flags = e.flags
        h = e.headers
        key = (t, flags, e.direction)
        dir_type_flags = self._codes_of.get(key)
        if dir_type_flags is None:
            dir_type_flags = self._codes_of[key] = self._new_codes(t, flags, e.direction)
        app_dir, app_type, app_flags, app_error = self._code_app
        app_dir(dir_type_flags[0])
        app_type(dir_type_flags[1])
        app_flags(dir_type_flags[2])
        err = e.error_code
        app_error(-1 if err is None else self.codes["error"].code(_error_name(err)))
        row = self.n
        self.n += 1
        sp = self.sparse
        st = None
        if h is not None:
            sp["headers"][row] = h
            for k, v in h:
                if k == ":method":
                    sp["method"][row] = v
                elif k == ":path":
                    sp["path"][row] = v
                elif k == ":status" and st is None:
                    st = v
        if e.settings is not None:
            sp["settings"][row] = settings_text(e.settings)
        if e.ping_data is not None:
            sp["ping_data"][row] = e.ping_data.hex()
        if e.debug_data is not None:
            sp["goaway_debug"][row] = e.debug_data.decode("utf-8", "replace")
        na = NA
        v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11 = (
            e.pad_length, e.data_bytes, e.header_block_bytes, e.window_increment, err,
            e.ping_rtt_ns, e.last_stream_id, e.promised_stream_id, e.priority_exclusive,
            e.priority_dependency, e.priority_weight,
        )  # fmt: skip
        self.rows.frombytes(
            _FRAME_ROW(
                e.frame,
                e.ts_ns,
                e.tcp_stream,
                e.stream_id,
                t,
                flags,
                e.length,
                na if v1 is None else v1,
                1 if t in (0, 1) and flags & 1 else 0,
                1 if t in (4, 6) and flags & 1 else 0,
                na if v2 is None else v2,
                na if v3 is None else v3,
                int(st) if st and st.isascii() and st.isdigit() and len(st) <= 3 else na,
                na if v4 is None else v4,
                na if v5 is None else v5,
                na if v6 is None else v6,
                na if v7 is None else v7,
                na if v8 is None else v8,
                na if v9 is None else int(v9),
                na if v10 is None else v10,
                na if v11 is None else v11,
            )
        )

    def columns(self) -> dict[str, Any]:
        width = len(_FRAME_INTS)
        mat = (
            np.frombuffer(self.rows, dtype=np.int64).reshape(-1, width)
            if self.n
            else np.empty((0, width), np.int64)
        )
        ints = {name: mat[:, i].copy() for i, name in enumerate(_FRAME_INTS)}
        out: dict[str, Any] = {}
        for name in ("frame", "ts", "tcp_stream", "stream_id", "type_code", "flags", "length"):
            out[name] = ints[name]
        for name in ("pad_length", "data_bytes", "header_block_bytes", "status", "window_increment",
                     "error_code", "last_stream_id", "promised_stream_id", "priority_dependency",
                     "priority_weight"):  # fmt: skip
            a = ints[name]
            out[name] = pd.arrays.IntegerArray(a, a == NA)
        out["end_stream"] = ints["end_stream"].astype(bool)
        out["ack"] = ints["ack"].astype(bool)
        a = ints["priority_exclusive"]
        out["priority_exclusive"] = pd.arrays.BooleanArray(a == 1, a == NA)
        a = ints["ping_rtt_ns"]
        ms = a.astype(np.float64) / 1e6
        ms[a == NA] = np.nan
        out["ping_rtt_ms"] = ms
        for name, col in self.codes.items():
            out[name] = col.to_categorical()
        for name, values in self.sparse.items():
            dense: list[object] = [None] * self.n
            for row, v in values.items():
                dense[row] = v
            out[name] = dense
        # the rows are handed over: start empty (category codes stay, so every chunk of a
        # streamed table codes a category the same way)
        self.rows = array("q")  # (the old one may still be exported to numpy views)
        for c in self.codes.values():
            del c.data[:]
        for d in self.sparse.values():
            d.clear()
        self.n = 0
        return out


_SSE_BLOCK = 1 << 12
"""SseEvent rows kept as they came before they are moved into typed columns"""
_AT = {name: i for i, name in enumerate(SseEvent._fields)}
"""SseEvent field -> its position in the tuple"""
_SSE_INT_AT = tuple((column, _AT[field]) for column, field in (
    ("frame", "frame"), ("ts", "ts_ns"), ("tcp_stream", "tcp_stream"), ("index", "index"),
    ("data_bytes", "data_bytes"), ("done", "done"),
))  # fmt: skip
_SSE_NULLABLE_AT = tuple((column, _AT[field]) for column, field in (
    ("stream_id", "stream_id"), ("request_index", "request_index"), ("retry_ms", "retry_ms"),
))  # fmt: skip
_SSE_TEXT_AT = tuple((column, _AT[field]) for column, field in (
    ("event", "event_type"), ("id", "event_id"), ("data", "data"),
    ("delta_text", "delta_text"), ("finish_reason", "finish_reason"),
))  # fmt: skip
_JSON_OK_AT = _AT["json_ok"]
_SSE_INTS = tuple(c for c, _ in _SSE_INT_AT)
_SSE_NULLABLE = (*(c for c, _ in _SSE_NULLABLE_AT), "json_ok")
_SSE_TEXT = tuple(c for c, _ in _SSE_TEXT_AT)
_TRISTATE = {True: 1, False: 0, None: NA}
def _extend_ints(data: array[int], values: Sequence[int]) -> None:
    """``data.extend(values)`` for an ``array('q')``, packed by one struct call: array.extend
    converts each item through PyArg_Parse, 3 to 4 times slower (~250 instructions an item,
    2 % of the load of the benchmark's base capture). The same values, in the array's native
    byte order; a value out of the int64 range raises (struct.error, where extend raised
    OverflowError: the parsers keep such values out, as ``sse.bad_retry`` does)."""
    data.frombytes(struct.pack(f"={len(values)}q", *values))


class _SseColumns:
    """sse_events rows. An :class:`SseEvent` is a tuple, so the builder keeps the events as they
    come (one list append each, no row built) and every :data:`_SSE_BLOCK` rows moves them into
    typed columns: 8 bytes a row per int column, strings in Arrow blocks (:class:`TextColumn`)."""

    __slots__ = ("ints", "pending", "text")

    def __init__(self) -> None:
        self.pending: list[SseEvent] = []
        """events not yet in the columns"""
        self.ints = {name: IntColumn() for name in (*_SSE_INTS, *_SSE_NULLABLE)}
        self.text = {name: TextColumn() for name in _SSE_TEXT}

    def flush(self) -> None:
        """Move the pending events into the columns: one C-level pass over the events
        transposes them (one tuple per field, freed at once), each column then reads its
        tuple (reading every event once per column would fetch it from memory again)."""
        rows = self.pending
        if not rows:
            return
        ints, text = self.ints, self.text
        fields = list(zip(*rows, strict=True))
        for name, i in _SSE_INT_AT:
            _extend_ints(ints[name].data, fields[i])
        for name, i in _SSE_NULLABLE_AT:
            _extend_ints(ints[name].data, [NA if v is None else v for v in fields[i]])
        _extend_ints(ints["json_ok"].data, [_TRISTATE[v] for v in fields[_JSON_OK_AT]])
        for name, i in _SSE_TEXT_AT:
            text[name].extend(list(fields[i]))
        rows.clear()

    def columns(self) -> dict[str, Any]:
        self.flush()
        ints = self.ints
        # (each column emptied as it is converted: the rows are never held twice)
        out: dict[str, Any] = {name: ints[name].take() for name in _SSE_INTS}
        out["done"] = out["done"].astype(bool)
        for name in ("stream_id", "request_index", "retry_ms"):
            out[name] = nullable(ints[name].take())
        out["json_ok"] = boolean(ints["json_ok"].take())
        for name, col in self.text.items():
            out[name] = col.values()
        # http_version: "2" where there is a stream id, else "1.1"; categories as pd.Categorical
        # makes them from the values (sorted, only those present)
        h2 = ~out["stream_id"].isna()
        cats = [v for v, present in (("1.1", not h2.all()), ("2", h2.any())) if present]
        codes = np.zeros(len(h2), dtype=np.int8)
        if len(cats) == 2:
            codes[h2] = 1
        out["http_version"] = pd.Categorical.from_codes(codes, categories=pd.Index(cats))
        for c in ints.values():  # the rows are handed over: start empty
            del c.data[:]
        for t in self.text.values():
            t.blocks.clear()
        return out


def _na(v: int | None) -> int:
    return NA if v is None else v


class HttpTablesBuilder:
    """Collects the rows of the HTTP tables from observer events (others are ignored)."""

    def __init__(self) -> None:
        """The rows are the values as seen: credentials are redacted by ``load()``, on the
        columns the schemas mark (``Column.secret``: :func:`pcaptools.redaction.redact_frame`)."""
        self.frames = _FrameColumns()
        """http2_frames rows in typed columns (the table that grows with packets)"""
        self.streams: list[tuple[Any, ...]] = []
        self.connections: list[tuple[Any, ...]] = []
        self.requests: list[tuple[Any, ...]] = []
        self.sse = _SseColumns()
        """sse_events rows: the events themselves, moved into typed columns in blocks"""
        self.switches: list[ProtocolSwitched] = []
        self._handlers: dict[type, Callable[[Any], None]] = {
            Http2Frame: self.frames.add,
            Http2StreamEnded: self._stream,
            Http2ConnectionEnded: self._connection,
            HttpExchange: self._exchange,
            SseEvent: self.sse.pending.append,
            ProtocolSwitched: self.switches.append,
        }

    def add(self, event: object) -> None:
        """Record one event (any type; unknown types are ignored)."""
        h = self._handlers.get(type(event))
        if h is not None:
            h(event)
            if len(self.sse.pending) >= _SSE_BLOCK:
                self.sse.flush()

    def add_all(self, events: Iterable[object]) -> None:
        handler = self._handlers.get
        for e in events:
            h = handler(type(e))
            if h is not None:
                h(e)
        if len(self.sse.pending) >= _SSE_BLOCK:
            self.sse.flush()

    def pending(self) -> dict[str, int]:
        """Rows held now per table that grows with the traffic (:class:`~.schema.Drainable`:
        ``load(out=...)`` streams them to Parquet while the capture is read)."""
        sse = self.sse
        return {"http2_frames": self.frames.n, "http2_streams": len(self.streams),
                "http_requests": len(self.requests),
                "sse_events": len(sse.pending) + len(sse.ints[_SSE_INTS[0]].data)}

    def drain(self, table: str) -> pd.DataFrame:
        """The rows of ``table`` held now as a DataFrame of its schema; they are forgotten
        (what :meth:`tables` returns at the end is the rest)."""
        if table == "http2_frames":
            return HTTP2_FRAMES.frame(columns=self.frames.columns(), copy=False)
        if table == "sse_events":
            return SSE_EVENTS.frame(columns=self.sse.columns(), copy=False)
        if table not in ("http2_streams", "http_requests"):
            raise KeyError(f"HttpTablesBuilder does not drain {table!r}")
        rows = self.streams if table == "http2_streams" else self.requests
        df = (HTTP2_STREAMS if table == "http2_streams" else HTTP_REQUESTS).frame(rows)
        rows.clear()
        return df

    def tables(self) -> dict[str, pd.DataFrame]:
        """The five tables (empty ones keep their columns and dtypes)."""
        return {
            # (the columns are new arrays, handed over: not copied again)
            "http2_frames": HTTP2_FRAMES.frame(columns=self.frames.columns(), copy=False),
            "http2_streams": HTTP2_STREAMS.frame(self.streams),
            "http2_connections": HTTP2_CONNECTIONS.frame(self.connections),
            "http_requests": HTTP_REQUESTS.frame(self.requests),
            "sse_events": SSE_EVENTS.frame(columns=self.sse.columns(), copy=False),
        }

    # ------------------------------------------------------------------ rows

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
                e.content_encoding,
                e.decoded_body_bytes,
                e.content_decoding,
                e.request_headers,
                e.response_headers,
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
                r.status if r is not None and r.status else None,  # 0: HTTP/0.9, no status
                r.reason if r is not None and r.status else None,
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
                _ms(first_resp, req_end if req_end is not None else req_start)
                if e.paired
                else None,
                _ms(r.end_ts_ns if r is not None else None, req_start) if e.paired else None,
                ",".join(str(s) for s in e.interim_statuses) or None,
                e.upgrade,
                retry,
                parse_retry_after(retry, r.header("date")) if r is not None else None,
                e.sse_events,
                r.content_encoding if r is not None else None,
                r.decoded_body_bytes if r is not None else None,
                r.content_decoding if r is not None else None,
                e.end_reason,
                e.paired,
                e.unpaired_reason,
                q.headers if q is not None else None,
                r.headers if r is not None else None,
            )
        )
