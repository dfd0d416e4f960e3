"""The HTTP/3 observer of one QUIC connection (RFC 9114, QPACK RFC 9204): a
:class:`~pcaptools.protocols.quic.streams.QuicStreamObserver` fed the in-order bytes of
every QUIC stream by the QUIC tracker.

- Request streams (client-initiated bidirectional) and push streams carry frames: HEADERS
  (QPACK field sections), DATA (the body, streamed, never buffered whole) and PUSH_PROMISE;
  reserved (grease) and unknown frame types are skipped and counted; a frame type not
  allowed on its stream is an ``http3.frame_unexpected`` row and is skipped.
- Unidirectional streams start with their type: control (SETTINGS first, then GOAWAY,
  MAX_PUSH_ID, CANCEL_PUSH), push, QPACK encoder (0x02) and decoder (0x03); reserved and
  unknown types are counted, not read.
- QPACK with ``pylsqpack``: one decoder per direction, created with the table capacity and
  blocked-stream limit the *receiving* side announced in its SETTINGS (RFC 9204 defaults,
  0 and 0, until then), fed that direction's encoder stream. A field section that refers
  to entries not inserted yet is blocked and decoded when the encoder-stream bytes arrive
  (``Http3Frame.qpack`` ``blocked``, ``decoded_frame``); one that can never be decoded
  (encoder-stream bytes lost, or SETTINGS not captured) is reported
  (``http3.qpack_blocked``), never guessed.
- A frame that does not parse, bytes lost inside a frame header or a buffered frame, or a
  FIN inside a frame stops the parsing of that stream (a warning row; its bytes are still
  counted); the other streams and the rest of the connection carry on. Bytes lost inside a
  DATA payload are counted and told to the body parser (content decoding, SSE), and the
  frames after it are still read.

Response bodies go through :func:`~pcaptools.protocols.body.open_body` (content decoding,
then the parser the registry has for the media type: SSE for ``text/event-stream``).
Never raises on wire data.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from pylsqpack import Decoder, DecompressionFailed, EncoderStreamError, StreamBlocked

from ...diagnostics import Diagnostics
from ...tcp.stream import Direction
from ..body import Body, open_body
from ..content_coding import DEFAULT_MAX_DECODED_BYTES
from ..sse import DEFAULT_MAX_LINE_BYTES, SseEvent
from .events import Headers, Http3Frame, Http3StreamEnded
from .frames import (
    CANCEL_PUSH,
    DATA,
    GOAWAY,
    HEADERS,
    MAX_PUSH_ID,
    PUSH_PROMISE,
    SETTINGS,
    STREAM_CONTROL,
    STREAM_PUSH,
    STREAM_QPACK_DECODER,
    STREAM_QPACK_ENCODER,
    STREAM_TYPES,
    Http3FrameError,
    frame_type_name,
    is_reserved,
    parse_settings,
    parse_single_varint,
    read_varint,
)

__all__ = [
    "MAX_HTTP3_FRAME_BYTES",
    "MAX_HTTP3_FRAME_ROWS",
    "MAX_HTTP3_OPEN_STREAMS",
    "MAX_HTTP3_SSE_ROWS",
    "MAX_QPACK_PENDING_BYTES",
    "Http3Observer",
    "QpackState",
]

MAX_HTTP3_FRAME_BYTES: Final = 1 << 20
"""payload bytes of a non-DATA frame (HEADERS, SETTINGS...) held until it is complete; a
longer one is skipped (``http3.frame_too_long``)"""
MAX_HTTP3_FRAME_ROWS: Final = 1_000_000
"""http3_frames rows kept per QUIC connection; later frames are parsed but not listed"""
MAX_HTTP3_SSE_ROWS: Final = 1_000_000
"""http3_sse_events rows kept per QUIC connection; later events are counted
(``http3_streams.sse_events``) but not listed"""
MAX_HTTP3_OPEN_STREAMS: Final = 100_000
"""QUIC streams of one connection tracked at once; bytes of further streams are not parsed"""
MAX_QPACK_PENDING_BYTES: Final = 1 << 20
"""bytes held per direction while QPACK cannot proceed: encoder-stream bytes that arrived
before the receiver's SETTINGS, and response DATA waiting for its blocked field section"""

_C2S = Direction.CLIENT_TO_SERVER
_S2C = Direction.SERVER_TO_CLIENT
_STATIC_ONLY = b"\x00\x00"
"""a field section prefix with Required Insert Count 0 and Base 0: static table only"""

# parsing modes of one direction of one stream
_M_TYPE = 0  # unidirectional: waiting for the stream type
_M_PUSH_ID = 1  # push stream: waiting for the push id
_M_FRAME = 2  # at a frame boundary
_M_DATA = 3  # inside a DATA payload (streamed)
_M_PAYLOAD = 4  # inside a buffered payload
_M_SKIP = 5  # inside a skipped frame payload
_M_ENCODER = 6  # QPACK encoder stream
_M_COUNT = 7  # bytes counted, not parsed (decoder stream, unknown stream type)
_M_DEAD = 8  # desynchronised: bytes counted, not parsed

_BUFFERED = frozenset({HEADERS, SETTINGS, GOAWAY, PUSH_PROMISE, CANCEL_PUSH, MAX_PUSH_ID})
_ON_CONTROL = frozenset({SETTINGS, GOAWAY, MAX_PUSH_ID, CANCEL_PUSH})
_ON_REQUEST = frozenset({DATA, HEADERS, PUSH_PROMISE})
_ON_PUSH = frozenset({DATA, HEADERS})


def _headers(raw: list[tuple[bytes, bytes]]) -> Headers:
    return tuple(
        (k.decode("utf-8", "replace"), v.decode("utf-8", "replace")) for k, v in raw
    )


def _value(headers: Headers | None, name: str) -> str | None:
    if headers is None:
        return None
    for k, v in headers:
        if k == name:
            return v
    return None


@dataclass(slots=True)
class _Side:
    """One direction of one QUIC stream."""

    stream_id: int
    direction: Direction
    kind: str
    """request, push, control, qpack_encoder, qpack_decoder, unknown, reserved, pending
    (unidirectional, type not read yet), unexpected (server-initiated bidirectional)"""
    mode: int
    buf: bytearray = field(default_factory=bytearray)
    offset: int = 0
    """stream offset of the next byte expected"""
    started: bool = False
    ftype: int = 0
    flen: int = 0
    fleft: int = 0
    frames: int = 0
    ended: bool = False
    end_ts: int | None = None
    end_frame: int | None = None
    reset: int | None = None
    """RESET_STREAM error code"""
    desynced: bool = False
    skipped: int = 0
    """bytes counted but not parsed"""
    first_control_frame: bool = True


@dataclass(slots=True)
class _Request:
    """What one request stream has shown so far."""

    stream_id: int
    first_frame: int
    first_ts: int
    partial: bool = False
    request_headers: Headers | None = None
    response_headers: Headers | None = None
    status: int | None = None
    informational: int = 0
    request_frame: int | None = None
    request_ts: int | None = None
    request_end_ts: int | None = None
    response_frame: int | None = None
    """the packet completing the first server field section that is not known to be 1xx"""
    response_ts: int | None = None
    response_final: bool = False
    """the final response's field section was decoded (or failed: status unknown)"""
    first_data_ts: int | None = None
    client_data: int = 0
    server_data: int = 0
    client_header_bytes: int = 0
    server_header_bytes: int = 0
    client_frames: int = 0
    server_frames: int = 0
    client_blocks: int = 0
    server_blocks: int = 0
    """server field sections seen (in order; decoded in the same order)"""
    server_blocks_done: int = 0
    client_blocks_done: int = 0
    awaiting: bool = False
    """both sides ended while a field section still waited for QPACK: reported once decoded"""
    body: Body | None = None
    body_done: bool = False
    pending: list[tuple[bytes | int, int, int]] = field(default_factory=list)
    """response DATA (bytes, or a lost byte count) waiting for the final field section"""
    pending_bytes: int = 0
    sse_events: int = 0
    reported: bool = False
    last_ts: int = 0
    last_frame: int = 0
    """the latest packet that carried bytes of the stream"""


@dataclass(slots=True)
class _Block:
    """A field section on its way through QPACK."""

    stream_id: int
    data: bytes
    ts: int
    frame: int
    row: Http3Frame | None
    fed: bool = False
    promise: bool = False
    """a PUSH_PROMISE's field section (a pushed request), not the stream's own"""
    push_id: int | None = None
    """the push id of that PUSH_PROMISE"""


@dataclass(slots=True)
class Http3Push:
    """One server push (RFC 9114 §4.6) of a connection, by push id: the PUSH_PROMISE
    frames naming it (the promised request) and the push stream carrying its response."""

    push_id: int
    promises: int = 0
    """PUSH_PROMISE frames with this push id (a server may promise it on several request
    streams)"""
    promise_stream_id: int | None = None
    """the request stream of the first PUSH_PROMISE"""
    promise_frame: int | None = None
    promise_ts: int | None = None
    request_headers: Headers | None = None
    """the promised request (the first PUSH_PROMISE's field section), once decoded"""
    request_decoded: bool = False
    stream_id: int | None = None
    """the push stream (server-initiated unidirectional, type 0x01) carrying the response"""
    stream_frame: int | None = None
    stream_ts: int | None = None
    response_headers: Headers | None = None
    status: int | None = None
    informational: int = 0
    response_frame: int | None = None
    data_bytes: int = 0
    """DATA payload bytes of the push stream"""
    cancelled_by: Direction | None = None
    """the side that sent CANCEL_PUSH for this push id (the first one)"""


@dataclass(slots=True)
class QpackState:
    """The QPACK decoding of the field sections one side sends."""

    direction: Direction
    decoder: Any = None
    """pylsqpack Decoder, created once the receiver's SETTINGS are known"""
    capacity: int | None = None
    blocked_streams: int = 0
    pending_encoder: bytearray = field(default_factory=bytearray)
    encoder_bytes: int = 0
    lost: bool = False
    """encoder-stream bytes were lost: later references to them cannot be decoded"""
    broken: bool = False
    """the encoder stream did not parse: no dynamic-table reference can be decoded"""
    queues: dict[int, deque[_Block]] = field(default_factory=dict)
    decoded: int = 0
    """field sections decoded"""
    blocked: int = 0
    """of those, the ones that waited for encoder-stream bytes (or SETTINGS)"""
    failed: int = 0
    never: int = 0
    """field sections never decoded (http3.qpack_blocked)"""


class Http3Observer:
    """HTTP/3 on one QUIC connection (a
    :class:`~pcaptools.protocols.quic.streams.QuicStreamObserver`). What it saw is in
    ``frames`` (:class:`Http3Frame`), ``streams`` (:class:`Http3StreamEnded`, once each
    request stream has ended or the connection has) and ``sse`` (the
    :class:`~pcaptools.protocols.sse.SseEvent` of its event-stream responses). Never raises
    on wire data: anomalies are ``http3.*`` rows of ``diag``."""

    def __init__(
        self,
        *,
        connection: int,
        diag: Diagnostics,
        midstream: bool = False,
        sse_max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_decoded_body_bytes: int = DEFAULT_MAX_DECODED_BYTES,
        max_frame_rows: int = MAX_HTTP3_FRAME_ROWS,
    ) -> None:
        self.connection = connection
        self.diag = diag
        self.midstream = midstream
        self.sse_max_line_bytes = sse_max_line_bytes
        self.max_decoded_body_bytes = max_decoded_body_bytes
        self.max_frame_rows = max_frame_rows
        self.frames: list[Http3Frame] = []
        self.streams: list[Http3StreamEnded] = []
        self.sse: list[SseEvent] = []
        self.frame_rows_dropped = 0
        self.sse_rows_dropped = 0
        self.settings: dict[Direction, tuple[tuple[int, int], ...]] = {}
        """the SETTINGS each side sent"""
        self.goaway: dict[Direction, int] = {}
        """the latest GOAWAY id each side sent"""
        self.reserved_frames = 0
        self.unknown_frames = 0
        self.finished = False
        self._sides: dict[tuple[int, Direction], _Side] = {}
        self._requests: dict[int, _Request] = {}
        self._uni: dict[tuple[Direction, str], int] = {}
        """(sender, control | qpack_encoder | qpack_decoder) -> the stream id"""
        self._qpack = (QpackState(_C2S), QpackState(_S2C))
        """by the direction of the field sections decoded"""
        self._last_ts = 0
        self._last_frame = 0
        self._too_many = False
        self._closed: set[int] = set()
        """request streams already summarised"""
        self.pushes: dict[int, Http3Push] = {}
        """push id -> the server push (at most MAX_HTTP3_OPEN_STREAMS of them)"""
        self._push_streams: dict[int, int] = {}
        """push stream id -> its push id"""

    # ------------------------------------------------------------------ the contract

    def stream_data(self, stream_id: int, direction: Direction, offset: int, data: bytes,
                    fin: bool, ts_ns: int, frame: int) -> None:
        self._last_ts, self._last_frame = ts_ns, frame
        side = self._side(stream_id, direction, ts_ns, frame)
        if side is None:
            return
        req = self._requests.get(stream_id)
        if req is not None:
            req.last_ts, req.last_frame = ts_ns, frame
        if not side.started:
            side.started = True
            if offset > 0:
                self._lost(side, offset, ts_ns, frame, at_start=True)
        elif offset > side.offset:
            self._lost(side, offset - side.offset, ts_ns, frame)
        elif offset < side.offset:  # overlap: the QUIC layer delivers once; keep the new part
            cut = side.offset - offset
            data = data[cut:]
        side.offset = max(side.offset, offset) + len(data)
        if data:
            self._parse(side, data, ts_ns, frame)
        if fin:
            self._fin(side, ts_ns, frame)

    def stream_gap(self, stream_id: int, direction: Direction, offset: int, nbytes: int,
                   ts_ns: int, frame: int) -> None:
        self._last_ts, self._last_frame = ts_ns, frame
        side = self._side(stream_id, direction, ts_ns, frame)
        if side is None:
            return
        side.started = True
        self._lost(side, nbytes, ts_ns, frame, at_start=offset == 0)
        if nbytes:
            side.offset = offset + nbytes

    def stream_reset(self, stream_id: int, direction: Direction, error_code: int,
                     final_size: int, ts_ns: int, frame: int) -> None:
        self._last_ts, self._last_frame = ts_ns, frame
        side = self._side(stream_id, direction, ts_ns, frame)
        if side is None or side.ended:
            return
        side.reset = error_code
        side.ended = True
        side.end_ts, side.end_frame = ts_ns, frame
        side.started = True
        if side.kind in ("control", "qpack_encoder", "qpack_decoder"):
            self.diag.add(
                "http3.critical_stream_closed",
                f"connection {self.connection} {direction.label}: the {side.kind} stream "
                f"{stream_id} was reset (error 0x{error_code:x})",
                ts_ns=ts_ns, frame=frame, direction=direction.label,
            )
        req = self._requests.get(stream_id)
        if req is not None:
            self._side_ended(req, ts_ns, frame)

    def finish(self, ts_ns: int, frame: int) -> None:
        if self.finished:
            return
        self.finished = True
        if frame:
            self._last_ts, self._last_frame = ts_ns, frame
        ts, fr = self._last_ts, self._last_frame
        for q in self._qpack:
            for queue in q.queues.values():
                for b in queue:
                    self._never_decoded(q, b)
            q.queues.clear()
        for req in list(self._requests.values()):
            self._report(req, ts, fr, final=True)
        self._requests.clear()

    # ------------------------------------------------------------------ facts

    def uni_stream(self, sender: Direction, kind: str) -> int | None:
        """the id of ``sender``'s ``control``, ``qpack_encoder`` or ``qpack_decoder`` stream"""
        return self._uni.get((sender, kind))

    def qpack(self, sender: Direction) -> QpackState:
        """QPACK facts of the field sections ``sender`` sent (counts, encoder-stream bytes,
        the table capacity the receiver announced)"""
        return self._qpack[sender]

    @property
    def desynced_streams(self) -> int:
        """request streams summarised with a part not parsed"""
        return sum(1 for s in self.streams if s.desynced)

    # ------------------------------------------------------------------ streams

    def _side(self, sid: int, d: Direction, ts: int, frame: int) -> _Side | None:
        key = (sid, d)
        side = self._sides.get(key)
        if side is not None:
            return side
        if sid in self._closed:
            return None  # a request stream already summarised (both sides had ended)
        if len(self._sides) >= MAX_HTTP3_OPEN_STREAMS:
            if not self._too_many:
                self._too_many = True
                self.diag.add(
                    "http3.too_many_streams",
                    f"connection {self.connection}: more than {MAX_HTTP3_OPEN_STREAMS} QUIC "
                    f"streams at once; stream {sid} and later new ones are not parsed",
                    ts_ns=ts, frame=frame,
                )
            return None
        initiator = sid & 1  # 0 client, 1 server
        uni = sid & 2
        if not uni:
            if initiator:
                kind, mode = "unexpected", _M_COUNT
                self.diag.add(
                    "http3.unexpected_stream",
                    f"connection {self.connection}: server-initiated bidirectional stream "
                    f"{sid} (HTTP/3 has none without an extension); its bytes are counted",
                    ts_ns=ts, frame=frame, direction=d.label,
                )
            else:
                kind, mode = "request", _M_FRAME
                if sid not in self._requests:
                    self._requests[sid] = _Request(sid, frame, ts, last_ts=ts, last_frame=frame)
        else:
            sender = _S2C if initiator else _C2S
            if d != sender:
                kind, mode = "unexpected", _M_COUNT
                self.diag.add(
                    "http3.unexpected_stream",
                    f"connection {self.connection}: bytes from {d.label} on unidirectional "
                    f"stream {sid}, which the other side opened",
                    ts_ns=ts, frame=frame, direction=d.label,
                )
            else:
                kind, mode = "pending", _M_TYPE
        side = _Side(sid, d, kind, mode)
        self._sides[key] = side
        return side

    def _fin(self, side: _Side, ts: int, frame: int) -> None:
        if side.ended:
            return
        side.ended = True
        side.end_ts, side.end_frame = ts, frame
        if side.mode in (_M_DATA, _M_PAYLOAD, _M_SKIP, _M_PUSH_ID, _M_TYPE) or (
            side.mode == _M_FRAME and side.buf
        ):
            self.diag.add(
                "http3.frame_truncated",
                f"connection {self.connection} stream {side.stream_id} {side.direction.label}: "
                f"the stream ended inside a frame ({len(side.buf)} bytes of it held)",
                ts_ns=ts, frame=frame, direction=side.direction.label,
            )
            side.skipped += len(side.buf)
            side.buf.clear()
            if side.mode == _M_DATA:
                side.mode = _M_DEAD
                req = self._requests.get(side.stream_id)
                if req is not None and side.direction == _S2C:
                    self._body_gap(req, 0, ts, frame)
            side.mode = _M_DEAD
            side.desynced = True
        if side.kind in ("control", "qpack_encoder", "qpack_decoder"):
            self.diag.add(
                "http3.critical_stream_closed",
                f"connection {self.connection} {side.direction.label}: the {side.kind} "
                f"stream {side.stream_id} was closed (FIN)",
                ts_ns=ts, frame=frame, direction=side.direction.label,
            )
        req = self._requests.get(side.stream_id)
        if req is not None:
            if side.direction == _C2S:
                req.request_end_ts = ts
            self._side_ended(req, ts, frame)

    def _lost(self, side: _Side, nbytes: int, ts: int, frame: int, *,
              at_start: bool = False) -> None:
        """``nbytes`` (0: unknown) of ``side`` were never seen."""
        req = self._requests.get(side.stream_id)
        if at_start and req is not None:
            req.partial = True
        if side.mode == _M_DATA and nbytes and nbytes <= side.fleft:
            side.fleft -= nbytes
            self._data_lost(side, nbytes, ts, frame)
            if side.fleft == 0:
                self._end_frame(side, ts, frame)
            return
        if side.mode in (_M_COUNT, _M_DEAD):
            side.skipped += nbytes
            return
        side.skipped += nbytes + len(side.buf)
        side.buf.clear()
        was = side.mode
        side.mode = _M_DEAD
        side.desynced = True
        if was == _M_DATA and req is not None and side.direction == _S2C:
            self._body_gap(req, nbytes, ts, frame)
        what = f"{nbytes} bytes" if nbytes else "bytes (count unknown)"
        if side.kind == "qpack_encoder":
            q = self._qpack[side.direction]
            q.lost = True
            self.diag.add(
                "http3.qpack_encoder_stream_gap",
                f"connection {self.connection} {side.direction.label}: {what} of the QPACK "
                f"encoder stream {side.stream_id} were not captured; field sections that "
                "refer to entries inserted from there on cannot be decoded",
                ts_ns=ts, frame=frame, direction=side.direction.label,
            )
            return
        self.diag.add(
            "http3.stream_gap",
            f"connection {self.connection} stream {side.stream_id} ({side.kind}) "
            f"{side.direction.label}: {what} not captured"
            + (" at its start" if at_start else "")
            + "; the rest of this stream direction is counted, not parsed",
            ts_ns=ts, frame=frame, direction=side.direction.label,
        )

    # ------------------------------------------------------------------ the parser

    def _parse(self, side: _Side, data: bytes, ts: int, frame: int) -> None:
        mode = side.mode
        if mode in (_M_COUNT, _M_DEAD):
            side.skipped += len(data)
            return
        if mode == _M_ENCODER:
            self._encoder(side, data, ts, frame)
            return
        if mode == _M_DATA and not side.buf:
            # the common case: DATA payload bytes, handed on without buffering
            take = min(side.fleft, len(data))
            side.fleft -= take
            self._data(side, data[:take] if take < len(data) else data, ts, frame)
            if side.fleft:
                return
            self._end_frame(side, ts, frame)
            data = data[take:]
            if not data:
                return
        buf = side.buf
        buf += data
        pos = 0
        n = len(buf)
        try:
            while pos < n:
                mode = side.mode
                if mode == _M_FRAME:
                    t = read_varint(buf, pos)
                    if t is None:
                        break
                    ln = read_varint(buf, t[1])
                    if ln is None:
                        break
                    pos = ln[1]
                    self._frame_start(side, t[0], ln[0], ts, frame)
                    if side.mode == _M_FRAME:  # empty frame, already ended
                        continue
                elif mode == _M_DATA:
                    take = min(side.fleft, n - pos)
                    side.fleft -= take
                    self._data(side, bytes(buf[pos:pos + take]), ts, frame)
                    pos += take
                    if side.fleft == 0:
                        self._end_frame(side, ts, frame)
                elif mode == _M_SKIP:
                    take = min(side.fleft, n - pos)
                    side.fleft -= take
                    pos += take
                    if side.fleft == 0:
                        self._end_frame(side, ts, frame)
                elif mode == _M_PAYLOAD:
                    if n - pos < side.flen:
                        break
                    payload = bytes(buf[pos:pos + side.flen])
                    pos += side.flen
                    side.mode = _M_FRAME
                    self._payload(side, payload, ts, frame)
                elif mode == _M_TYPE:
                    t = read_varint(buf, pos)
                    if t is None:
                        break
                    pos = t[1]
                    self._stream_type(side, t[0], ts, frame)
                elif mode == _M_PUSH_ID:
                    t = read_varint(buf, pos)
                    if t is None:
                        break
                    pos = t[1]
                    side.mode = _M_FRAME
                    self._push_stream(side, t[0], ts, frame)
                elif mode == _M_ENCODER:
                    rest = bytes(buf[pos:])
                    pos = n
                    self._encoder(side, rest, ts, frame)
                else:  # _M_COUNT, _M_DEAD
                    side.skipped += n - pos
                    pos = n
        except Http3FrameError as exc:
            self.diag.add(
                "http3.malformed_frame",
                f"connection {self.connection} stream {side.stream_id} ({side.kind}) "
                f"{side.direction.label}: {exc}; the rest of this stream direction is "
                "counted, not parsed",
                ts_ns=ts, frame=frame, direction=side.direction.label,
            )
            side.mode = _M_DEAD
            side.desynced = True
            side.skipped += n - pos
            pos = n
        del buf[:pos]
        if side.mode in (_M_COUNT, _M_DEAD) and buf:
            side.skipped += len(buf)
            buf.clear()
        elif side.mode == _M_PAYLOAD and len(buf) > MAX_HTTP3_FRAME_BYTES:  # pragma: no cover
            side.mode = _M_DEAD

    def _stream_type(self, side: _Side, stype: int, ts: int, frame: int) -> None:
        kind = STREAM_TYPES.get(stype)
        d = side.direction
        if kind is None:
            side.kind = "reserved" if is_reserved(stype) else "unknown"
            side.mode = _M_COUNT
            return
        side.kind = kind
        if kind != "push":
            other = self._uni.get((d, kind))
            if other is not None and other != side.stream_id:
                self.diag.add(
                    "http3.unexpected_stream",
                    f"connection {self.connection} {d.label}: a second {kind} stream "
                    f"({side.stream_id}; the first is {other}): H3_STREAM_CREATION_ERROR; "
                    "its bytes are counted",
                    ts_ns=ts, frame=frame, direction=d.label,
                )
                side.mode = _M_COUNT
                return
            self._uni[(d, kind)] = side.stream_id
        if stype == STREAM_CONTROL:
            side.mode = _M_FRAME
        elif stype == STREAM_PUSH:
            if d == _C2S:
                self.diag.add(
                    "http3.unexpected_stream",
                    f"connection {self.connection}: a push stream ({side.stream_id}) from the "
                    "client (H3_STREAM_CREATION_ERROR); its bytes are counted",
                    ts_ns=ts, frame=frame, direction=d.label,
                )
                side.mode = _M_COUNT
            else:
                side.mode = _M_PUSH_ID
        elif stype == STREAM_QPACK_ENCODER:
            side.mode = _M_ENCODER
        elif stype == STREAM_QPACK_DECODER:
            side.mode = _M_COUNT

    def _frame_start(self, side: _Side, ftype: int, flen: int, ts: int, frame: int) -> None:
        side.ftype, side.flen, side.fleft = ftype, flen, flen
        side.frames += 1
        req = self._requests.get(side.stream_id) if side.kind == "request" else None
        if req is not None:
            if side.direction == _C2S:
                req.client_frames += 1
            else:
                req.server_frames += 1
        if side.kind == "control":
            allowed = _ON_CONTROL
        elif side.kind == "push" or side.direction == _C2S:
            allowed = _ON_PUSH  # (PUSH_PROMISE comes from the server only)
        else:
            allowed = _ON_REQUEST
        known = ftype in allowed
        missing_settings = False
        if side.kind == "control":
            if side.first_control_frame and ftype != SETTINGS:
                missing_settings = True
                known = False
                self.diag.add(
                    "http3.frame_unexpected",
                    f"connection {self.connection} {side.direction.label}: the control "
                    f"stream starts with {frame_type_name(ftype)} (0x{ftype:x}), not SETTINGS "
                    "(H3_MISSING_SETTINGS); skipped",
                    ts_ns=ts, frame=frame, direction=side.direction.label,
                )
            elif ftype == SETTINGS and not side.first_control_frame:
                known = False
            if ftype == SETTINGS:
                side.first_control_frame = False
        if not known:
            name = frame_type_name(ftype)
            if name == "reserved":
                self.reserved_frames += 1
            elif name == "unknown":
                self.unknown_frames += 1
            elif not missing_settings:
                what = "a second SETTINGS" if ftype == SETTINGS else f"{name} (0x{ftype:x})"
                self.diag.add(
                    "http3.frame_unexpected",
                    f"connection {self.connection} stream {side.stream_id} ({side.kind}) "
                    f"{side.direction.label}: {what} frame is not allowed on this stream "
                    "(H3_FRAME_UNEXPECTED); skipped",
                    ts_ns=ts, frame=frame, direction=side.direction.label,
                )
            side.mode = _M_SKIP
        elif ftype == DATA:
            side.mode = _M_DATA
            if req is not None and side.direction == _S2C and req.first_data_ts is None:
                req.first_data_ts = ts
        elif ftype in _BUFFERED:
            if flen > MAX_HTTP3_FRAME_BYTES:
                self.diag.add(
                    "http3.frame_too_long",
                    f"connection {self.connection} stream {side.stream_id} "
                    f"{side.direction.label}: {frame_type_name(ftype)} frame of {flen} bytes "
                    f"(over {MAX_HTTP3_FRAME_BYTES}); skipped",
                    ts_ns=ts, frame=frame, direction=side.direction.label,
                )
                side.mode = _M_SKIP
                if ftype == HEADERS and req is not None:
                    self._count_block(req, side.direction, flen)
            else:
                side.mode = _M_PAYLOAD
        else:  # pragma: no cover - every allowed type is DATA or buffered
            side.mode = _M_SKIP
        if flen == 0:  # nothing to wait for: the frame is complete now
            if side.mode == _M_PAYLOAD:
                side.mode = _M_FRAME
                self._payload(side, b"", ts, frame)
            else:
                self._end_frame(side, ts, frame)

    def _row(self, side: _Side, ts: int, frame: int, **kw: Any) -> Http3Frame | None:
        if len(self.frames) >= self.max_frame_rows:
            if not self.frame_rows_dropped:
                self.diag.add(
                    "http3.frame_rows_capped",
                    f"connection {self.connection}: more than {self.max_frame_rows} HTTP/3 "
                    "frames; later ones are parsed but not listed in http3_frames",
                    ts_ns=ts, frame=frame,
                )
            self.frame_rows_dropped += 1
            return None
        row = Http3Frame(ts_ns=ts, frame=frame, direction=side.direction,
                         quic_connection=self.connection, stream_id=side.stream_id,
                         stream_kind=side.kind, type=side.ftype, length=side.flen, **kw)
        self.frames.append(row)
        return row

    def _end_frame(self, side: _Side, ts: int, frame: int) -> None:
        """A DATA or skipped frame ended."""
        side.mode = _M_FRAME
        qpack = "too_long" if side.ftype in (HEADERS, PUSH_PROMISE) else None
        self._row(side, ts, frame, qpack=qpack)

    def _payload(self, side: _Side, payload: bytes, ts: int, frame: int) -> None:
        """A complete buffered frame."""
        t = side.ftype
        d = side.direction
        if t == SETTINGS:
            settings = parse_settings(payload)
            self.settings[d] = settings
            self._row(side, ts, frame, settings=settings)
            self._settings_known(d.reverse(), dict(settings), ts, frame)
        elif t == GOAWAY:
            gid = parse_single_varint(payload, "GOAWAY")
            self.goaway[d] = gid
            self._row(side, ts, frame, goaway_id=gid)
        elif t in (CANCEL_PUSH, MAX_PUSH_ID):
            pid = parse_single_varint(payload, frame_type_name(t))
            self._row(side, ts, frame, push_id=pid)
            if t == CANCEL_PUSH:
                push = self._push(pid)
                if push is not None and push.cancelled_by is None:
                    push.cancelled_by = d
        elif t == PUSH_PROMISE:
            got = read_varint(payload, 0)
            if got is None:
                raise Http3FrameError("PUSH_PROMISE: no push id")
            row = self._row(side, ts, frame, push_id=got[0])
            push = self._push(got[0])
            if push is not None:
                push.promises += 1
                if push.promise_frame is None:
                    push.promise_stream_id = side.stream_id
                    push.promise_frame, push.promise_ts = frame, ts
            # a pushed request's field section: decoded in order with the stream's others
            self._submit(_Block(side.stream_id, payload[got[1]:], ts, frame, row,
                                promise=True, push_id=got[0]), d)
        elif t == HEADERS:
            row = self._row(side, ts, frame)
            req = self._requests.get(side.stream_id) if side.kind == "request" else None
            if req is not None:
                self._count_block(req, d, len(payload))
            self._submit(_Block(side.stream_id, payload, ts, frame, row), d)

    def _count_block(self, req: _Request, d: Direction, nbytes: int) -> None:
        if d == _C2S:
            req.client_header_bytes += nbytes
            req.client_blocks += 1
        else:
            req.server_header_bytes += nbytes
            req.server_blocks += 1

    # ------------------------------------------------------------------ QPACK

    def _settings_known(self, d: Direction, settings: dict[int, int], ts: int,
                        frame: int) -> None:
        """The receiver of ``d``'s field sections announced its SETTINGS."""
        q = self._qpack[d]
        if q.decoder is not None or q.capacity is not None:
            return
        q.capacity = settings.get(0x01, 0)
        q.blocked_streams = settings.get(0x07, 0)
        try:
            q.decoder = Decoder(q.capacity, q.blocked_streams)
        except (ValueError, OverflowError) as exc:
            q.broken = True
            self.diag.add(
                "http3.qpack_decode_failed",
                f"connection {self.connection} {d.label}: QPACK decoder not created for "
                f"table capacity {q.capacity}: {exc}",
                ts_ns=ts, frame=frame, direction=d.label,
            )
            return
        if q.pending_encoder:
            held = bytes(q.pending_encoder)
            q.pending_encoder.clear()
            self._feed_encoder(q, held, ts, frame)
        for sid in list(q.queues):
            self._drain(q, sid, ts, frame, resumed=False)

    def _encoder(self, side: _Side, data: bytes, ts: int, frame: int) -> None:
        q = self._qpack[side.direction]
        q.encoder_bytes += len(data)
        if q.broken or q.lost:
            side.skipped += len(data)
            return
        if q.decoder is None:
            if len(q.pending_encoder) + len(data) > MAX_QPACK_PENDING_BYTES:
                self._pending_overflow(q, "encoder-stream bytes before the peer's SETTINGS",
                                       ts, frame)
                q.lost = True
                q.pending_encoder.clear()
                return
            q.pending_encoder += data
            return
        self._feed_encoder(q, data, ts, frame)

    def _feed_encoder(self, q: QpackState, data: bytes, ts: int, frame: int) -> None:
        try:
            unblocked = q.decoder.feed_encoder(data)
        except EncoderStreamError as exc:
            q.broken = True
            self.diag.add(
                "http3.qpack_decode_failed",
                f"connection {self.connection} {q.direction.label}: the QPACK encoder stream "
                f"does not parse ({exc}); field sections that use the dynamic table from "
                "here on are not decoded",
                ts_ns=ts, frame=frame, direction=q.direction.label,
            )
            return
        for sid in unblocked:
            self._drain(q, sid, ts, frame, resumed=True)

    def _submit(self, b: _Block, d: Direction) -> None:
        q = self._qpack[d]
        queue = q.queues.get(b.stream_id)
        if queue is None:
            queue = q.queues[b.stream_id] = deque()
        queue.append(b)
        if b.row is not None:
            b.row.qpack = "blocked"
        if len(queue) == 1:
            self._drain(q, b.stream_id, b.ts, b.frame, resumed=False)

    def _drain(self, q: QpackState, sid: int, ts: int, frame: int, *, resumed: bool) -> None:
        """Decode the field sections queued on ``sid``, in order, as far as possible."""
        queue = q.queues.get(sid)
        while queue:
            b = queue[0]
            raw: list[tuple[bytes, bytes]] | None = None
            failed: str | None = None
            try:
                if b.fed:
                    if not resumed:
                        return
                    resumed = False
                    _, raw = q.decoder.resume_header(sid)
                elif q.decoder is None or q.broken:
                    if b.data[:2] == _STATIC_ONLY or (q.broken and b.data[:1] == b"\x00"):
                        _, raw = Decoder(0, 0).feed_header(sid, b.data)
                    elif q.broken:
                        failed = "the encoder stream it depends on did not parse"
                    else:
                        return  # waits for the receiver's SETTINGS
                else:
                    b.fed = True
                    _, raw = q.decoder.feed_header(sid, b.data)
            except StreamBlocked:
                return
            except DecompressionFailed as exc:
                failed = str(exc) or "DecompressionFailed"
            queue.popleft()
            if failed is not None:
                q.failed += 1
                self.diag.add(
                    "http3.qpack_decode_failed",
                    f"connection {self.connection} stream {sid} {q.direction.label}: a field "
                    f"section (frame {b.frame}) does not decode: {failed}",
                    ts_ns=ts, frame=frame, direction=q.direction.label,
                )
                if b.row is not None:
                    b.row.qpack = "failed"
                self._block_done(q.direction, b, None, frame)
            else:
                assert raw is not None
                headers = _headers(raw)
                q.decoded += 1
                if frame != b.frame:
                    q.blocked += 1
                if b.row is not None:
                    b.row.headers = headers
                    b.row.qpack = "decoded" if frame == b.frame else "blocked"
                    b.row.decoded_frame = frame
                self._block_done(q.direction, b, headers, frame)
        if queue is not None and not queue:
            del q.queues[sid]

    def _never_decoded(self, q: QpackState, b: _Block) -> None:
        why = (
            "encoder-stream bytes were not captured" if q.lost
            else "the receiver's SETTINGS were not captured" if q.decoder is None
            else "the encoder-stream bytes it waits for never arrived in the capture"
        )
        self.diag.add(
            "http3.qpack_blocked",
            f"connection {self.connection} stream {b.stream_id} {q.direction.label}: the "
            f"field section of frame {b.frame} refers to dynamic-table entries that were "
            f"never inserted in what was captured ({why}); it is not decoded",
            ts_ns=b.ts, frame=b.frame, direction=q.direction.label,
        )
        q.never += 1
        if b.row is not None:
            b.row.qpack = "never_decoded"
        self._block_done(q.direction, b, None, self._last_frame, final=True)

    def _pending_overflow(self, q: QpackState, what: str, ts: int, frame: int) -> None:
        self.diag.add(
            "http3.qpack_pending_overflow",
            f"connection {self.connection} {q.direction.label}: more than "
            f"{MAX_QPACK_PENDING_BYTES} {what} held; they are dropped",
            ts_ns=ts, frame=frame, direction=q.direction.label,
        )

    # ------------------------------------------------------------------ server push

    def _push(self, push_id: int) -> Http3Push | None:
        """The push of ``push_id``, made on first sight (None past the bound)."""
        push = self.pushes.get(push_id)
        if push is None and len(self.pushes) < MAX_HTTP3_OPEN_STREAMS:
            push = self.pushes[push_id] = Http3Push(push_id)
        return push

    def _push_stream(self, side: _Side, push_id: int, ts: int, frame: int) -> None:
        """A push stream's first bytes named its push id."""
        push = self._push(push_id)
        if push is None:
            return
        if push.stream_id is not None:  # a second stream for one push id: H3_ID_ERROR
            self.diag.add(
                "http3.unexpected_stream",
                f"connection {self.connection}: push stream {side.stream_id} repeats push id "
                f"{push_id} of stream {push.stream_id} (H3_ID_ERROR); its bytes are counted",
                ts_ns=ts, frame=frame, direction=side.direction.label,
            )
            side.mode = _M_COUNT
            return
        push.stream_id, push.stream_frame, push.stream_ts = side.stream_id, frame, ts
        self._push_streams[side.stream_id] = push_id

    def _push_block(self, b: _Block, headers: Headers | None) -> None:
        """A PUSH_PROMISE's field section (the promised request) or a push stream's
        (its response) is decoded, or never will be (``headers`` None)."""
        if b.promise:
            push = self.pushes.get(b.push_id) if b.push_id is not None else None
            if push is not None and push.promise_frame == b.frame and not push.request_decoded:
                push.request_decoded = headers is not None
                push.request_headers = headers
            return
        push = self.pushes.get(self._push_streams[b.stream_id])
        if push is None or push.response_headers is not None:
            return
        status_text = _value(headers, ":status")
        status = int(status_text) if status_text is not None and status_text.isdigit() else None
        if status is not None and 100 <= status < 200:
            push.informational += 1
            return
        push.response_headers, push.status, push.response_frame = headers, status, b.frame

    def push_end(self, push: Http3Push) -> tuple[str, int | None, int | None]:
        """(end_reason, end frame, RESET_STREAM error code) of a push's stream: end_stream
        (FIN), reset, open (neither by the end of the capture), or not_seen (no push stream
        in the capture)."""
        if push.stream_id is None:
            return "not_seen", None, None
        side = self._sides.get((push.stream_id, _S2C))
        if side is None or not side.ended:
            return "open", None, None
        if side.reset is not None:
            return "reset", side.end_frame, side.reset
        return "end_stream", side.end_frame, None

    # ------------------------------------------------------------------ requests

    def _block_done(self, d: Direction, b: _Block, headers: Headers | None, frame: int,
                    *, final: bool = False) -> None:
        """A field section of a request stream is decoded (``headers``) or never will be."""
        if b.promise or b.stream_id in self._push_streams:
            self._push_block(b, headers)
            return
        req = self._requests.get(b.stream_id)
        if req is None:
            return
        if d == _C2S:
            req.client_blocks_done += 1
            if req.request_frame is None:
                req.request_frame, req.request_ts = b.frame, b.ts
                req.request_headers = headers
        else:
            req.server_blocks_done += 1
            if not req.response_final:
                self._response_block(req, b, headers, frame, final=final)
        if req.awaiting and not self._blocked(req):
            self._report(req, self._last_ts, frame, final=False)

    @staticmethod
    def _blocked(req: _Request) -> bool:
        return (req.client_blocks_done < req.client_blocks
                or req.server_blocks_done < req.server_blocks)

    def _response_block(self, req: _Request, b: _Block, headers: Headers | None, frame: int,
                        *, final: bool) -> None:
        status_text = _value(headers, ":status")
        status: int | None = None
        if status_text is not None and status_text.isdigit():
            status = int(status_text)
        if req.response_frame is None:
            req.response_frame, req.response_ts = b.frame, b.ts
        if status is not None and 100 <= status < 200:
            req.informational += 1
            req.response_frame = req.response_ts = None
            return
        req.response_final = True
        req.status = status
        req.response_headers = headers
        if headers is not None:
            req.body = open_body(
                headers, tcp_stream=None, stream_id=b.stream_id, diag=self.diag,
                sse_max_line_bytes=self.sse_max_line_bytes,
                max_decoded_bytes=self.max_decoded_body_bytes,
            )
        pending, req.pending = req.pending, []
        req.pending_bytes = 0
        for item, ts, fr in pending:
            if isinstance(item, int):
                self._body_gap(req, item, ts, fr)
            else:
                self._body_feed(req, item, ts, fr)
        if req.body_done and not final:
            s = self._sides.get((req.stream_id, _S2C))
            complete = s is not None and s.reset is None and not s.desynced
            end_ts = s.end_ts if s is not None and s.end_ts is not None else self._last_ts
            self._close_body(req, end_ts, frame, complete=complete)

    def _data(self, side: _Side, data: bytes, ts: int, frame: int) -> None:
        if side.kind == "push":
            pid = self._push_streams.get(side.stream_id)
            if pid is not None:
                self.pushes[pid].data_bytes += len(data)
            return
        req = self._requests.get(side.stream_id) if side.kind == "request" else None
        if req is None:
            return
        if side.direction == _C2S:
            req.client_data += len(data)
            return
        req.server_data += len(data)
        if req.response_final:
            self._body_feed(req, data, ts, frame)
        elif req.pending_bytes + len(data) <= MAX_QPACK_PENDING_BYTES:
            req.pending.append((data, ts, frame))
            req.pending_bytes += len(data)
        else:
            if req.pending_bytes <= MAX_QPACK_PENDING_BYTES:
                self._pending_overflow(self._qpack[_S2C],
                                       f"response body bytes on stream {req.stream_id} "
                                       "waiting for their field section", ts, frame)
                req.pending_bytes = MAX_QPACK_PENDING_BYTES + 1
            req.pending.append((len(data), ts, frame))

    def _data_lost(self, side: _Side, nbytes: int, ts: int, frame: int) -> None:
        req = self._requests.get(side.stream_id) if side.kind == "request" else None
        if req is None:
            return
        if side.direction == _C2S:
            req.client_data += nbytes
            return
        req.server_data += nbytes
        self.diag.add(
            "http3.stream_gap",
            f"connection {self.connection} stream {side.stream_id} {side.direction.label}: "
            f"{nbytes} bytes of a DATA frame not captured; counted, and the frames after it "
            "are still read",
            ts_ns=ts, frame=frame, direction=side.direction.label,
        )
        self._body_gap(req, nbytes, ts, frame)

    def _body_feed(self, req: _Request, data: bytes, ts: int, frame: int) -> None:
        body = req.body
        if body is None:
            return
        self._events(req, body.feed(data, ts, frame))

    def _body_gap(self, req: _Request, nbytes: int, ts: int, frame: int) -> None:
        if not req.response_final:
            req.pending.append((nbytes, ts, frame))
            return
        if req.body is not None:
            req.body.gap(nbytes, ts, frame)

    def _events(self, req: _Request, events: list[Any]) -> None:
        for e in events:
            if isinstance(e, SseEvent):
                if len(self.sse) < MAX_HTTP3_SSE_ROWS:
                    self.sse.append(e)
                    continue
                if not self.sse_rows_dropped:
                    self.diag.add(
                        "http3.sse_rows_capped",
                        f"connection {self.connection}: more than {MAX_HTTP3_SSE_ROWS} "
                        "server-sent events; later ones are counted in http3_streams.sse_events "
                        "but not listed in http3_sse_events",
                        ts_ns=e.ts_ns, frame=e.frame,
                    )
                self.sse_rows_dropped += 1

    def _close_body(self, req: _Request, ts: int, frame: int, *, complete: bool,
                    at_eof: bool = False) -> None:
        body = req.body
        if body is None:
            return
        self._events(req, body.close(ts, frame, at_eof=at_eof, complete=complete))
        req.sse_events = body.sse_count

    def _side_ended(self, req: _Request, ts: int, frame: int) -> None:
        c = self._sides.get((req.stream_id, _C2S))
        s = self._sides.get((req.stream_id, _S2C))
        if s is not None and s.ended and not req.body_done:
            req.body_done = True
            if req.response_final:
                self._close_body(req, ts, frame, complete=s.reset is None and not s.desynced)
        if s is not None and s.ended and (c is None or c.ended):
            if self._blocked(req):
                req.awaiting = True  # reported when its field sections are decoded
            else:
                self._report(req, ts, frame, final=False)

    def _report(self, req: _Request, ts: int, frame: int, *, final: bool) -> None:
        """Summarise a request stream (its sides have ended, or the connection has)."""
        if req.reported:
            return
        c = self._sides.get((req.stream_id, _C2S))
        s = self._sides.get((req.stream_id, _S2C))
        if final and not req.body_done:
            req.body_done = True
            if req.response_final:
                self._close_body(req, ts, frame, complete=False, at_eof=True)
        req.reported = True
        self._requests.pop(req.stream_id, None)
        self._closed.add(req.stream_id)
        reset: _Side | None = None
        for side in (c, s):
            if side is not None and side.reset is not None and (
                reset is None or (side.end_ts or 0) < (reset.end_ts or 0)
            ):
                reset = side
        if reset is not None:
            reason = "reset"
            end_ts, end_frame = reset.end_ts or ts, reset.end_frame or frame
        elif s is not None and s.ended and (c is None or c.ended):
            reason = "end_stream"
            end_ts, end_frame = s.end_ts or ts, s.end_frame or frame
        else:
            reason = "open_at_end"
            end_ts, end_frame = req.last_ts, req.last_frame
        body = req.body
        if body is None or body.decoder is None:
            enc = body.encoding if body is not None else _value(
                req.response_headers, "content-encoding")
            decoded: int | None = req.server_data
            decoding = "identity" if req.server_data else None
        else:
            enc, decoded, decoding = body.encoding, body.decoded_bytes, body.status
        rq = req.request_headers
        self.streams.append(Http3StreamEnded(
            ts_ns=end_ts, frame=end_frame, direction=None, quic_connection=self.connection,
            stream_id=req.stream_id, partial=req.partial,
            request_headers=rq, response_headers=req.response_headers,
            method=_value(rq, ":method"), scheme=_value(rq, ":scheme"),
            authority=_value(rq, ":authority") or _value(rq, "host"),
            path=_value(rq, ":path"), status=req.status,
            content_type=_value(req.response_headers, "content-type"),
            informational=req.informational,
            first_frame=req.first_frame, first_ts_ns=req.first_ts,
            request_frame=req.request_frame, request_ts_ns=req.request_ts,
            request_end_ts_ns=req.request_end_ts,
            response_headers_frame=req.response_frame, response_headers_ts_ns=req.response_ts,
            first_data_ts_ns=req.first_data_ts, end_frame=end_frame, end_ts_ns=end_ts,
            client_data_bytes=req.client_data, server_data_bytes=req.server_data,
            client_header_bytes=req.client_header_bytes,
            server_header_bytes=req.server_header_bytes,
            client_frames=req.client_frames, server_frames=req.server_frames,
            end_reason=reason, reset_error_code=reset.reset if reset is not None else None,
            reset_by=reset.direction if reset is not None else None,
            desynced=any(x is not None and x.desynced for x in (c, s)),
            sse_events=body.sse_count if body is not None else 0,
            content_encoding=enc, decoded_body_bytes=decoded, content_decoding=decoding,
        ))
        # forget the stream's parsing state: memory grows with the open streams only
        self._sides.pop((req.stream_id, _C2S), None)
        self._sides.pop((req.stream_id, _S2C), None)
