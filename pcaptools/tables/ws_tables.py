"""Schemas and builders of the WebSocket tables: ws_connections, ws_frames, ws_messages, and
the schema of ws_heartbeats (one row per ping, shared by every heartbeat mechanism).

:class:`WsTablesBuilder` turns the events of
:class:`~pcaptools.protocols.websocket.WebSocketObserver` into rows (other event types are
ignored, so the pipeline can hand it everything). ``ws_heartbeats`` is derived from
``ws_frames`` by :func:`pcaptools.analyses.heartbeats.websocket_heartbeats`;
:func:`pcaptools.analyses.heartbeats.heartbeats` returns the same columns for WebSocket
ping/pong, HTTP/2 PING and TCP keep-alives together.

Comparing with tshark 4.0 (``websocket.*`` fields): ``ws_frames`` has one row per frame on
the same ``frame`` as tshark (the packet that delivered the frame's last byte);
``fin`` = websocket.fin, ``rsv`` bits = websocket.rsv, ``opcode`` = websocket.opcode,
``masked`` = websocket.mask, ``payload_len`` = websocket.payload_length (or its 16/64-bit
extension), ``close_code`` / ``close_reason`` = websocket.payload.close.status_code /
.reason, ``control_payload`` = websocket.payload.ping / .pong.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from .._columns import (
    NA,
    NA32,
    CodeColumn,
    Records,
    TextColumns,
    categorical,
    first_seen_codes,
    nullable,
    sorted_categorical,
)
from ..protocols._base import Direction
from ..protocols.websocket import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_PREVIEW_CHARS,
    WsConnectionEnded,
    WsFrame,
    WsMessage,
    opcode_name,
)
from .schema import TS_DTYPE, Column, TableSchema

__all__ = [
    "HEARTBEATS",
    "WS_CONNECTIONS",
    "WS_FRAMES",
    "WS_MESSAGES",
    "WS_TABLES",
    "WsTablesBuilder",
]

_TCP_STREAM = Column("tcp_stream", "int64", None, "Wireshark tcp.stream index of the connection")
_STREAM_ID = Column(
    "stream_id", "Int64", None,
    "HTTP/2 stream carrying the WebSocket (RFC 8441 extended CONNECT); NA over HTTP/1.1",
)
_DIRECTION = Column("direction", "category", None, "client_to_server or server_to_client")

WS_CONNECTIONS = TableSchema(
    name="ws_connections",
    grain="one row per WebSocket connection (an HTTP/1.1 Upgrade answered 101)",
    key=("tcp_stream", "stream_id"),
    columns=(
        _TCP_STREAM,
        _STREAM_ID,
        Column("http_version", "category", None, "1.1 (Upgrade + 101) or 2 (extended CONNECT)"),
        Column("request_frame", "Int64", None, "packet that completed the Upgrade request"),
        Column("handshake_frame", "Int64", None,
               "packet that completed the 101 response (http_requests.response_frame)"),
        Column("handshake_ts", TS_DTYPE, None, "time of handshake_frame"),
        Column("path", "string", None, "request target of the Upgrade request", secret="url"),
        Column("host", "string", None, "Host header", secret="authority"),
        Column("origin", "string", None, "Origin header", secret="url"),
        Column("version", "string", None, "Sec-WebSocket-Version of the request (13)"),
        Column("accept_ok", "boolean", None,
               "Sec-WebSocket-Accept is the SHA-1/base64 of the key and the RFC 6455 GUID; "
               "NA when the request (key) was not captured (see warnings ws.accept_mismatch)"),
        Column("offered_protocols", "string", None, "Sec-WebSocket-Protocol of the request",
               secret="subprotocols"),
        Column("protocol", "string", None, "subprotocol selected by the server",
               secret="subprotocols"),
        Column("offered_extensions", "string", None, "Sec-WebSocket-Extensions of the request"),
        Column("extensions", "string", None,
               "Sec-WebSocket-Extensions of the response: the extensions in effect"),
        Column("permessage_deflate", "bool", None, "RFC 7692 compression was negotiated"),
        Column("client_no_context_takeover", "bool", None,
               "permessage-deflate: the client resets its compressor for every message"),
        Column("server_no_context_takeover", "bool", None, "same for the server"),
        Column("client_max_window_bits", "Int64", None,
               "permessage-deflate client_max_window_bits accepted by the server"),
        Column("server_max_window_bits", "Int64", None,
               "permessage-deflate server_max_window_bits"),
        Column("client_frames", "int64", "frames", "frames sent by the client"),
        Column("server_frames", "int64", "frames", "frames sent by the server"),
        Column("client_messages", "int64", "messages", "data messages sent by the client"),
        Column("server_messages", "int64", "messages", "data messages sent by the server"),
        Column("client_payload_bytes", "int64", "bytes",
               "payload bytes of the client's frames, as on the wire (compressed, masked)"),
        Column("server_payload_bytes", "int64", "bytes", "payload bytes of the server's frames"),
        Column("client_wire_bytes", "int64", "bytes", "client frame headers + payloads"),
        Column("server_wire_bytes", "int64", "bytes", "server frame headers + payloads"),
        Column("client_pings", "int64", "frames", "Ping frames sent by the client"),
        Column("server_pings", "int64", "frames", "Ping frames sent by the server"),
        Column("client_pongs", "int64", "frames", "Pong frames sent by the client"),
        Column("server_pongs", "int64", "frames", "Pong frames sent by the server"),
        Column("client_mask_errors", "int64", "frames",
               "client frames without a mask (RFC 6455 §5.1: a client MUST mask)"),
        Column("server_mask_errors", "int64", "frames", "server frames with a mask"),
        Column("client_lost_bytes", "int64", "bytes",
               "client payload bytes never captured (gaps inside frames)"),
        Column("server_lost_bytes", "int64", "bytes", "server payload bytes never captured"),
        Column("client_skipped_bytes", "int64", "bytes",
               "client bytes not parsed: lost between frames, searched for a frame boundary, "
               "or after the direction desynced"),
        Column("server_skipped_bytes", "int64", "bytes", "server bytes not parsed"),
        Column("close_by", "category", None, "client or server: who sent the first Close frame"),
        Column("close_frame", "Int64", None, "packet of the first Close frame"),
        Column("close_ts", TS_DTYPE, None, "time of close_frame"),
        Column("client_close_code", "Int64", None, "status code of the client's Close frame"),
        Column("client_close_reason", "string", None, "reason of the client's Close frame",
               secret="text"),
        Column("server_close_code", "Int64", None, "status code of the server's Close frame"),
        Column("server_close_reason", "string", None, "reason of the server's Close frame",
               secret="text"),
        Column("end_reason", "category", None,
               "close_handshake (both sides sent Close), close_unanswered (only one side did), "
               "no_close (the TCP connection ended without Close frames), open_at_eof, "
               "desynced (a direction could not be parsed to its end)"),
        Column("end_frame", "int64", None,
               "packet at which the WebSocket ended (last FIN/RST, or last packet)"),
        Column("end_ts", TS_DTYPE, None, "time of end_frame"),
        Column("duration_ms", "float64", "ms", "end_ts minus handshake_ts"),
    ),
)

WS_FRAMES = TableSchema(
    name="ws_frames",
    grain="one row per WebSocket frame",
    key=("tcp_stream", "stream_id", "direction", "index"),
    columns=(
        Column("frame", "int64", None,
               "packet that delivered the frame's last byte (where tshark shows it)"),
        Column("ts", TS_DTYPE, None, "capture time of that packet"),
        _TCP_STREAM,
        _STREAM_ID,
        _DIRECTION,
        Column("index", "int64", None, "0-based number of the frame in its direction"),
        Column("start_frame", "int64", None, "packet that delivered the frame's first byte"),
        Column("start_ts", TS_DTYPE, None, "time of start_frame"),
        Column("fin", "bool", None, "websocket.fin: final fragment of a message"),
        Column("rsv1", "bool", None,
               "RSV1 (with permessage-deflate, on a message's first frame: compressed)"),
        Column("rsv2", "bool", None, "RSV2 (no registered use)"),
        Column("rsv3", "bool", None, "RSV3 (no registered use)"),
        Column("opcode", "int8", None, "websocket.opcode (0-15)"),
        Column("opcode_name", "category", None,
               "continuation, text, binary, close, ping, pong or reserved"),
        Column("masked", "bool", None,
               "websocket.mask (clients must mask, servers must not: see warnings)"),
        Column("payload_len", "Int64", "bytes",
               "payload length from the header (7-bit, 16-bit or 64-bit field); NA when the "
               "64-bit field has its top bit set (not a valid length). Frames above "
               f"max_frame_bytes ({DEFAULT_MAX_FRAME_BYTES >> 20} MiB by default) are reported "
               "(ws.frame_too_large), counted and skipped, their payload not inspected"),
        Column("header_bytes", "int8", "bytes",
               "2 + extended length (0, 2 or 8) + masking key (0 or 4)"),
        Column("lost_bytes", "int64", "bytes",
               "payload bytes never captured (gaps inside the frame)"),
        Column("complete", "bool", None,
               "False when the connection or the capture ended inside the frame"),
        Column("message_index", "Int64", None,
               "data frames: the message they belong to (ws_messages.index); NA for control "
               "frames"),
        Column("close_code", "Int32", None, "Close: websocket.payload.close.status_code"),
        Column("close_reason", "string", None,
               "Close: websocket.payload.close.reason (UTF-8, invalid bytes replaced)",
               secret="text"),
        Column("control_payload", "string", None,
               "Ping/Pong/Close: payload unmasked, hex (first 125 bytes)"),
    ),
)

WS_MESSAGES = TableSchema(
    name="ws_messages",
    grain="one row per WebSocket data message (a text/binary frame and its continuations)",
    key=("tcp_stream", "stream_id", "direction", "index"),
    columns=(
        Column("frame", "int64", None, "packet that completed the message (its last frame)"),
        Column("ts", TS_DTYPE, None, "time of that packet"),
        _TCP_STREAM,
        _STREAM_ID,
        _DIRECTION,
        Column("index", "int64", None, "0-based number of the message in its direction"),
        Column("type", "category", None,
               "text, binary, or unknown (continuation frames whose first frame was not seen)"),
        Column("fragments", "int64", "frames", "frames of the message"),
        Column("first_frame", "int64", None, "packet that delivered the message's first byte"),
        Column("first_ts", TS_DTYPE, None, "time of first_frame"),
        Column("duration_ms", "float64", "ms", "ts minus first_ts"),
        Column("wire_bytes", "int64", "bytes", "frame headers + payloads"),
        Column("payload_bytes", "int64", "bytes",
               "payload bytes as sent (compressed size when compressed; a frame cut off by the "
               "end of the connection counts the bytes sent, not its announced length)"),
        Column("lost_bytes", "int64", "bytes", "payload bytes never captured"),
        Column("compressed", "bool", None, "permessage-deflate (RSV1 on the first frame)"),
        Column("decompress", "category", None,
               "compressed messages: ok, failed (see ws.decompress_failed), limit (output "
               f"beyond max_decompressed_bytes, {DEFAULT_MAX_DECOMPRESSED_BYTES >> 20} MiB "
               "by default: ws.decompression_limit), skipped (bytes lost or not inspected, or "
               "the shared compression context was broken earlier), incomplete"),
        Column("decompressed_bytes", "Int64", "bytes",
               "size after inflating; for limit, the cap plus one"),
        Column("complete", "bool", None, "the final fragment (FIN) was seen"),
        Column("end_reason", "category", None,
               "fin, interrupted (a new message started before FIN), connection_closed, "
               "open_at_eof, lost_sync (bytes lost between frames)"),
        Column("utf8_ok", "boolean", None,
               "text messages: valid UTF-8 (False: see ws.invalid_utf8); NA for binary or "
               "when not all bytes were seen"),
        Column("preview", "string", None,
               f"text messages: the first {DEFAULT_PREVIEW_CHARS} characters "
               "(decompressed; invalid UTF-8 replaced)", secret="text"),
        Column("preview_truncated", "bool", None, "the text is longer than the preview"),
        Column("json_type", "string", None,
               'value of the first "type": "..." in the preview (the event name of JSON '
               "realtime APIs)"),
    ),
)

HEARTBEATS = TableSchema(
    name="ws_heartbeats",
    grain="one row per heartbeat probe (ping); analyses.heartbeats.heartbeats() gives the same "
          "columns for WebSocket Ping/Pong, HTTP/2 PING, TCP keep-alives and QUIC PING frames",
    key=("mechanism", "tcp_stream", "quic_connection", "ping_frame"),
    columns=(
        Column("mechanism", "category", None,
               "websocket (Ping/Pong frames), http2 (PING / PING+ACK), tcp_keepalive "
               "(tcp_events keep_alive / keep_alive_ack), quic_ping (a QUIC PING frame / an "
               "ACK frame of the peer acknowledging its packet; HTTP/3 has no PING frame of "
               "its own)"),
        Column("tcp_stream", "Int64", None,
               "Wireshark tcp.stream index of the connection; NA for quic_ping"),
        Column("quic_connection", "Int64", None,
               "quic_connections.quic_connection of a quic_ping; NA for the TCP mechanisms"),
        Column("sender", "category", None, "client or server: who sent the ping"),
        Column("ping_frame", "int64", None, "packet of the ping"),
        Column("ping_ts", TS_DTYPE, None, "time of ping_frame"),
        Column("payload", "string", None,
               "ping payload, hex ('' when empty); NA for TCP keep-alives; for quic_ping the "
               "packet carrying the PING, as <packet type>:<packet number> (1rtt:42)"),
        Column("pong_frame", "Int64", None,
               "packet of the matching pong: the other side, later, same payload (WebSocket, "
               "HTTP/2) or acknowledging the probe (TCP); the most recent unanswered ping with "
               "that payload gets it, and unsolicited pongs (allowed by RFC 6455) match nothing; "
               "quic_ping: the first ACK frame of the other side, in the same packet number "
               "space, whose ranges include the PING's packet number"),
        Column("pong_ts", TS_DTYPE, None, "time of pong_frame"),
        Column("rtt_ms", "float64", "ms", "pong_ts minus ping_ts"),
        Column("interval_ms", "float64", "ms",
               "time since the previous ping from the same sender on the connection "
               "(same mechanism); NaN for the first"),
        Column("answered", "boolean", None,
               "a pong matched; NA (outcome cut_off) when the connection or the capture "
               "ended less than the answer timeout (2 s by default) after the ping; a pong is "
               "matched whatever its delay"),
        Column("outcome", "category", None,
               "answered; unanswered (no pong within the connection's remaining life, which "
               "lasted at least the answer timeout); superseded (no pong, but a later ping "
               "of the same sender was answered within the timeout: RFC 6455 §5.5.3 lets an "
               "endpoint answer only the most recent ping); cut_off (see answered)"),
    ),
)

#: the tables this module builds (and ws_heartbeats), by Capture attribute name
WS_TABLES: dict[str, TableSchema] = {
    "ws_connections": WS_CONNECTIONS,
    "ws_frames": WS_FRAMES,
    "ws_messages": WS_MESSAGES,
    "ws_heartbeats": HEARTBEATS,
}

#: the fields of a ws_frames row as :class:`~pcaptools._columns.Records` packs them, widest
#: first so that every field is aligned (rows are padded to 8 bytes)
_FRAME_FIELDS = (
    ("frame", "q"), ("ts", "q"), ("tcp_stream", "q"), ("stream_id", "q"), ("index", "q"),
    ("start_frame", "q"), ("start_ts", "q"), ("payload_len", "q"), ("lost_bytes", "q"),
    ("message_index", "q"), ("close_code", "i"), ("fin", "b"), ("rsv", "b"), ("opcode", "b"),
    ("masked", "b"), ("header_bytes", "b"), ("complete", "b"), ("direction", "b"),
)  # fmt: skip
_FRAME_BLANK = bytes(96)
"""a ws_frames row of zeros (the row's 91 bytes padded to 8)"""

try:  # (True in the compiled build only: see _put_frame_row)
    import cython

    _COMPILED = bool(cython.compiled)
except ImportError:  # pragma: no cover - Cython is not installed: pure Python
    _COMPILED = False
#: the ws_frames and ws_messages rows are written in place by :func:`_put_frame_row` and
#: :func:`_put_message_row` (compiled build, on a little-endian machine: the byte order of the
#: rows' format), not packed by struct
_IN_PLACE = _COMPILED and sys.byteorder == "little"



def _party(d: Direction | None) -> str | None:
    if d is None:
        return None
    return "client" if d == Direction.CLIENT_TO_SERVER else "server"


class _FrameColumns:
    """ws_frames rows packed one struct call each (the WebSocket table that grows with
    packets); :meth:`columns` hands over the rows held. The direction and the opcode are
    packed as they are and coded by :meth:`columns`, each category in the order its values
    first appear (the codes of a streamed table's chunks stay the same)."""

    __slots__ = ("_buf", "_dir_code", "_limit", "_op_code", "_pack", "_rec", "codes", "n",
                 "sparse")

    def __init__(self, chunk_rows: int = 65536) -> None:
        self._rec = Records(_FRAME_FIELDS, chunk_rows=chunk_rows, align=8)
        self._buf = self._rec.buf
        self._pack = self._rec.pack
        self._limit = self._rec.limit
        self.codes = {name: CodeColumn() for name in ("direction", "opcode_name")}
        # the category code of each direction and opcode value seen (codes are never
        # reassigned: a new value asks the CodeColumn, in the order the values appear)
        self._dir_code: dict[int, int] = {}
        self._op_code: dict[int, int] = {}
        self.sparse: dict[str, dict[int, object]] = {"close_reason": {}, "control_payload": {}}
        self.n = 0
        """rows held"""

    def add(self, e: WsFrame) -> None:
        # (a named tuple: its fields in one unpacking, not one attribute lookup each)
        (ts, frame, d, tcp_stream, sid, index, start_ts, start_frame, fin, rsv, opcode,
         masked, plen, header_bytes, lost, complete, mi, cc, close_reason, ctrl) = e
        buf = self._buf
        if _IN_PLACE:
            _put_frame_row(
                buf, frame, ts, tcp_stream, NA if sid is None else sid, index, start_frame,
                start_ts, plen if plen < (1 << 63) else NA, lost, NA if mi is None else mi,
                NA32 if cc is None else cc, 1 if fin else 0, rsv, opcode, 1 if masked else 0,
                header_bytes, 1 if complete else 0, d)
        else:
            buf += self._pack(
                frame, ts, tcp_stream, NA if sid is None else sid, index, start_frame,
                start_ts, plen if plen < (1 << 63) else NA, lost, NA if mi is None else mi,
                NA32 if cc is None else cc, 1 if fin else 0, rsv, opcode, 1 if masked else 0,
                header_bytes, 1 if complete else 0, d)
        row = self.n
        self.n = row + 1
        if close_reason is not None:
            self.sparse["close_reason"][row] = close_reason
        if ctrl is not None:
            self.sparse["control_payload"][row] = ctrl.hex()
        if len(buf) >= self._limit:
            self._rec.seal()

    def columns(self) -> dict[str, Any]:
        """The rows held as columns for ``WS_FRAMES.frame(columns=...)``; they are handed over."""
        rec = self._rec
        rec.seal()
        out: dict[str, Any] = {}
        for name in ("frame", "ts", "tcp_stream", "index", "start_frame", "start_ts", "opcode",
                     "header_bytes", "lost_bytes"):  # fmt: skip
            out[name] = rec.column(name)
        dirs, ops = self.codes["direction"], self.codes["opcode_name"]
        out["direction"] = categorical(dirs.codes, first_seen_codes(
            rec.column("direction"), self._dir_code, lambda d: dirs.code(Direction(d).label)))
        out["opcode_name"] = categorical(ops.codes, first_seen_codes(
            out["opcode"], self._op_code, lambda op: ops.code(opcode_name(op))))
        for name in ("stream_id", "payload_len", "message_index", "close_code"):
            out[name] = nullable(rec.column(name))
        for name in ("fin", "masked", "complete"):
            out[name] = rec.column(name).astype(bool)
        rsv = rec.column("rsv")
        out["rsv1"] = (rsv & 4).astype(bool)
        out["rsv2"] = (rsv & 2).astype(bool)
        out["rsv3"] = (rsv & 1).astype(bool)
        for name, values in self.sparse.items():
            dense: list[object] = [None] * self.n
            for row, v in values.items():
                dense[row] = v
            out[name] = dense
            values.clear()
        self.n = 0
        return out


_MSG_FIELDS = (
    ("frame", "q"), ("ts", "q"), ("tcp_stream", "q"), ("stream_id", "q"), ("index", "q"),
    ("fragments", "q"), ("first_frame", "q"), ("first_ts", "q"), ("wire_bytes", "q"),
    ("payload_bytes", "q"), ("lost_bytes", "q"), ("decompressed_bytes", "q"),
    ("type", "h"), ("decompress", "h"), ("end_reason", "h"),
    ("compressed", "b"), ("complete", "b"), ("utf8_ok", "b"), ("preview_truncated", "b"),
    ("direction", "b"),
)  # fmt: skip
"""the fields of a ws_messages row, widest first (aligned as ws_frames')"""
_MSG_BLANK = bytes(112)
"""a ws_messages row of zeros (the row's 107 bytes padded to 8)"""
_MSG_LABELS = ("type", "decompress", "end_reason")
"""the category columns: a few label strings, shared by the rows, packed as codes (first-seen
order, -1 for None)"""
_MSG_TEXT = ("preview", "json_type")
"""the string columns: a new str each row, kept in Arrow blocks (:class:`TextColumns`)"""
_DIRECTIONS = tuple(d.label for d in Direction)
"""the direction labels by Direction value (sorted, as pandas orders the categories)"""


class _MessageColumns:
    """ws_messages rows: numbers (and the direction) packed one struct call each, the category
    values in one list per column, the preview and the JSON type in Arrow blocks;
    :meth:`columns` hands over the rows held."""

    __slots__ = ("_append", "_buf", "_first", "_limit", "_pack", "_rec", "_text_block", "labels",
                 "text")
    labels: tuple[dict[str | None, int], ...]

    def __init__(self, chunk_rows: int = 65536) -> None:
        self._rec = Records(_MSG_FIELDS, chunk_rows=chunk_rows, align=8)
        self._buf = self._rec.buf
        self._pack = self._rec.pack
        self._limit = self._rec.limit
        self.text = TextColumns(_MSG_TEXT)
        self._text_block = self.text.block_rows
        self._first = self.text.first
        """(the TextColumns' first column, bound once: it is never replaced)"""
        self.labels = tuple({None: -1} for _ in _MSG_LABELS)
        """per category column: label -> its code in the packed rows"""
        self._append: tuple[Callable[[str | None], None], ...] = self.text.append

    def __len__(self) -> int:
        return len(self._rec)

    def add(self, e: WsMessage) -> None:
        # (a named tuple: its fields in one unpacking, not one attribute lookup each)
        (ts, frame, d, tcp_stream, sid, index, typ, fragments, first_ts, first_frame, wire,
         payload, lost, compressed, decompress, dbytes, complete, end_reason, utf8, preview,
         truncated, json_type, _json_text) = e
        c_type, c_decompress, c_end = self.labels
        t = c_type.get(typ)
        if t is None:
            t = c_type[typ] = len(c_type) - 1
        dc = c_decompress.get(decompress)
        if dc is None:
            dc = c_decompress[decompress] = len(c_decompress) - 1
        er = c_end.get(end_reason)
        if er is None:
            er = c_end[end_reason] = len(c_end) - 1
        buf = self._buf
        if _IN_PLACE:
            _put_message_row(
                buf, frame, ts, tcp_stream, NA if sid is None else sid, index, fragments,
                first_frame, first_ts, wire, payload, lost, NA if dbytes is None else dbytes,
                t, dc, er, 1 if compressed else 0, 1 if complete else 0,
                -1 if utf8 is None else (1 if utf8 else 0), 1 if truncated else 0, d)
        else:
            buf += self._pack(
                frame, ts, tcp_stream, NA if sid is None else sid, index, fragments,
                first_frame, first_ts, wire, payload, lost, NA if dbytes is None else dbytes,
                t, dc, er, 1 if compressed else 0, 1 if complete else 0,
                -1 if utf8 is None else (1 if utf8 else 0), 1 if truncated else 0, d)
        a_preview, a_json_type = self._append
        a_preview(preview)
        a_json_type(json_type)
        if len(buf) >= self._limit:
            self._rec.seal()
        if len(self._first) >= self._text_block:
            self.text.flush()

    def columns(self) -> dict[str, Any]:
        """The rows held as columns for ``WS_MESSAGES.frame(columns=...)`` (handed over)."""
        rec = self._rec
        rec.seal()
        out: dict[str, Any] = {}
        for name in ("frame", "tcp_stream", "index", "fragments", "first_frame", "wire_bytes",
                     "payload_bytes", "lost_bytes"):  # fmt: skip
            out[name] = rec.column(name)
        ts, first = rec.column("ts"), rec.column("first_ts")
        duration = np.subtract(ts, first, dtype=np.float64)  # (one array, divided in place)
        duration /= 1e6
        out["duration_ms"] = duration
        out["ts"], out["first_ts"] = ts, first
        for name in ("stream_id", "decompressed_bytes"):
            out[name] = nullable(rec.column(name))
        for name in ("compressed", "complete", "preview_truncated"):
            out[name] = rec.column(name).astype(bool)
        utf8 = rec.column("utf8_ok")
        out["utf8_ok"] = pd.arrays.BooleanArray(utf8 == 1, utf8 < 0)
        # (the categories pd.Categorical makes of the labels: those present, sorted)
        out["direction"] = sorted_categorical(rec.column("direction"), _DIRECTIONS)
        for name, coded in zip(_MSG_LABELS, self.labels, strict=True):
            out[name] = _labels_categorical(rec.column(name), coded)
        out.update(self.text.take())  # string columns: Arrow (or lists where they would not)
        return out


def _labels_categorical(codes: np.ndarray, coded: dict[str | None, int]) -> Any:
    """The category column of ``codes`` (-1: None) by ``coded`` (label -> code): what
    ``pd.Categorical`` makes of the labels (categories: those present, sorted; None is NA);
    where no row has a label, the list of None the schema's cast makes that of."""
    if not (codes >= 0).any():
        return [None] * len(codes)
    labels = [""] * (len(coded) - 1)
    for label, code in coded.items():
        if label is not None:
            labels[code] = label
    order = sorted(range(len(labels)), key=labels.__getitem__)
    rank = np.full(len(labels) + 1, -1, dtype=np.intp)  # (the last entry: code -1, NA)
    rank[order] = np.arange(len(labels))
    return sorted_categorical(rank[codes], [labels[i] for i in order])


def _put_frame_row(buf: bytearray, frame: int, ts: int, tcp_stream: int, stream_id: int,
                   index: int, start_frame: int, start_ts: int, payload_len: int,
                   lost_bytes: int, message_index: int, close_code: int, fin: int, rsv: int,
                   opcode: int, masked: int, header_bytes: int, complete: int,
                   direction: int) -> int:
    """Append a ``ws_frames`` row to ``buf`` as ``Records.pack`` would (:data:`_FRAME_FIELDS`
    in order, little endian; the padding stays zero), written in place through C pointers:
    compiled build only (``_IN_PLACE``; ws_tables.pxd types every argument as its field's C
    type, so a value that does not fit raises OverflowError where struct raises struct.error;
    the values of a WsFrame fit: a header is at most 14 bytes, the opcode and the RSV bits are
    4 and 3 bits). Pure Python packs the row with struct instead; the tables are the same
    either way (tests/test_accel.py)."""
    n = len(buf)
    buf.extend(_FRAME_BLANK)
    at = buf  # (a char * to the bytearray's storage in the compiled build)
    q = cython.cast(cython.p_longlong, at + n)  # type: ignore[operator]  # (char * + n)
    q[0] = frame
    q[1] = ts
    q[2] = tcp_stream
    q[3] = stream_id
    q[4] = index
    q[5] = start_frame
    q[6] = start_ts
    q[7] = payload_len
    q[8] = lost_bytes
    q[9] = message_index
    i = cython.cast(cython.p_int, q + 10)
    i[0] = close_code
    b = cython.cast(cython.p_schar, i + 1)
    b[0] = fin
    b[1] = rsv
    b[2] = opcode
    b[3] = masked
    b[4] = header_bytes
    b[5] = complete
    b[6] = direction
    return 0


def _put_message_row(buf: bytearray, frame: int, ts: int, tcp_stream: int, stream_id: int,
                     index: int, fragments: int, first_frame: int, first_ts: int,
                     wire_bytes: int, payload_bytes: int, lost_bytes: int,
                     decompressed_bytes: int, typ: int, decompress: int, end_reason: int,
                     compressed: int, complete: int, utf8_ok: int, preview_truncated: int,
                     direction: int) -> int:
    """Append a ``ws_messages`` row to ``buf`` as ``Records.pack`` would (:data:`_MSG_FIELDS`
    in order), written in place as :func:`_put_frame_row` writes a frame's (the label codes
    are a handful per column, far below 2**15)."""
    n = len(buf)
    buf.extend(_MSG_BLANK)
    at = buf
    q = cython.cast(cython.p_longlong, at + n)  # type: ignore[operator]
    q[0] = frame
    q[1] = ts
    q[2] = tcp_stream
    q[3] = stream_id
    q[4] = index
    q[5] = fragments
    q[6] = first_frame
    q[7] = first_ts
    q[8] = wire_bytes
    q[9] = payload_bytes
    q[10] = lost_bytes
    q[11] = decompressed_bytes
    h = cython.cast(cython.p_short, q + 12)
    h[0] = typ
    h[1] = decompress
    h[2] = end_reason
    b = cython.cast(cython.p_schar, h + 3)
    b[0] = compressed
    b[1] = complete
    b[2] = utf8_ok
    b[3] = preview_truncated
    b[4] = direction
    return 0


class WsTablesBuilder:
    """Collects the rows of ws_connections, ws_frames and ws_messages from observer events
    (other event types are ignored)."""

    def __init__(self, *, chunk_rows: int = 65536) -> None:
        """The rows are the values as seen: credentials are redacted by ``load()``, on the
        columns the schemas mark (``Column.secret``: :func:`pcaptools.redaction.redact_frame`)."""
        self.frames = _FrameColumns(chunk_rows)
        self.messages = _MessageColumns(chunk_rows)
        self.connections: list[tuple[Any, ...]] = []
        self._handlers: dict[type, Callable[[Any], None]] = {
            WsFrame: self.frames.add,
            WsMessage: self.messages.add,
            WsConnectionEnded: self._connection,
        }

    def add(self, event: object) -> None:
        """Record one event (any type; unknown types are ignored)."""
        h = self._handlers.get(type(event))
        if h is not None:
            h(event)

    def add_all(self, events: Iterable[object]) -> None:
        handler = self._handlers.get
        for e in events:
            h = handler(type(e))
            if h is not None:
                h(e)

    def tables(self) -> dict[str, pd.DataFrame]:
        """ws_connections, ws_frames and ws_messages (empty ones keep their columns); the
        ws_frames and ws_messages rows are handed over (see :meth:`drain`)."""
        return {
            "ws_connections": WS_CONNECTIONS.frame(self.connections),
            "ws_frames": self.drain("ws_frames"),
            "ws_messages": self.drain("ws_messages"),
        }

    def pending(self) -> dict[str, int]:
        """Rows held of the tables that grow with traffic, for
        :class:`~pcaptools.tables.schema.ChunkPump` (streaming export)."""
        return {"ws_frames": self.frames.n, "ws_messages": len(self.messages)}

    def drain(self, table: str) -> pd.DataFrame:
        """The ws_frames or ws_messages rows held, handed over (the streaming hook);
        :meth:`tables` then gives only the rows added after."""
        if table == "ws_frames":
            return WS_FRAMES.frame(columns=self.frames.columns(), copy=False)
        if table == "ws_messages":
            return WS_MESSAGES.frame(columns=self.messages.columns(), copy=False)
        raise ValueError(f"WsTablesBuilder cannot drain {table!r}")

    def _connection(self, e: WsConnectionEnded) -> None:
        h = e.handshake
        start = h.response_ts_ns
        self.connections.append(
            (
                e.tcp_stream,
                e.stream_id,
                h.http_version,
                h.request_frame,
                h.response_frame,
                h.response_ts_ns,
                h.path,
                h.host,
                h.origin,
                h.version,
                h.accept_ok,
                h.offered_protocols,
                h.protocol,
                h.offered_extensions,
                h.extensions,
                h.permessage_deflate,
                h.client_no_context_takeover,
                h.server_no_context_takeover,
                h.client_max_window_bits,
                h.server_max_window_bits,
                e.client_frames,
                e.server_frames,
                e.client_messages,
                e.server_messages,
                e.client_payload_bytes,
                e.server_payload_bytes,
                e.client_wire_bytes,
                e.server_wire_bytes,
                e.client_pings,
                e.server_pings,
                e.client_pongs,
                e.server_pongs,
                e.client_mask_errors,
                e.server_mask_errors,
                e.client_lost_bytes,
                e.server_lost_bytes,
                e.client_skipped_bytes,
                e.server_skipped_bytes,
                _party(e.close_by),
                e.close_frame,
                e.close_ts_ns,
                e.client_close_code,
                e.client_close_reason,
                e.server_close_code,
                e.server_close_reason,
                e.end_reason,
                e.frame,
                e.ts_ns,
                (e.ts_ns - start) / 1e6 if start is not None else None,
            )
        )

