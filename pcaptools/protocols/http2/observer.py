"""HTTP/2 (RFC 9113) observer: frames, HPACK header blocks, streams and connection facts.

One :class:`Http2Observer` per connection watches both directions of cleartext (h2c) or
decrypted (TLS with ALPN ``h2``) bytes and returns events:

- :class:`Http2Frame` for every complete frame (all ten RFC 9113 types, and unknown types),
  stamped with the packet that delivered its last byte (as tshark attributes it);
- :class:`Http2StreamEnded` once per stream (request and response summary, timings, bytes,
  why it ended), when it ends or when the connection ends;
- :class:`Http2ConnectionEnded` once, when both directions are closed (or at end of capture):
  SETTINGS of each side, PING round trips, GOAWAY, flow-control stalls, peak concurrency;
- :class:`~pcaptools.protocols.sse.SseEvent` for responses of type ``text/event-stream``;
- :class:`~pcaptools.protocols.body.HttpBody` for a request or response body of type
  ``application/dns-message`` (after content decoding), at its END_STREAM.

It is a watcher, not a participant: it never raises on wire data and never rejects what a
real endpoint would reject; it records the problem (``http2.*`` codes in the Diagnostics
sink) and carries on. How each direction starts:

- a client stream seen from offset 0 must start with the connection preface
  (``http2.bad_preface`` otherwise, then frame alignment is searched for);
- a server stream seen from offset 0 starts with a frame;
- a direction first seen at an offset > 0, any direction when ``midstream=True`` (the
  pipeline says the capture started inside the connection: no SYN seen, so offset 0 is not
  the real start), a server whose first bytes are not a plausible frame header, and a
  direction after bytes were lost outside a DATA payload, all search for frame alignment:
  a plausible frame header (length, flags, stream id checked for its type) followed by
  another, or by the end of the bytes received so far. The search gives up after
  ``hunt_budget`` bytes (``http2.desynced``; bytes still counted).
- an h2c upgrade (:class:`H2cUpgrade`, handed over by the HTTP/1.1 observer) starts the
  client at the preface and the server at a frame, with the upgraded request as stream 1.

HPACK: one ``hpack.Decoder`` per direction. A block that cannot be decoded (a capture that
started mid-connection refers to dynamic-table entries it never saw) gives
``http2.hpack_decode_failed``; the decoder then restarts with an empty dynamic table, which
decodes later blocks correctly as soon as they only refer to entries inserted after the
restart (newest entries have the lowest indices, so a partial table is an exact prefix).

DATA frame payloads are streamed, never buffered; other frames are buffered up to 1 MiB
(longer ones are skipped and still recorded). Memory is per connection and per open stream.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpack import Decoder

from ...diagnostics import Diagnostics
from ...tcp.stream import Direction, StreamChunk, StreamCursor
from ..body import Body, open_body
from ..content_coding import DEFAULT_MAX_DECODED_BYTES
from ..sse import DEFAULT_MAX_LINE_BYTES
from .events import (
    _FRAME_SET,
    H2cUpgrade,
    Headers,
    Http2ConnectionEnded,
    Http2Frame,
    Http2StreamEnded,
    _new_frame,
    _set_data_bytes,
    _set_pad_length,
)
from .frames import (
    _DEFAULT_MAX_FRAME,
    _DEFAULT_WINDOW,
    _HDR,
    _U32,
    CONTINUATION,
    DATA,
    F_ACK,
    F_END_HEADERS,
    F_END_STREAM,
    F_PADDED,
    F_PRIORITY,
    FRAME_TYPES,
    GOAWAY,
    HEADERS,
    PING,
    PREFACE,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    parse_settings_payload,
    plausible_frame_header,
)

__all__ = ["Http2Observer"]

#: frames other than DATA longer than this are skipped (recorded, not buffered)
_MAX_BUFFERED_FRAME = 1 << 20
#: dynamic table sizes the observer accepts (endpoints may advertise larger than 4096)
_HPACK_MAX_TABLE = 1 << 20
_HPACK_MAX_HEADER_LIST = 1 << 24
_RECENTLY_CLOSED = 4096
_MAX_PENDING_PINGS = 64
#: bounds that keep memory per connection whatever the traffic: a header block (HEADERS +
#: CONTINUATION) longer than this is dropped; beyond this many open streams the oldest is
#: summarised early (end_reason ``evicted``)
_MAX_HEADER_BLOCK = 1 << 20
_MAX_OPEN_STREAMS = 100_000

# per-direction parser modes
_M_PREFACE, _M_HEADER, _M_DATA, _M_SKIP, _M_HUNT, _M_DEAD = range(6)


class _Stream:
    __slots__ = (
        "authority",
        "body",
        "client_data",
        "client_ended",
        "client_frames",
        "client_hdr",
        "content_type",
        "end_frame",
        "end_ts",
        "first_data_ts",
        "first_frame",
        "first_ts",
        "id",
        "idle",
        "informational",
        "method",
        "parent",
        "partial",
        "path",
        "pushed",
        "req_body",
        "req_end_ts",
        "req_frame",
        "req_headers",
        "req_ts",
        "resp_frame",
        "resp_headers",
        "resp_ts",
        "scheme",
        "server_data",
        "server_ended",
        "server_frames",
        "server_hdr",
        "stalled",
        "status",
        "window",
    )

    def __init__(self, sid: int, frame: int, ts: int, window: tuple[int, int]) -> None:
        self.id = sid
        self.first_frame = frame
        self.first_ts = ts
        self.pushed = False
        self.parent: int | None = None
        self.partial = False
        self.idle = True
        self.req_headers: Headers | None = None
        self.resp_headers: Headers | None = None
        self.method: str | None = None
        self.scheme: str | None = None
        self.authority: str | None = None
        self.path: str | None = None
        self.status: int | None = None
        self.content_type: str | None = None
        self.informational = 0
        self.req_frame: int | None = None
        self.req_ts: int | None = None
        self.req_end_ts: int | None = None
        self.resp_frame: int | None = None
        self.resp_ts: int | None = None
        self.first_data_ts: int | None = None
        self.end_frame = frame
        self.end_ts = ts
        self.client_data = 0
        self.server_data = 0
        self.client_hdr = 0
        self.server_hdr = 0
        self.client_frames = 0
        self.server_frames = 0
        self.client_ended = False
        self.server_ended = False
        self.body: Body | None = None
        """content decoding and the parser (SSE, DoH) of the response body; None: only
        counted"""
        self.req_body: Body | None = None
        """the same for the request body, opened only when a parser wants it (DoH POST)"""
        self.window = [window[0], window[1]]
        self.stalled = [False, False]


class _Dir(StreamCursor):
    """State of one direction, and its cursor (:attr:`next_offset`: the next stream offset
    expected; set by the first chunk or gap, see :attr:`started`)."""

    __slots__ = (
        "buf",
        "bytes",
        "closed",
        "cur_data_left",
        "cur_flags",
        "cur_len",
        "cur_pad",
        "cur_pad_pending",
        "cur_remaining",
        "cur_sid",
        "cur_type",
        "d",
        "decoder",
        "first_check",
        "frames",
        "hb",
        "hb_bytes",
        "hb_dropped",
        "hb_end_stream",
        "hb_promised",
        "hb_sid",
        "hb_type",
        "hpack_reset",
        "hunt_scanned",
        "max_frame_size",
        "mode",
        "settings",
        "skipped",
        "stall_since",
        "stalled_ns",
        "stalls",
        "started",
        "window",
    )

    def __init__(self, d: Direction) -> None:
        self.d = d
        self.mode = _M_HEADER
        self.started = False
        self.first_check = False
        self.closed = False
        self.next_offset = 0
        self.buf = bytearray()
        self.decoder = _new_decoder()
        self.hpack_reset = False
        self.hb: bytearray | None = None
        self.hb_sid = 0
        self.hb_type = 0
        self.hb_end_stream = False
        self.hb_promised: int | None = None
        self.hb_bytes = 0
        self.hb_dropped = 0
        """stream whose over-long header block is being skipped (0: none)"""
        self.cur_type = 0
        self.cur_flags = 0
        self.cur_sid = 0
        self.cur_len = 0
        self.cur_remaining = 0
        self.cur_pad_pending = False
        self.cur_pad: int | None = None
        self.cur_data_left = 0
        self.max_frame_size = _DEFAULT_MAX_FRAME
        """SETTINGS_MAX_FRAME_SIZE of the receiver of this direction"""
        self.settings: dict[int, int] = {}
        """settings this direction's sender advertised (latest values)"""
        self.frames = 0
        self.bytes = 0
        self.skipped = 0
        self.hunt_scanned = 0
        self.window = _DEFAULT_WINDOW
        """connection-level send window for DATA sent in this direction"""
        self.stalls = 0
        self.stall_since: int | None = None
        self.stalled_ns = 0


#: what the frame dispatch table maps a frame type to (see
#: :meth:`Http2Observer._frame_dispatch_table`): a method of the observer, called with it, the
#: direction's state, the frame's type, flags, stream id, length and payload, the capture time
#: and frame number of the packet that completed it, and the list the events go to
_FrameHandler = Callable[
    ["Http2Observer", _Dir, int, int, int, int, bytes, int, int, list[object]], None]


def _new_decoder() -> Decoder:
    dec = Decoder(max_header_list_size=_HPACK_MAX_HEADER_LIST)
    dec.max_allowed_table_size = _HPACK_MAX_TABLE
    return dec


def _header_value(headers: Headers, name: str) -> str | None:
    for k, v in headers:
        if k == name:
            return v
    return None


# --------------------------------------------------------------------------- observer


class Http2Observer:
    """Watches both directions of one HTTP/2 connection. Never raises on wire data.

    ``tcp_stream`` and ``diag`` label the events and anomalies; ``upgrade`` starts an h2c
    connection handed over by the HTTP/1.1 observer; ``midstream`` says the capture began
    inside the connection (search for frame alignment instead of expecting the preface);
    ``sse_max_line_bytes`` bounds the SSE parsers; ``max_decoded_body_bytes`` the decoded
    bytes of one content-encoded response body; ``hunt_budget`` bounds the alignment search.

    It implements :class:`~pcaptools.tcp.stream.StreamObserver` in full (``wants_bytes``,
    ``feed``, ``gap``, ``close``, ``finish``), so the TCP layer, TLS (ALPN ``h2``) and the
    HTTP/1.1 observer (``Upgrade: h2c``) drive it the same way. Call
    ``close`` for each direction when it ends (FIN/RST); at the end of the capture call
    ``close(..., at_eof=True)`` (streams still open get ``open_at_eof``). Once both
    directions are closed, or at end of capture, open streams are summarised and one
    :class:`Http2ConnectionEnded` is emitted; later calls return nothing.
    """

    def __init__(
        self,
        *,
        tcp_stream: int = -1,
        diag: Diagnostics | None = None,
        upgrade: H2cUpgrade | None = None,
        midstream: bool = False,
        sse_max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_decoded_body_bytes: int = DEFAULT_MAX_DECODED_BYTES,
        hunt_budget: int = 1 << 20,
    ) -> None:
        self.tcp_stream = tcp_stream
        self._midstream = midstream
        self.diag = diag if diag is not None else Diagnostics()
        self._sse_max = sse_max_line_bytes
        self._max_decoded = max_decoded_body_bytes
        self._hunt_budget = hunt_budget
        self._dirs = (_Dir(Direction.CLIENT_TO_SERVER), _Dir(Direction.SERVER_TO_CLIENT))
        self._streams: dict[int, _Stream] = {}
        self._spill: list[object] = []
        """events produced where no output list is at hand (evictions), flushed by feed()"""
        self._recently_closed: dict[int, None] = {}
        self._max_sid = [0, 0]  # highest stream id opened by [client (odd), server (even)]
        self._start: str | None = None
        self._flow_known = False
        self._preface_frame: int | None = None
        self._finished = False
        self._open_streams = 0
        self._peak_open = 0
        self._nstreams = 0
        self._pings: dict[tuple[int, bytes], int] = {}
        self._ping_count = 0
        self._ping_min: int | None = None
        self._ping_max: int | None = None
        self._ping_sum = 0
        self._goaway: tuple[int, int, Direction, int, int] | None = None
        """(frame, ts, by, last_stream_id, error_code) of the first GOAWAY"""
        self._hpack_errors = 0
        self._desynced = False
        self._last_ts = 0
        self._last_frame = 0
        self._init_window = [_DEFAULT_WINDOW, _DEFAULT_WINDOW]
        """initial stream window for data sent by [client, server] (the peer's setting)"""
        if upgrade is not None:
            self._start = "upgrade"
            self._flow_known = True
            c, s = self._dirs
            c.started = s.started = True
            c.mode = _M_PREFACE
            s.mode = _M_HEADER
            c.next_offset = s.next_offset = -1  # accept whatever offset comes first
            for ident, value in upgrade.settings:
                self._apply_setting(c, ident, value)
            st = self._new_stream(1, upgrade.request_frame, upgrade.request_ts_ns)
            st.idle = False
            self._opened(st)
            st.req_headers = upgrade.headers
            st.method = upgrade.method
            st.scheme = "http"
            st.path = upgrade.path
            st.authority = upgrade.authority
            st.req_frame = upgrade.request_end_frame
            st.req_ts = upgrade.request_ts_ns
            st.req_end_ts = upgrade.request_end_ts_ns
            st.client_ended = True
            st.client_data = upgrade.body_bytes
            self._max_sid[0] = 1

    # ------------------------------------------------------------------ Observer API

    def feed(self, chunk: StreamChunk) -> list[object]:
        """Parse the next in-order bytes of one direction; return the events they completed."""
        if self._finished:
            return []
        st = self._dirs[chunk.direction]
        out: list[object] = []
        data = chunk.data
        ts, frame = chunk.ts_ns, chunk.frame
        self._last_ts, self._last_frame = ts, frame
        if not st.started:
            self._begin(st, chunk.offset)
        if chunk.offset != st.next_offset:  # (bytes missing or repeated; the first after h2c)
            hole, data = st.align(chunk.offset, data)
            if hole:
                out += self.gap(chunk.direction, st.next_offset, hole, ts, frame)
        st.next_offset += len(data)
        st.bytes += len(data)
        if not data:
            return out
        if st.mode == _M_DEAD:
            st.skipped += len(data)
            return out
        buf = st.buf
        if buf:
            buf += data
            pos = self._parse(st, buf, ts, frame, out)
            if pos:
                del buf[:pos]
        else:  # nothing held: parse the chunk itself, keep only what is left of it
            if type(data) is not bytes:
                data = bytes(data)
            pos = self._parse(st, data, ts, frame, out)
            if pos < len(data):
                buf += memoryview(data)[pos:]
        if self._spill:
            out += self._spill
            self._spill.clear()
        return out

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        """``nbytes`` of ``direction`` were never captured. Stays aligned when the hole lies inside
        a DATA frame (or a skipped frame); otherwise searches for frame alignment again. Bytes
        of the hole before the cursor were seen, and only the rest is lost
        (:meth:`~pcaptools.tcp.stream.StreamCursor.skip`)."""
        if self._finished or nbytes <= 0:
            return []
        st = self._dirs[direction]
        out: list[object] = []
        if not st.started:
            self._begin(st, offset)
        nbytes = st.skip(offset, nbytes)  # (the bytes before the cursor were seen)
        if not nbytes:
            return out
        st.skipped += nbytes
        if st.mode in (_M_DATA, _M_SKIP) and not st.buf and nbytes <= st.cur_remaining:
            if st.mode == _M_DATA:
                self._data_gap(st, nbytes, ts_ns, frame)
            st.cur_remaining -= nbytes
            if st.cur_remaining == 0:
                self._end_body(st, ts_ns, frame, out)
            return out
        if st.mode == _M_DEAD:
            return out
        # alignment lost: partial frames and header blocks are gone, and so is HPACK state
        if st.mode == _M_DATA:
            s = self._streams.get(st.cur_sid)
            if s is not None and s.body is not None:
                s.body.gap(0, ts_ns, frame)
        # whole frames may be gone, of any open stream: a compressed body cannot resume after
        # a hole and a collected body (DoH) is spoilt, so every such body still open in this
        # direction is told (identity bodies, whose parsers resume at the next line, are left
        # as they were)
        c2s = direction == Direction.CLIENT_TO_SERVER
        for s in self._streams.values():
            b, ended = (s.req_body, s.client_ended) if c2s else (s.body, s.server_ended)
            if b is not None and b.needs_every_byte and not ended:
                b.gap(0, ts_ns, frame)
        st.buf.clear()
        st.hb = None
        st.hpack_reset = True
        st.mode = _M_HUNT
        st.hunt_scanned = 0
        return out

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        """``direction`` ended. With both directions closed, or ``at_eof``, the connection is
        finalised: open streams are summarised and :class:`Http2ConnectionEnded` is emitted."""
        if self._finished:
            return []
        out: list[object] = []
        st = self._dirs[direction]
        if not st.closed:
            st.closed = True
            self._truncated(st, ts_ns, frame, at_eof)
        if at_eof or all(x.closed for x in self._dirs):
            if at_eof:
                for other in self._dirs:
                    if not other.closed:
                        other.closed = True
                        self._truncated(other, ts_ns, frame, at_eof)
            self._finish(ts_ns, frame, at_eof, out)
        return out

    def finish(self, ts_ns: int | None = None, frame: int | None = None) -> list[object]:
        """End of capture: finalise what is still open (``open_at_eof``). Idempotent.
        Without ``ts_ns``/``frame`` the last packet fed is used."""
        if self._finished:
            return []
        return self.close(
            Direction.CLIENT_TO_SERVER,
            self._last_ts if ts_ns is None else ts_ns,
            self._last_frame if frame is None else frame,
            at_eof=True,
        )

    @property
    def wants_bytes(self) -> bool:
        """False once the connection is finalised (both directions closed, or the end of the
        capture): nothing more is parsed or counted. A desynchronised direction still counts
        its bytes, so until then this stays True."""
        return not self._finished

    @property
    def finished(self) -> bool:
        """True once the connection has been finalised (later calls return nothing)."""
        return self._finished

    @property
    def done(self) -> bool:
        """finished: every later call returns nothing (the stream contract's ``done``)"""
        return self._finished

    # ------------------------------------------------------------------ byte parsing

    def _begin(self, st: _Dir, offset: int) -> None:
        st.started = True
        st.next_offset = offset
        if offset > 0 or self._midstream:
            st.mode = _M_HUNT
            if self._start is None:
                self._start = "mid_stream"
        elif st.d == Direction.CLIENT_TO_SERVER:
            st.mode = _M_PREFACE
        else:
            st.mode = _M_HEADER
            st.first_check = True

    def _frame_event(
        self,
        direction: Direction,
        sid: int,
        typ: int,
        flags: int,
        length: int,
        ts: int,
        frame: int,
        **fields: Any,
    ) -> Http2Frame:
        """An :class:`Http2Frame` event of this connection; ``fields`` are the type's own fields."""
        if _new_frame is None or _FRAME_SET is None:  # pragma: no cover - Http2Frame changed
            return Http2Frame(
                ts_ns=ts, frame=frame, direction=direction, tcp_stream=self.tcp_stream,
                stream_id=sid, type=typ, flags=flags, length=length, **fields,
            )
        ev = _new_frame(ts, frame, direction, self.tcp_stream, sid, typ, flags, length)
        for name, value in fields.items():
            _FRAME_SET[name](ev, value)
        return ev

    def _report(self, st: _Dir, code: str, detail: str, ts: int, frame: int) -> None:
        self.diag.add(
            code, detail, ts_ns=ts, frame=frame, tcp_stream=self.tcp_stream, direction=st.d.label
        )

    def _parse(
        self, st: _Dir, buf: bytes | bytearray, ts: int, frame: int, out: list[object]
    ) -> int:
        """Parse ``buf`` (``st.buf``, or a chunk when nothing was held); returns how many of its
        bytes were consumed (the caller keeps the rest in ``st.buf``)."""
        n = len(buf)
        pos = 0
        while pos < n or (st.mode in (_M_DATA, _M_SKIP) and st.cur_remaining == 0):
            mode = st.mode
            if mode == _M_HEADER:
                if n - pos < 9:
                    break
                hi, lo, typ, flags, sid_raw = _HDR.unpack_from(buf, pos)
                length = (hi << 16) | lo
                if st.first_check:
                    # the first frame of a direction seen from its start: if it is not even
                    # plausible, the capture began inside the stream: search for alignment
                    st.first_check = False
                    if not plausible_frame_header(
                        length, typ, flags, sid_raw, max(st.max_frame_size, _DEFAULT_MAX_FRAME)
                    ):
                        st.mode = _M_HUNT
                        st.hunt_scanned = 0
                        if self._start is None:
                            self._start = "mid_stream"
                        continue
                sid = sid_raw & 0x7FFFFFFF
                if length > st.max_frame_size:
                    self._report(
                        st,
                        "http2.frame_too_large",
                        f"{FRAME_TYPES[typ] if typ < 10 else f'type {typ}'} frame on stream {sid}: "
                        f"{length} bytes > SETTINGS_MAX_FRAME_SIZE {st.max_frame_size}",
                        ts,
                        frame,
                    )
                if typ == DATA or length > _MAX_BUFFERED_FRAME:
                    st.cur_type, st.cur_flags, st.cur_sid, st.cur_len = typ, flags, sid, length
                    st.cur_remaining = length
                    pos += 9
                    if typ == DATA:
                        st.mode = _M_DATA
                        st.cur_pad_pending = bool(flags & F_PADDED)
                        st.cur_pad = None
                        st.cur_data_left = 0 if st.cur_pad_pending else length
                        self._data_start(st, ts, frame, out)
                    else:
                        st.mode = _M_SKIP
                    continue
                end = pos + 9 + length
                if end > n:
                    break
                payload = bytes(buf[pos + 9 : end])
                pos = end
                self._frame(st, typ, flags, sid, length, payload, ts, frame, out)
            elif mode in (_M_DATA, _M_SKIP):
                take = min(n - pos, st.cur_remaining)
                if take and mode == _M_DATA:
                    self._data_bytes(st, buf, pos, take, ts, frame, out)
                pos += take
                st.cur_remaining -= take
                if st.cur_remaining == 0:
                    self._end_body(st, ts, frame, out)
                else:
                    break
            elif mode == _M_PREFACE:
                have = n - pos
                if have < 24:
                    if PREFACE.startswith(bytes(buf[pos:n])):
                        break
                elif buf[pos : pos + 24] == PREFACE:
                    pos += 24
                    st.mode = _M_HEADER
                    if self._preface_frame is None:
                        self._preface_frame = frame
                        if self._start is None:
                            self._start = "preface"
                            self._flow_known = True
                    continue
                self._report(
                    st,
                    "http2.bad_preface",
                    f"first bytes {bytes(buf[pos : pos + 24])!r} are not the connection preface",
                    ts,
                    frame,
                )
                if self._start is None:
                    self._start = "mid_stream"
                st.mode = _M_HUNT
                st.hunt_scanned = 0
            elif mode == _M_HUNT:
                status, i = self._hunt(st, buf, pos, n)
                st.hunt_scanned += i - pos
                st.skipped += i - pos
                pos = i
                if status == 1:
                    break
                if status == 2:
                    self._desynced = True
                    st.mode = _M_DEAD
                    self._report(
                        st,
                        "http2.desynced",
                        f"no frame alignment found in {st.hunt_scanned} bytes; "
                        "the rest of this direction is only counted",
                        ts,
                        frame,
                    )
                    continue
                if st.hunt_scanned:
                    self._report(
                        st,
                        "http2.resynchronised",
                        f"frame alignment found after skipping {st.hunt_scanned} bytes",
                        ts,
                        frame,
                    )
                st.mode = _M_HEADER
                st.hpack_reset = True
            else:  # _M_DEAD
                st.skipped += n - pos
                pos = n
        return pos

    def _hunt(self, st: _Dir, buf: bytes | bytearray, pos: int, n: int) -> tuple[int, int]:
        """Search ``buf[pos:n]`` for a frame boundary: a plausible frame header followed by another,
        or by the end of the bytes received so far.

        Returns ``(0, i)``: aligned at ``i``; ``(1, i)``: need more bytes, those before ``i`` can
        be dropped; ``(2, n)``: the search budget is exhausted.
        """
        max_len = max(st.max_frame_size, _DEFAULT_MAX_FRAME)
        unpack = _HDR.unpack_from
        plausible = plausible_frame_header
        i = pos
        limit = n - 9
        while i <= limit:
            typ = buf[i + 3]
            if typ <= 9:
                hi, lo, _, flags, sid_raw = unpack(buf, i)
                length = (hi << 16) | lo
                if plausible(length, typ, flags, sid_raw, max_len):
                    j = i + 9 + length
                    if j == n:
                        return (
                            0,
                            i,
                        )  # ends exactly where the bytes so far end: senders align frames so
                    if j + 9 > n:
                        return 1, i  # cannot confirm yet: keep from the candidate
                    hi2, lo2, typ2, flags2, sid2 = unpack(buf, j)
                    if typ2 <= 9 and plausible((hi2 << 16) | lo2, typ2, flags2, sid2, max_len):
                        return 0, i
            i += 1
        i = max(pos, n - 8)
        if st.hunt_scanned + (i - pos) > self._hunt_budget:
            return 2, n
        return 1, i

    def _truncated(self, st: _Dir, ts: int, frame: int, at_eof: bool) -> None:
        if at_eof:
            pass  # the capture ended, not the connection: an unfinished frame is expected
        elif st.mode in (_M_DATA, _M_SKIP) and st.cur_remaining:
            self._report(
                st,
                "http2.truncated_frame",
                f"{FRAME_TYPES[st.cur_type] if st.cur_type < 10 else 'unknown'} frame on stream "
                f"{st.cur_sid}: {st.cur_remaining} of {st.cur_len} bytes missing",
                ts,
                frame,
            )
        elif st.mode == _M_HEADER and st.buf:
            self._report(
                st,
                "http2.truncated_frame",
                f"{len(st.buf)} bytes of an unfinished frame at the end of the stream",
                ts,
                frame,
            )
        st.skipped += len(st.buf)
        st.buf.clear()
        st.mode = _M_DEAD

    # ------------------------------------------------------------------ DATA streaming

    def _data_start(self, st: _Dir, ts: int, frame: int, out: list[object]) -> None:
        sid = st.cur_sid
        if sid == 0:
            self._report(st, "http2.bad_frame", "DATA frame on stream 0", ts, frame)
        if st.hb is not None:
            self._interrupted_block(st, DATA, ts, frame)

    def _data_bytes(
        self, st: _Dir, buf: bytes | bytearray, pos: int, take: int, ts: int, frame: int,
        out: list[object],
    ) -> None:
        if st.cur_pad_pending:
            st.cur_pad_pending = False
            pad = buf[pos]
            st.cur_pad = pad
            pos += 1
            take -= 1
            left = st.cur_len - 1 - pad
            if left < 0:
                self._report(
                    st,
                    "http2.bad_frame",
                    f"DATA on stream {st.cur_sid}: padding {pad} exceeds the payload "
                    f"({st.cur_len} bytes)",
                    ts,
                    frame,
                )
                left = 0
            st.cur_data_left = left
        use = min(take, st.cur_data_left)
        if use <= 0:
            return
        st.cur_data_left -= use
        s = self._streams.get(st.cur_sid)
        if s is None:
            s = self._stream_for(st.cur_sid, frame, ts)
        if s is None:
            return
        if st.d == Direction.CLIENT_TO_SERVER:
            s.client_data += use
            if s.req_body is not None:
                out += s.req_body.feed(bytes(buf[pos : pos + use]), ts, frame)
        else:
            s.server_data += use
            if s.first_data_ts is None:
                s.first_data_ts = ts
            if s.body is not None:
                out += s.body.feed(bytes(buf[pos : pos + use]), ts, frame)

    def _data_gap(self, st: _Dir, nbytes: int, ts: int, frame: int) -> None:
        if st.cur_pad_pending:
            # the pad length byte itself was lost: padding unknown, count everything as data
            st.cur_pad_pending = False
            st.cur_data_left = st.cur_remaining
        use = min(nbytes, st.cur_data_left)
        st.cur_data_left -= use
        s = self._streams.get(st.cur_sid)
        if s is not None:
            if st.d == Direction.CLIENT_TO_SERVER:
                s.client_data += use
                if s.req_body is not None:
                    s.req_body.gap(use, ts, frame)
            else:
                s.server_data += use
                if s.body is not None:
                    s.body.gap(use, ts, frame)

    def _end_body(self, st: _Dir, ts: int, frame: int, out: list[object]) -> None:
        st.mode = _M_HEADER
        typ, flags, sid, length = st.cur_type, st.cur_flags, st.cur_sid, st.cur_len
        if typ != DATA:
            # a frame too long to buffer: record its header only
            st.frames += 1
            out.append(
                self._frame_event(
                    st.d, sid, typ, flags, length, ts, frame,
                )
            )
            if typ in (HEADERS, PUSH_PROMISE, CONTINUATION):
                st.hpack_reset = True
                st.hb = None
            return
        pad = st.cur_pad
        data_len = length - (1 + pad if pad is not None else 0)
        if data_len < 0:
            data_len = 0
        if st.cur_pad_pending:  # zero-length DATA with PADDED: malformed
            self._report(
                st,
                "http2.bad_frame",
                f"DATA on stream {sid}: PADDED flag but no payload",
                ts,
                frame,
            )
            st.cur_pad_pending = False
        st.frames += 1
        if _new_frame is not None:  # _frame_event(..., pad_length=, data_bytes=), inlined
            ev = _new_frame(ts, frame, st.d, self.tcp_stream, sid, DATA, flags, length)
            _set_pad_length(ev, pad)
            _set_data_bytes(ev, data_len)
            out.append(ev)
        else:  # pragma: no cover
            out.append(
                self._frame_event(
                    st.d, sid, DATA, flags, length, ts, frame, pad_length=pad, data_bytes=data_len
                )
            )
        s = self._streams.get(sid) or self._stream_for(sid, frame, ts)
        if s is None:
            return
        self._count_frame(st, s, ts, frame)
        if self._flow_known and length:
            self._consume_window(st, s, length, ts)
        if flags & F_END_STREAM:
            self._end_side(st, s, ts, frame, out)

    # ------------------------------------------------------------------ frames

    @classmethod
    def _frame_dispatch_table(cls) -> dict[int, _FrameHandler]:
        """Frame type -> the method that handles a complete buffered frame of that type (types
        outside the table go to :meth:`_unknown_frame`). DATA payloads are streamed by
        :meth:`_parse` and never buffered, so DATA never comes here; it is listed, with the
        handler of unknown types, so that the table names every RFC 9113 type. Built once for
        the class, of functions (called with the observer): an observer holding bound methods
        of itself would be a reference cycle, freed only by the cycle collector."""
        return {
            DATA: cls._unknown_frame,
            HEADERS: cls._header_frame,
            PRIORITY: cls._priority_frame,
            RST_STREAM: cls._rst_stream_frame,
            SETTINGS: cls._settings_frame,
            PUSH_PROMISE: cls._header_frame,
            PING: cls._ping_frame,
            GOAWAY: cls._goaway_frame,
            WINDOW_UPDATE: cls._window_update_frame,
            CONTINUATION: cls._continuation_frame,
        }

    def _frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """One complete buffered frame (any type but DATA): counted, checked against an open
        header block, then handled by the method the dispatch table names for its type."""
        st.frames += 1
        if st.hb is not None and not (typ == CONTINUATION and sid == st.hb_sid):
            self._interrupted_block(st, typ, ts, frame)
        _FRAME_HANDLERS.get(typ, _ON_UNKNOWN_FRAME)(
            self, st, typ, flags, sid, length, payload, ts, frame, out
        )

    def _continuation_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """CONTINUATION: the next fragment of the open header block (RFC 9113 §6.10)."""
        d = st.d
        if st.hb is None or sid != st.hb_sid:
            if st.hb_dropped == sid:  # the rest of a block dropped for its size
                if flags & F_END_HEADERS:
                    st.hb_dropped = 0
            else:
                self._report(
                    st,
                    "http2.bad_frame",
                    f"CONTINUATION on stream {sid} without an open header block",
                    ts,
                    frame,
                )
            st.hpack_reset = True
            out.append(
                self._frame_event(
                    d, sid, typ, flags, length, ts, frame,
                    header_block_bytes=length,
                )
            )
            return
        st.hb += payload
        st.hb_bytes += length
        if len(st.hb) > _MAX_HEADER_BLOCK:
            self._report(
                st,
                "http2.bad_frame",
                f"header block of stream {sid} longer than {_MAX_HEADER_BLOCK} bytes; dropped",
                ts,
                frame,
            )
            st.hb = None
            st.hb_dropped = sid if not flags & F_END_HEADERS else 0
            st.hpack_reset = True
            out.append(
                self._frame_event(
                    d, sid, typ, flags, length, ts, frame,
                    header_block_bytes=length,
                )
            )
            return
        headers = None
        if flags & F_END_HEADERS:
            headers = self._decode_block(st, ts, frame)
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                header_block_bytes=length,
                headers=headers,
            )
        )
        s = self._streams.get(sid)
        if s is not None:
            self._count_frame(st, s, ts, frame)
        if flags & F_END_HEADERS:
            self._block_done(st, headers, ts, frame, out)

    def _priority_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """PRIORITY (RFC 9113 §6.3): recorded; it may create an idle stream."""
        d = st.d
        excl = dep = weight = None
        if length != 5:
            self._report(
                st,
                "http2.bad_frame",
                f"PRIORITY on stream {sid}: length {length} != 5",
                ts,
                frame,
            )
        else:
            (dep_raw,) = _U32.unpack_from(payload, 0)
            excl, dep, weight = bool(dep_raw >> 31), dep_raw & 0x7FFFFFFF, payload[4]
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                priority_exclusive=excl,
                priority_dependency=dep,
                priority_weight=weight,
            )
        )
        if sid == 0:
            self._report(st, "http2.bad_frame", "PRIORITY on stream 0", ts, frame)
            return
        s = self._streams.get(sid)
        if s is None and not self._is_closed(sid):
            s = self._new_stream(sid, frame, ts)  # idle until HEADERS
        if s is not None:
            self._count_frame(st, s, ts, frame)

    def _rst_stream_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """RST_STREAM (RFC 9113 §6.4): the stream ends (``rst_stream``)."""
        d = st.d
        code = None
        if length != 4:
            self._report(
                st,
                "http2.bad_frame",
                f"RST_STREAM on stream {sid}: length {length} != 4",
                ts,
                frame,
            )
        else:
            (code,) = _U32.unpack_from(payload, 0)
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                error_code=code,
            )
        )
        if sid == 0:
            self._report(st, "http2.bad_frame", "RST_STREAM on stream 0", ts, frame)
            return
        s = self._streams.get(sid) or self._stream_for(sid, frame, ts)
        if s is not None:
            self._count_frame(st, s, ts, frame)
            self._end_stream(s, "rst_stream", ts, frame, d, out, rst_code=code, rst_by=d)

    def _settings_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """SETTINGS (RFC 9113 §6.5): applied to the sender's settings and the peer's limits."""
        d = st.d
        settings: tuple[tuple[int, int], ...] = ()
        if sid != 0:
            self._report(st, "http2.bad_frame", f"SETTINGS on stream {sid}", ts, frame)
        if flags & F_ACK:
            if length:
                self._report(
                    st,
                    "http2.bad_frame",
                    f"SETTINGS ACK with {length} bytes of payload",
                    ts,
                    frame,
                )
        else:
            if length % 6:
                self._report(
                    st,
                    "http2.bad_frame",
                    f"SETTINGS length {length} is not a multiple of 6",
                    ts,
                    frame,
                )
            settings = parse_settings_payload(payload)
            for ident, value in settings:
                self._apply_setting(st, ident, value)
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                settings=None if flags & F_ACK else settings,
            )
        )

    def _ping_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """PING (RFC 9113 §6.7): an ACK matching an earlier PING of the other side gives an RTT."""
        d = st.d
        rtt = None
        if length != 8:
            self._report(st, "http2.bad_frame", f"PING length {length} != 8", ts, frame)
        if sid != 0:
            self._report(st, "http2.bad_frame", f"PING on stream {sid}", ts, frame)
        if flags & F_ACK:
            sent = self._pings.pop((1 - d, payload), None)
            if sent is not None:
                rtt = ts - sent
                self._ping_count += 1
                self._ping_sum += rtt
                self._ping_min = rtt if self._ping_min is None else min(self._ping_min, rtt)
                self._ping_max = rtt if self._ping_max is None else max(self._ping_max, rtt)
        elif len(self._pings) < _MAX_PENDING_PINGS:
            self._pings[(int(d), payload)] = ts
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                ping_data=payload,
                ping_rtt_ns=rtt,
            )
        )

    def _goaway_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """GOAWAY (RFC 9113 §6.8): streams above last_stream_id the receiver opened end."""
        d = st.d
        last = code = None
        debug = b""
        if length < 8:
            self._report(st, "http2.bad_frame", f"GOAWAY length {length} < 8", ts, frame)
        else:
            last_raw, code = struct.unpack_from(">II", payload, 0)
            last = last_raw & 0x7FFFFFFF
            debug = payload[8:]
        if sid != 0:
            self._report(st, "http2.bad_frame", f"GOAWAY on stream {sid}", ts, frame)
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                last_stream_id=last,
                error_code=code,
                debug_data=debug,
            )
        )
        if last is not None and code is not None:
            if self._goaway is None:
                self._goaway = (frame, ts, d, last, code)
            # streams the GOAWAY's receiver initiated above last_stream_id were not processed
            parity = 1 if d == Direction.SERVER_TO_CLIENT else 0
            for s in [
                s
                for s in self._streams.values()
                if s.id > last and s.id % 2 == parity and not s.idle
            ]:
                self._end_stream(s, "goaway", ts, frame, d, out)

    def _window_update_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """WINDOW_UPDATE (RFC 9113 §6.9): opens the flow-control window of the other side."""
        d = st.d
        inc = None
        if length != 4:
            self._report(
                st, "http2.bad_frame", f"WINDOW_UPDATE length {length} != 4", ts, frame
            )
        else:
            (inc_raw,) = _U32.unpack_from(payload, 0)
            inc = inc_raw & 0x7FFFFFFF
            if inc == 0:
                self._report(
                    st,
                    "http2.bad_frame",
                    f"WINDOW_UPDATE on stream {sid} with increment 0",
                    ts,
                    frame,
                )
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
                window_increment=inc,
            )
        )
        s = self._streams.get(sid) if sid else None
        if s is not None:
            self._count_frame(st, s, ts, frame)
        if inc and self._flow_known:
            self._window_update(st, sid, s, inc, ts)

    def _unknown_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """A frame of an unknown type (RFC 9113 §5.5: ignored by endpoints): recorded only."""
        d = st.d
        out.append(
            self._frame_event(
                d, sid, typ, flags, length, ts, frame,
            )
        )

    def _header_frame(
        self,
        st: _Dir,
        typ: int,
        flags: int,
        sid: int,
        length: int,
        payload: bytes,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        name = FRAME_TYPES[typ]
        p = 0
        pad: int | None = None
        excl = dep = weight = None
        promised: int | None = None
        bad = False
        if flags & F_PADDED:
            if length < 1:
                bad = True
            else:
                pad = payload[0]
                p = 1
        if typ == HEADERS and flags & F_PRIORITY and not bad:
            if length - p < 5:
                bad = True
            else:
                (dep_raw,) = _U32.unpack_from(payload, p)
                excl, dep, weight = bool(dep_raw >> 31), dep_raw & 0x7FFFFFFF, payload[p + 4]
                p += 5
        if typ == PUSH_PROMISE and not bad:
            if length - p < 4:
                bad = True
            else:
                promised = _U32.unpack_from(payload, p)[0] & 0x7FFFFFFF
                p += 4
        end = length - (pad or 0)
        if bad or end < p:
            self._report(
                st,
                "http2.bad_frame",
                f"{name} on stream {sid}: payload of {length} bytes too short for its "
                "fields and padding",
                ts,
                frame,
            )
            end = max(end, p)
            frag = b""
        else:
            frag = payload[p:end]
        if sid == 0:
            self._report(st, "http2.bad_frame", f"{name} on stream 0", ts, frame)
        st.hb = bytearray(frag)
        st.hb_sid = sid
        st.hb_type = typ
        st.hb_end_stream = bool(typ == HEADERS and flags & F_END_STREAM)
        st.hb_promised = promised
        st.hb_bytes = len(frag)
        headers = self._decode_block(st, ts, frame) if flags & F_END_HEADERS else None
        out.append(
            self._frame_event(
                st.d, sid, typ, flags, length, ts, frame,
                pad_length=pad,
                header_block_bytes=len(frag),
                headers=headers,
                priority_exclusive=excl,
                priority_dependency=dep,
                priority_weight=weight,
                promised_stream_id=promised,
            )
        )
        if sid:
            s = self._streams.get(sid)
            if s is None:
                s = self._stream_for(sid, frame, ts, opening=True)
                if (
                    s is not None
                    and typ == HEADERS
                    and st.d == Direction.SERVER_TO_CLIENT
                    and sid % 2
                ):
                    s.partial = True  # a response whose request was not captured
            if s is not None:
                if typ == HEADERS and s.idle:
                    s.idle = False
                    self._opened(s)
                self._count_frame(st, s, ts, frame)
        if flags & F_END_HEADERS:
            self._block_done(st, headers, ts, frame, out)

    def _interrupted_block(self, st: _Dir, typ: int, ts: int, frame: int) -> None:
        name = FRAME_TYPES[typ] if typ < 10 else f"type {typ}"
        self._report(
            st,
            "http2.bad_frame",
            f"{name} frame inside the header block of stream {st.hb_sid} (CONTINUATION expected)",
            ts,
            frame,
        )
        st.hb = None
        st.hpack_reset = True

    def _decode_block(self, st: _Dir, ts: int, frame: int) -> Headers | None:
        block = bytes(st.hb or b"")
        if st.hpack_reset:
            st.decoder = _new_decoder()
            st.hpack_reset = False
        try:
            raw = st.decoder.decode(block, raw=True)
            return tuple(
                (bytes(k).decode("utf-8", "replace"), bytes(v).decode("utf-8", "replace"))
                for k, v in raw
            )
        except Exception as exc:  # hpack raises its own errors, but never let a codec bug escape
            self._hpack_errors += 1
            self._report(
                st,
                "http2.hpack_decode_failed",
                f"header block of stream {st.hb_sid} ({len(block)} bytes): "
                f"{type(exc).__name__}: {exc}",
                ts,
                frame,
            )
            st.decoder = _new_decoder()
            return None

    def _block_done(
        self, st: _Dir, headers: Headers | None, ts: int, frame: int, out: list[object]
    ) -> None:
        sid, typ, end_stream, promised, nbytes = (
            st.hb_sid,
            st.hb_type,
            st.hb_end_stream,
            st.hb_promised,
            st.hb_bytes,
        )
        st.hb = None
        if sid == 0:
            return
        s = self._streams.get(sid)
        client = st.d == Direction.CLIENT_TO_SERVER
        if typ == PUSH_PROMISE:
            if s is not None:
                s.server_hdr += nbytes
            if promised and promised not in self._streams and not self._is_closed(promised):
                p = self._new_stream(promised, frame, ts)
                p.idle = False
                p.pushed = True
                p.parent = sid
                p.req_headers = headers
                self._request_fields(p, headers)
                p.req_frame = frame
                p.req_ts = ts
                p.req_end_ts = ts
                p.client_ended = True
                self._max_sid[promised % 2 == 0] = max(self._max_sid[promised % 2 == 0], promised)
                self._opened(p)
            return
        if s is None:
            return
        if client:
            s.client_hdr += nbytes
            if s.req_headers is None and s.req_frame is None:
                s.req_headers = headers
                s.req_frame = frame
                s.req_ts = ts
                self._request_fields(s, headers)
                s.req_body = open_body(  # None unless a body parser wants it (DoH)
                    headers,
                    tcp_stream=self.tcp_stream,
                    stream_id=s.id,
                    direction=st.d,
                    diag=self.diag,
                    sse_max_line_bytes=self._sse_max,
                    max_decoded_bytes=self._max_decoded,
                )
        else:
            s.server_hdr += nbytes
            status = None
            if headers is not None:
                sv = _header_value(headers, ":status")
                if sv is not None and sv.isascii() and sv.isdigit() and len(sv) <= 3:
                    status = int(sv)
            if s.status is None and s.resp_frame is None:
                if status is not None and 100 <= status < 200:
                    s.informational += 1
                else:
                    s.status = status
                    s.resp_headers = headers
                    s.resp_frame = frame
                    s.resp_ts = ts
                    if headers is not None:
                        s.content_type = _header_value(headers, "content-type")
                        s.body = open_body(
                            headers,
                            tcp_stream=self.tcp_stream,
                            stream_id=s.id,
                            direction=st.d,
                            diag=self.diag,
                            sse_max_line_bytes=self._sse_max,
                            max_decoded_bytes=self._max_decoded,
                        )
        if end_stream:
            self._end_side(st, s, ts, frame, out)

    @staticmethod
    def _request_fields(s: _Stream, headers: Headers | None) -> None:
        if headers is None:
            return
        host = None
        for k, v in headers:
            if k == ":method":
                s.method = v
            elif k == ":scheme":
                s.scheme = v
            elif k == ":authority":
                s.authority = v
            elif k == ":path":
                s.path = v
            elif k == "host":
                host = v
        if s.authority is None:
            s.authority = host

    # ------------------------------------------------------------------ settings, flow control

    def _apply_setting(self, st: _Dir, ident: int, value: int) -> None:
        st.settings[ident] = value
        other = self._dirs[1 - st.d]
        if ident == 5:  # MAX_FRAME_SIZE: what the other side may send
            other.max_frame_size = value
        elif ident == 4:  # INITIAL_WINDOW_SIZE: windows of data the other side sends
            o = int(other.d)
            delta = value - self._init_window[o]
            self._init_window[o] = value
            if self._flow_known and delta:
                for s in self._streams.values():
                    s.window[o] += delta

    def _consume_window(self, st: _Dir, s: _Stream, length: int, ts: int) -> None:
        d = int(st.d)
        st.window -= length
        if st.window <= 0 and st.stall_since is None:
            st.stall_since = ts
            st.stalls += 1
        s.window[d] -= length
        if s.window[d] <= 0 and not s.stalled[d]:
            s.stalled[d] = True
            st.stalls += 1

    def _window_update(self, st: _Dir, sid: int, s: _Stream | None, inc: int, ts: int) -> None:
        sender = self._dirs[1 - st.d]  # the window update opens the window of the other side
        o = int(sender.d)
        if sid == 0:
            sender.window += inc
            if sender.stall_since is not None and sender.window > 0:
                sender.stalled_ns += ts - sender.stall_since
                sender.stall_since = None
        elif s is not None:
            s.window[o] += inc
            if s.window[o] > 0:
                s.stalled[o] = False

    # ------------------------------------------------------------------ streams

    def _is_closed(self, sid: int) -> bool:
        if sid in self._recently_closed:
            return True
        if self._start == "mid_stream":
            return False
        return sid <= self._max_sid[sid % 2 == 0]

    def _new_stream(self, sid: int, frame: int, ts: int) -> _Stream:
        if len(self._streams) >= _MAX_OPEN_STREAMS:
            oldest = next(iter(self._streams.values()))
            self._end_stream(oldest, "evicted", ts, frame, None, self._spill)
        s = _Stream(sid, frame, ts, (self._init_window[0], self._init_window[1]))
        self._streams[sid] = s
        self._nstreams += 1
        return s

    def _stream_for(
        self, sid: int, frame: int, ts: int, *, opening: bool = False
    ) -> _Stream | None:
        """The record of ``sid``, created if the stream is new; None for closed streams and 0."""
        if sid == 0:
            return None
        s = self._streams.get(sid)
        if s is not None:
            return s
        if self._is_closed(sid):
            return None
        s = self._new_stream(sid, frame, ts)
        k = sid % 2 == 0
        if sid > self._max_sid[k]:
            self._max_sid[k] = sid
        if not opening:
            # a frame other than HEADERS for a stream never seen: it began before the capture
            s.partial = True
            s.idle = False
            self._opened(s)
        return s

    def _opened(self, s: _Stream) -> None:
        self._open_streams += 1
        if self._open_streams > self._peak_open:
            self._peak_open = self._open_streams

    def _count_frame(self, st: _Dir, s: _Stream, ts: int, frame: int) -> None:
        if st.d == Direction.CLIENT_TO_SERVER:
            s.client_frames += 1
        else:
            s.server_frames += 1
        s.end_frame, s.end_ts = frame, ts

    def _end_side(self, st: _Dir, s: _Stream, ts: int, frame: int, out: list[object]) -> None:
        if st.d == Direction.CLIENT_TO_SERVER:
            s.client_ended = True
            if s.req_end_ts is None:
                s.req_end_ts = ts
            if s.req_body is not None:
                out += s.req_body.close(ts, frame)
        else:
            s.server_ended = True
            if s.body is not None:
                out += s.body.close(ts, frame)
        if s.server_ended and (s.client_ended or s.partial):
            self._end_stream(s, "end_stream", ts, frame, st.d, out)

    def _end_stream(
        self,
        s: _Stream,
        reason: str,
        ts: int,
        frame: int,
        d: Direction | None,
        out: list[object],
        *,
        rst_code: int | None = None,
        rst_by: Direction | None = None,
    ) -> None:
        self._streams.pop(s.id, None)
        self._recently_closed[s.id] = None
        if len(self._recently_closed) > _RECENTLY_CLOSED:
            del self._recently_closed[next(iter(self._recently_closed))]
        if not s.idle:
            self._open_streams -= 1
        if s.req_body is not None and not s.client_ended:
            out += s.req_body.close(ts, frame, at_eof=reason == "open_at_eof", complete=False)
        body = s.body
        if body is not None and not s.server_ended:
            out += body.close(ts, frame, at_eof=reason == "open_at_eof", complete=False)
        if body is None or body.decoder is None:
            enc = body.encoding if body is not None else _header_value(
                s.resp_headers or (), "content-encoding"
            )
            decoded: int | None = s.server_data
            decoding = "identity" if s.server_data else None
        else:
            enc, decoded, decoding = body.encoding, body.decoded_bytes, body.status
        out.append(
            Http2StreamEnded(
                ts_ns=ts,
                frame=frame,
                direction=d,
                tcp_stream=self.tcp_stream,
                stream_id=s.id,
                pushed=s.pushed,
                parent_stream_id=s.parent,
                partial=s.partial,
                request_headers=s.req_headers,
                response_headers=s.resp_headers,
                method=s.method,
                scheme=s.scheme,
                authority=s.authority,
                path=s.path,
                status=s.status,
                content_type=s.content_type,
                informational=s.informational,
                first_frame=s.first_frame,
                first_ts_ns=s.first_ts,
                request_frame=s.req_frame,
                request_ts_ns=s.req_ts,
                request_end_ts_ns=s.req_end_ts,
                response_headers_frame=s.resp_frame,
                response_headers_ts_ns=s.resp_ts,
                first_data_ts_ns=s.first_data_ts,
                end_frame=s.end_frame if reason in ("open_at_eof", "idle") else frame,
                end_ts_ns=s.end_ts if reason in ("open_at_eof", "idle") else ts,
                client_data_bytes=s.client_data,
                server_data_bytes=s.server_data,
                client_header_bytes=s.client_hdr,
                server_header_bytes=s.server_hdr,
                client_frames=s.client_frames,
                server_frames=s.server_frames,
                end_reason=reason,
                rst_error_code=rst_code,
                rst_by=rst_by,
                sse_events=body.sse_count if body is not None else 0,
                content_encoding=enc,
                decoded_body_bytes=decoded,
                content_decoding=decoding,
            )
        )

    def _finish(self, ts: int, frame: int, at_eof: bool, out: list[object]) -> None:
        self._finished = True
        for s in list(self._streams.values()):
            reason = "idle" if s.idle else "open_at_eof" if at_eof else "connection_closed"
            self._end_stream(s, reason, ts, frame, None, out)
        c, sv = self._dirs
        for st in self._dirs:
            if st.stall_since is not None:
                st.stalled_ns += ts - st.stall_since
                st.stall_since = None
        g = self._goaway
        out.append(
            Http2ConnectionEnded(
                ts_ns=ts,
                frame=frame,
                direction=None,
                tcp_stream=self.tcp_stream,
                start=self._start or "mid_stream",
                preface_frame=self._preface_frame,
                client_settings=tuple(c.settings.items()),
                server_settings=tuple(sv.settings.items()),
                streams=self._nstreams,
                peak_open_streams=self._peak_open,
                client_frames=c.frames,
                server_frames=sv.frames,
                client_bytes=c.bytes,
                server_bytes=sv.bytes,
                client_skipped_bytes=c.skipped,
                server_skipped_bytes=sv.skipped,
                ping_count=self._ping_count,
                ping_rtt_min_ns=self._ping_min,
                ping_rtt_max_ns=self._ping_max,
                ping_rtt_sum_ns=self._ping_sum,
                goaway_frame=g[0] if g else None,
                goaway_ts_ns=g[1] if g else None,
                goaway_by=g[2] if g else None,
                goaway_last_stream_id=g[3] if g else None,
                goaway_error_code=g[4] if g else None,
                client_flow_stalls=c.stalls if self._flow_known else 0,
                server_flow_stalls=sv.stalls if self._flow_known else 0,
                client_stalled_ns=c.stalled_ns if self._flow_known else 0,
                server_stalled_ns=sv.stalled_ns if self._flow_known else 0,
                flow_control_known=self._flow_known,
                hpack_errors=self._hpack_errors,
                desynced=self._desynced,
            )
        )


if TYPE_CHECKING:  # mypy checks that the observer is a full byte-stream observer
    from ...tcp.stream import StreamObserver

    _contract: StreamObserver = Http2Observer()


_FRAME_HANDLERS = Http2Observer._frame_dispatch_table()
"""frame type -> handler of a complete buffered frame (:meth:`Http2Observer._frame`)"""
_ON_UNKNOWN_FRAME: _FrameHandler = Http2Observer._unknown_frame
