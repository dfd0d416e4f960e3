"""The HTTP/1.x observer: requests and responses paired per connection, hand-offs on Upgrade.

One :class:`Http1Observer` per connection watches both directions and returns events:

- :class:`HttpExchange`: one per request/response pair (pipelined requests are paired in
  order), emitted when both messages are complete, or when the connection ends; a request
  or a response that cannot be paired is an exchange of its own (``paired`` False, with an
  ``unpaired_reason``);
- :class:`ProtocolSwitched`: a ``101 Switching Protocols`` (or a successful ``CONNECT``)
  moved the connection to another protocol;
- :class:`~pcaptools.protocols.sse.SseEvent` for ``text/event-stream`` response bodies;
- :class:`~pcaptools.protocols.body.HttpBody` for a request or response body of type
  ``application/dns-message`` (after content decoding), when the message ends;
- the events of the observer the connection was handed to: an
  :class:`~pcaptools.protocols.http2.Http2Observer` for ``Upgrade: h2c`` (the upgraded
  request becomes HTTP/2 stream 1), or what ``websocket_factory`` returns for
  ``Upgrade: websocket`` (the registry's :class:`~pcaptools.protocols.registry.UpgradeEntry`
  rows choose them). Other upgrades and CONNECT tunnels are counted, not parsed.

Message framing follows RFC 9112 §6: ``Transfer-Encoding: chunked``, ``Content-Length``,
no body for HEAD responses, 1xx, 204 and 304, a response body until the connection closes
otherwise. ``100 Continue`` and other 1xx responses are counted on the exchange they
precede. Bodies are streamed, never buffered; header sections are buffered up to
``max_head_bytes``.

Pairing is by stream position, not by count: a response answers a request that was
outstanding when its first byte (or, after a gap, its resynchronised start) arrived. While
neither direction lost bytes that is the oldest one (RFC 9112 §9.3.2). Once the server
direction lost bytes, the number of responses lost is unknown: a keep-alive client sends a
request after the previous response arrived, so the newest outstanding request is the one
and the older ones lost their responses (``response_not_captured``), as tshark pairs them;
on a connection seen pipelining, or when a request was lost after that newest one, the
response and the candidates are left unpaired rather than guessed. No TTFB is computed for
an unpaired row. HTTP/0.9 simple requests (``GET /path`` without a version) are requests
(version ``0.9``), answered by the rest of the server's bytes.

A watcher, not a participant: it never raises on wire data. A message it cannot parse
(``http1.bad_message``) or bytes lost inside a header section or chunk framing make that
direction search for the next start line (``http1.resynchronised``); bytes lost inside a
body of known length keep it in step. A capture that starts mid-connection is handled the
same way (``midstream=True`` says so; otherwise a first line that is not a start line
triggers the search). A message's ``frame`` is the packet that delivered its last byte,
which is where tshark puts ``http.request`` / ``http.response``; a body that ends with the
connection ends at the packet that closed it (the FIN), as in tshark.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ...diagnostics import Diagnostics
from ...redaction import redact_url
from ...tcp.chunk import new_chunk
from ...tcp.stream import Direction, StreamChunk, StreamCursor, StreamObserver
from ..body import Body, open_body
from ..content_coding import DEFAULT_MAX_DECODED_BYTES
from ..registry import REGISTRY, UpgradeContext
from ..sse import DEFAULT_MAX_LINE_BYTES
from .events import HttpExchange, HttpRequest, HttpResponse, ProtocolSwitched
from .parse import (
    HEAD_END,
    HUNT_REQUEST,
    HUNT_RESPONSE,
    SIMPLE_REQUEST,
    Headers,
    body_framing,
    chunk_size,
    header_value,
    is_start_line,
    parse_header_fields,
    parse_request_line,
    parse_status_line,
    quote_line,
    upgrade_token,
)

__all__ = ["Http1Observer", "UpgradeFactory"]

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT

# parser modes of one direction
(
    _HEAD,
    _BODY_LEN,
    _CHUNK_SIZE,
    _CHUNK_DATA,
    _CHUNK_END,
    _TRAILERS,
    _BODY_CLOSE,
    _HUNT,
    _WAIT_UPGRADE,
    _SWITCHED,
    _TUNNEL,
    _DEAD,
) = range(12)

#: what a parse step of :meth:`Http1Observer._parse` says next: parse on, wait for more bytes,
#: or stop (the direction left HTTP/1.x and took its unparsed bytes along)
_MORE, _WAIT, _HANDED_OFF = range(3)

_MAX_CHUNK_LINE = 4096
#: requests waiting for a response beyond this many: the oldest is emitted unanswered
#: (end_reason ``evicted``), so memory stays bounded whatever the client sends
_MAX_AWAITING = 10_000
_MAX_WAIT_BYTES = 1 << 20
_HUNT_KEEP = 8192


UpgradeFactory = Callable[[HttpRequest | None, HttpResponse], StreamObserver | None]
"""``factory(request, response)`` -> the observer of the bytes after a 101 (None: only counted)."""


# --------------------------------------------------------------------------- state


class _Msg:
    __slots__ = (
        "body",
        "body_bytes",
        "chunked",
        "complete",
        "end_frame",
        "end_ts",
        "head_frame",
        "head_ts",
        "header_bytes",
        "headers",
        "method",
        "reason",
        "start_frame",
        "start_ts",
        "status",
        "target",
        "until_close",
        "version",
        "wire_bytes",
    )

    def __init__(self, start: tuple[int, int], head: tuple[int, int], header_bytes: int) -> None:
        self.start_ts, self.start_frame = start
        self.head_ts, self.head_frame = head
        self.header_bytes = header_bytes
        self.wire_bytes = header_bytes
        self.body_bytes = 0
        self.chunked = False
        self.until_close = False
        self.complete = False
        self.end_frame: int | None = None
        self.end_ts: int | None = None
        self.headers: Headers = ()
        self.method = ""
        self.target = ""
        self.version = ""
        self.status = 0
        self.reason = ""
        self.body: Body | None = None
        """content decoding and the body's parser (SSE, DoH); None: the body is only counted"""

    def request(self) -> HttpRequest:
        return HttpRequest(
            method=self.method,
            target=self.target,
            version=self.version,
            headers=self.headers,
            header_bytes=self.header_bytes,
            body_bytes=self.body_bytes,
            wire_bytes=self.wire_bytes,
            chunked=self.chunked,
            start_frame=self.start_frame,
            start_ts_ns=self.start_ts,
            head_frame=self.head_frame,
            head_ts_ns=self.head_ts,
            end_frame=self.end_frame,
            end_ts_ns=self.end_ts,
            complete=self.complete,
        )

    def decoding(self) -> tuple[str | None, int | None, str | None]:
        """(content_encoding, decoded_body_bytes, content_decoding) of the body so far"""
        body = self.body
        if body is None or body.decoder is None:
            enc = (
                body.encoding
                if body is not None
                else header_value(self.headers, "content-encoding")
            )
            has_body = self.body_bytes > 0
            return enc, self.body_bytes, "identity" if has_body else None
        return body.encoding, body.decoded_bytes, body.status

    def response(self) -> HttpResponse:
        enc, decoded, status = self.decoding()
        return HttpResponse(
            status=self.status,
            reason=self.reason,
            version=self.version,
            headers=self.headers,
            header_bytes=self.header_bytes,
            body_bytes=self.body_bytes,
            wire_bytes=self.wire_bytes,
            chunked=self.chunked,
            until_close=self.until_close,
            start_frame=self.start_frame,
            start_ts_ns=self.start_ts,
            head_frame=self.head_frame,
            head_ts_ns=self.head_ts,
            end_frame=self.end_frame,
            end_ts_ns=self.end_ts,
            complete=self.complete,
            content_encoding=enc,
            decoded_body_bytes=decoded,
            content_decoding=status,
        )


class _Exchange:
    __slots__ = (
        "desynced",
        "emitted",
        "first_resp",
        "held",
        "index",
        "interim",
        "position",
        "request",
        "response",
        "switch",
        "tentative",
        "unpaired",
        "upgrade",
    )

    def __init__(self, index: int, position: int | None) -> None:
        self.index = index
        self.position = position
        self.request: _Msg | None = None
        self.response: _Msg | None = None
        self.interim: list[int] = []
        self.first_resp: tuple[int, int] | None = None
        self.upgrade: str | None = None
        """protocol requested (Upgrade header token, or 'connect')"""
        self.switch: str | None = None
        """protocol actually switched to"""
        self.desynced = False
        self.emitted = False
        self.unpaired: str | None = None
        """why this exchange will not be paired, when that was decided before it was emitted"""
        self.tentative = False
        """paired after the server direction lost bytes: a loss in the client direction
        reported for the same packet (its ACK covers client bytes never captured) undoes it"""
        self.held: tuple[int, int, Direction | None] | None = None
        """(ts, frame, direction) of a tentative exchange that was ready to be emitted"""


class _Side(StreamCursor):
    """State of one direction, and its cursor (:attr:`next_offset`: the next stream offset
    expected; set by the first chunk or gap, see :attr:`started`)."""

    __slots__ = (
        "buf",
        "closed",
        "d",
        "ex",
        "hunt_skipped",
        "mode",
        "msg",
        "msg_start",
        "remaining",
        "scan_from",
        "skipped",
        "started",
        "switch_offset",
        "wait_bytes",
        "wait_items",
    )

    def __init__(self, d: Direction) -> None:
        self.d = d
        self.mode = _HEAD
        self.buf = bytearray()
        self.started = False
        self.closed = False
        self.next_offset = 0
        self.msg: _Msg | None = None
        self.ex: _Exchange | None = None
        self.msg_start: tuple[int, int] | None = None
        self.remaining = 0
        self.scan_from = 0
        self.skipped = 0
        self.hunt_skipped = 0
        self.switch_offset = 0
        self.wait_items: list[tuple[bytes | int, int, int, int]] = []
        """(data, or the size of a gap; ts, frame, tcp offset) held while an upgrade is pending"""
        self.wait_bytes = 0


# --------------------------------------------------------------------------- observer


class Http1Observer:
    """Watches both directions of one HTTP/1.x connection. Never raises on wire data.

    ``websocket_factory(request, response)`` builds the observer of a connection upgraded to
    WebSocket (None: its bytes are only counted); ``midstream`` says the capture began inside
    the connection (search for a start line; positions unknown); ``max_head_bytes`` bounds a
    header section; ``sse_max_line_bytes`` bounds the SSE parser; ``max_decoded_body_bytes``
    bounds the decoded bytes of one content-encoded response body.

    Implements :class:`~pcaptools.tcp.stream.StreamObserver` (``wants_bytes``, ``feed``,
    ``gap``, ``close(..., at_eof=...)``, ``finish``) and calls the observer a connection is
    handed to after an Upgrade through the same contract. Call ``close(..., at_eof=True)``
    (or :meth:`finish`) at the end of the capture. Once both directions are closed, or at
    end of capture, exchanges still open are emitted.
    """

    def __init__(
        self,
        *,
        tcp_stream: int = -1,
        diag: Diagnostics | None = None,
        websocket_factory: UpgradeFactory | None = None,
        midstream: bool = False,
        max_head_bytes: int = 256 << 10,
        sse_max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_decoded_body_bytes: int = DEFAULT_MAX_DECODED_BYTES,
    ) -> None:
        self.tcp_stream = tcp_stream
        self.diag = diag if diag is not None else Diagnostics()
        self._ws_factory = websocket_factory
        self._midstream = midstream
        self._max_head = max_head_bytes
        self._sse_max = sse_max_line_bytes
        self._max_decoded = max_decoded_body_bytes
        self._sides = (_Side(C2S), _Side(S2C))
        self._awaiting: deque[_Exchange] = deque()
        """exchanges whose final response head has not been seen, in request order"""
        self._open: list[_Exchange] = []
        """exchanges not yet emitted"""
        self._count = 0
        self._positions_known = not midstream
        self._lost = [midstream, midstream]
        """per direction: sync was lost (gap, unparsable bytes, mid-stream start) since the
        last response that was paired: counting responses no longer pairs them"""
        self._s2c_loss_frame: int | None = None
        """frame at which the server direction last lost sync"""
        self._c2s_loss_frame: int | None = None
        """frame at which the client direction last lost sync"""
        self._pipelined = False
        """a response was seen to start after two or more requests while nothing was lost"""
        self._ambiguous = False
        """requests were given up as ``ambiguous`` since the last response paired"""
        self._cut_request = False
        """a client gap cut a request whose start was seen (it is outstanding, unseen)"""
        self._tentative: list[_Exchange] = []
        self._tentative_frame = -1
        """frame of the packet whose response(s) made the tentative pairs"""
        self._inner: StreamObserver | None = None
        self._finished = False
        self._last_ts = 0
        self._last_frame = 0

    @property
    def inner(self) -> StreamObserver | None:
        """the observer the connection was handed to after an upgrade, if any"""
        return self._inner

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def done(self) -> bool:
        """finished: every later call returns nothing (the stream contract's ``done``)"""
        return self._finished

    # ------------------------------------------------------------------ StreamObserver API

    @property
    def wants_bytes(self) -> bool:
        """False once none of the connection's later bytes will be parsed: the observer has
        finished, every direction still open only counts its bytes (a tunnel, or a direction
        given up), or the connection was handed over and that observer wants none."""
        if self._finished:
            return False
        sides = self._sides
        inner = self._inner
        if inner is not None and all(s.closed or s.mode == _SWITCHED for s in sides):
            return inner.wants_bytes
        return not all(s.closed or s.mode in (_TUNNEL, _DEAD) for s in sides)

    def feed(self, chunk: StreamChunk) -> list[object]:
        """Parse the next in-order bytes of one direction; return the events they completed."""
        side = self._sides[chunk.direction]
        data = chunk.data
        ts, frame = chunk.ts_ns, chunk.frame
        if side.mode == _SWITCHED and chunk.offset == side.next_offset and side.started \
                and not self._tentative and not self._finished:
            # a direction handed over (WebSocket, h2c) and in step: its bytes go straight on,
            # as _consume would pass them (the rest of this method only leads there)
            self._last_ts, self._last_frame = ts, frame
            side.next_offset += len(data)
            inner = self._inner
            if inner is None or not data:
                return []
            return inner.feed(new_chunk(side.d, data, ts, frame,
                                        chunk.offset - side.switch_offset))
        out: list[object] = []
        if self._finished:
            return out
        if self._tentative and frame != self._tentative_frame:
            self._settle(out)
        self._last_ts, self._last_frame = ts, frame
        if not side.started:
            side.started = True
            side.next_offset = chunk.offset
            if chunk.offset > 0 or self._midstream:
                self._start_hunt(side, frame)
                if side.d == C2S:
                    self._positions_known = False
        if chunk.offset != side.next_offset:  # (bytes missing or repeated)
            hole, data = side.align(chunk.offset, data)
            if hole:
                out += self.gap(chunk.direction, side.next_offset, hole, ts, frame)
        offset = side.next_offset
        side.next_offset += len(data)
        if data:
            self._consume(side, data, ts, frame, offset, out)
        return out

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        """``nbytes`` of ``direction`` were never captured. Inside a body of known length the
        parser stays in step; elsewhere it searches for the next message start. Bytes of the
        hole before the cursor were seen, and only the rest is lost
        (:meth:`~pcaptools.tcp.stream.StreamCursor.skip`)."""
        out: list[object] = []
        if nbytes <= 0 or self._finished:
            return out
        side = self._sides[direction]
        if self._tentative and frame != self._tentative_frame:
            self._settle(out)
        if not side.started:
            side.started = True
            side.next_offset = offset
        nbytes = side.skip(offset, nbytes)  # (the bytes before the cursor were seen)
        if not nbytes:
            return out
        self._gap(side, nbytes, ts_ns, frame, side.next_offset - nbytes, out)
        if self._tentative and direction == C2S and self._lost[0] and self._c2s_loss_frame == frame:
            self._unpair_tentative(ts_ns, frame, out)
        return out

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        """``direction`` ended (FIN/RST, or end of capture with ``at_eof``). A body delimited by
        the connection ends here. With both directions closed, or ``at_eof``, open exchanges are
        emitted and the inner observer (if any) is closed too."""
        out: list[object] = []
        if self._finished:
            return out
        if self._tentative and frame != self._tentative_frame:
            self._settle(out)
        self._close_side(self._sides[direction], ts_ns, frame, at_eof, out)
        if at_eof:
            for side in self._sides:
                if not side.closed:
                    self._close_side(side, ts_ns, frame, at_eof, out)
        if at_eof or all(s.closed for s in self._sides):
            self._finish(ts_ns, frame, at_eof, out)
        return out

    def finish(self, ts_ns: int | None = None, frame: int | None = None) -> list[object]:
        """End of capture: emit what is still open (``open_at_eof``). Idempotent."""
        if self._finished:
            return []
        return self.close(
            C2S,
            self._last_ts if ts_ns is None else ts_ns,
            self._last_frame if frame is None else frame,
            at_eof=True,
        )

    # ------------------------------------------------------------------ dispatch by mode

    def _report(self, side: _Side, code: str, detail: str, ts: int, frame: int) -> None:
        self.diag.add(
            code, detail, ts_ns=ts, frame=frame, tcp_stream=self.tcp_stream, direction=side.d.label
        )

    def _consume(
        self, side: _Side, data: bytes, ts: int, frame: int, offset: int, out: list[object]
    ) -> None:
        mode = side.mode
        if mode == _SWITCHED:
            if self._inner is not None:
                out += self._inner.feed(
                    new_chunk(side.d, data, ts, frame, offset - side.switch_offset))
            return
        if mode in (_TUNNEL, _DEAD) or side.closed:
            side.skipped += len(data)
            return
        if mode == _WAIT_UPGRADE:
            side.wait_items.append((data, ts, frame, offset))
            side.wait_bytes += len(data)
            if side.wait_bytes > _MAX_WAIT_BYTES:
                # the upgrade answer never came: carry on as HTTP/1.x
                self._resume(side, out)
            return
        side.buf += data
        self._parse(side, ts, frame, out)

    def _gap(
        self, side: _Side, nbytes: int, ts: int, frame: int, tcp_offset: int, out: list[object]
    ) -> None:
        mode = side.mode
        if mode == _SWITCHED:
            if self._inner is not None:
                out += self._inner.gap(side.d, tcp_offset - side.switch_offset, nbytes, ts, frame)
            return
        if mode in (_TUNNEL, _DEAD) or side.closed:
            side.skipped += nbytes
            return
        if mode == _WAIT_UPGRADE:
            side.wait_items.append((nbytes, ts, frame, tcp_offset))
            return
        msg = side.msg
        if (
            not side.buf
            and msg is not None
            and (
                (mode in (_BODY_LEN, _CHUNK_DATA) and nbytes <= side.remaining)
                or mode == _BODY_CLOSE
            )
        ):
            # inside a body whose extent is known: still in step
            msg.body_bytes += nbytes
            msg.wire_bytes += nbytes
            if msg.body is not None:
                msg.body.gap(nbytes, ts, frame)
            if mode != _BODY_CLOSE:
                side.remaining -= nbytes
                if side.remaining == 0:
                    if mode == _BODY_LEN:
                        self._message_done(side, ts, frame, out)
                    else:
                        side.mode = _CHUNK_END
            return
        if side.d == C2S and mode == _HEAD and side.buf.strip(b"\r\n"):
            # the hole cut a request whose start was seen: a request is outstanding unseen
            self._cut_request = True
        side.skipped += nbytes
        side.hunt_skipped += nbytes
        self._lose_sync(side, ts, frame, out)
        side.hunt_skipped = nbytes

    # ------------------------------------------------------------------ parsing

    def _parse(self, side: _Side, ts: int, frame: int, out: list[object]) -> None:
        """Parse the buffered bytes of ``side`` as far as they go, one step per parser mode:
        the header section, a body of known length, the chunked framing (size line, chunk
        end, trailers), a body delimited by the connection's end, the search for a start
        line. Each step returns where it stopped and whether to go on (:data:`_MORE`), wait
        for more bytes (:data:`_WAIT`), or stop because the direction left HTTP/1.x
        (:data:`_HANDED_OFF`: its unparsed bytes went with it)."""
        buf = side.buf
        pos = 0
        while True:
            mode = side.mode
            if mode == _HEAD:
                pos, go = self._step_head(side, buf, pos, ts, frame, out)
            elif mode in (_BODY_LEN, _CHUNK_DATA):
                pos, go = self._step_body(side, buf, pos, ts, frame, out)
            elif mode == _CHUNK_SIZE:
                pos, go = self._step_chunk_size(side, buf, pos, ts, frame, out)
            elif mode == _CHUNK_END:
                pos, go = self._step_chunk_end(side, buf, pos, ts, frame, out)
            elif mode == _TRAILERS:
                pos, go = self._step_trailers(side, buf, pos, ts, frame, out)
            elif mode == _BODY_CLOSE:
                if pos < len(buf):
                    self._body(side, buf, pos, len(buf) - pos, ts, frame, out)
                    pos = len(buf)
                go = _WAIT
            elif mode == _HUNT:
                pos, go = self._step_hunt(side, buf, pos, ts, frame, out)
            elif mode in (_SWITCHED, _WAIT_UPGRADE, _TUNNEL):
                self._handoff_rest(side, pos, ts, frame, out)
                return
            else:  # _DEAD
                side.skipped += len(buf) - pos
                pos = len(buf)
                go = _WAIT
            if go != _MORE:
                if go == _HANDED_OFF:
                    return
                break
        if pos:
            del buf[:pos]
            side.scan_from = max(0, side.scan_from - pos)

    def _step_head(
        self, side: _Side, buf: bytearray, pos: int, ts: int, frame: int, out: list[object]
    ) -> tuple[int, int]:
        """Mode ``_HEAD``: find the end of the next header section (a simple HTTP/0.9 request
        or response aside), check its start line early and bound its size, then parse it."""
        n = len(buf)
        if side.d == S2C and self._awaiting:
            simple = self._simple_response(side, buf, pos, n, ts, frame)
            if simple is None:
                return pos, _WAIT  # too few bytes to tell
            if simple:
                return pos, _MORE
        while pos < n and buf[pos] in (0x0D, 0x0A):
            pos += 1
        if pos >= n:
            return pos, _WAIT
        if side.msg_start is None:
            side.msg_start = (ts, frame)
        if side.d == C2S and buf.startswith(b"GET", pos):
            nl = buf.find(b"\n", pos, n)
            sm = SIMPLE_REQUEST.fullmatch(buf, pos, nl) if nl >= 0 else None
            if sm is not None:
                self._simple_request(side, sm.group(1), nl + 1 - pos, ts, frame, out)
                return nl + 1, _MORE
        m = HEAD_END.search(buf, max(pos, side.scan_from))
        if m is None:
            side.scan_from = max(pos, n - 3)
            nl = buf.find(b"\n", pos, n)
            if nl >= 0 and not is_start_line(bytes(buf[pos:nl]), side.d == C2S):
                self._bad(
                    side,
                    f"not a {'request' if side.d == C2S else 'status'} line: "
                    f"{bytes(buf[pos : min(nl, pos + 60)])!r}",
                    ts,
                    frame,
                    out,
                )
                return pos + 1, _MORE
            if n - pos > self._max_head:
                self._report(
                    side,
                    "http1.header_too_large",
                    f"no end of the header section within {self._max_head} bytes",
                    ts,
                    frame,
                )
                self._lose_sync(side, ts, frame, out, clear=False, lost=False)
                return pos + 1, _MORE
            return pos, _WAIT
        end = m.end()
        head = bytes(buf[pos:end])
        pos = end
        side.scan_from = 0
        start = side.msg_start
        side.msg_start = None
        self._head(side, head, start, (ts, frame), out)
        if side.mode in (_SWITCHED, _WAIT_UPGRADE, _TUNNEL):
            self._handoff_rest(side, pos, ts, frame, out)
            return pos, _HANDED_OFF
        return pos, _MORE

    def _step_body(
        self, side: _Side, buf: bytearray, pos: int, ts: int, frame: int, out: list[object]
    ) -> tuple[int, int]:
        """Modes ``_BODY_LEN`` and ``_CHUNK_DATA``: the next ``side.remaining`` bytes are body."""
        mode = side.mode
        take = min(len(buf) - pos, side.remaining)
        if take:
            self._body(side, buf, pos, take, ts, frame, out)
            pos += take
            side.remaining -= take
        if side.remaining:
            return pos, _WAIT
        if mode == _BODY_LEN:
            self._message_done(side, ts, frame, out)
        else:
            side.mode = _CHUNK_END
        return pos, _MORE

    def _step_chunk_size(
        self, side: _Side, buf: bytearray, pos: int, ts: int, frame: int, out: list[object]
    ) -> tuple[int, int]:
        """Mode ``_CHUNK_SIZE``: a chunk-size line; size 0 starts the trailer section."""
        n = len(buf)
        nl = buf.find(b"\n", pos, n)
        if nl < 0:
            if n - pos > _MAX_CHUNK_LINE:
                self._bad(side, "chunk-size line too long", ts, frame, out)
                return pos + 1, _MORE
            return pos, _WAIT
        size = chunk_size(buf, pos, nl)
        msg = side.msg
        if size is None or msg is None:
            self._bad(
                side,
                f"bad chunk-size line {bytes(buf[pos : min(nl, pos + 40)])!r}",
                ts,
                frame,
                out,
            )
            return pos + 1, _MORE
        msg.wire_bytes += nl + 1 - pos
        pos = nl + 1
        if size == 0:
            side.mode = _TRAILERS
        else:
            side.mode = _CHUNK_DATA
            side.remaining = size
        return pos, _MORE

    def _step_chunk_end(
        self, side: _Side, buf: bytearray, pos: int, ts: int, frame: int, out: list[object]
    ) -> tuple[int, int]:
        """Mode ``_CHUNK_END``: the CRLF (or bare LF) after a chunk's data."""
        n = len(buf)
        if pos >= n:
            return pos, _WAIT
        msg = side.msg
        if buf[pos] == 0x0A:
            pos += 1
            if msg is not None:
                msg.wire_bytes += 1
        elif buf[pos] == 0x0D:
            if n - pos < 2:
                return pos, _WAIT
            if buf[pos + 1] != 0x0A:
                self._bad(side, "chunk data not followed by CRLF", ts, frame, out)
                return pos + 1, _MORE
            pos += 2
            if msg is not None:
                msg.wire_bytes += 2
        else:
            self._bad(side, "chunk data not followed by CRLF", ts, frame, out)
            return pos + 1, _MORE
        side.mode = _CHUNK_SIZE
        return pos, _MORE

    def _step_trailers(
        self, side: _Side, buf: bytearray, pos: int, ts: int, frame: int, out: list[object]
    ) -> tuple[int, int]:
        """Mode ``_TRAILERS``: trailer field lines (counted, not kept) up to the blank line
        that ends the message."""
        n = len(buf)
        nl = buf.find(b"\n", pos, n)
        if nl < 0:
            if n - pos > self._max_head:
                self._bad(side, "trailer section too long", ts, frame, out)
                return pos + 1, _MORE
            return pos, _WAIT
        line = bytes(buf[pos:nl]).rstrip(b"\r")
        msg = side.msg
        if msg is not None:
            msg.wire_bytes += nl + 1 - pos
        pos = nl + 1
        if not line:
            self._message_done(side, ts, frame, out)
        return pos, _MORE

    def _step_hunt(
        self, side: _Side, buf: bytearray, pos: int, ts: int, frame: int, out: list[object]
    ) -> tuple[int, int]:
        """Mode ``_HUNT``: search for the next start line after lost or unparsable bytes."""
        n = len(buf)
        pat = HUNT_REQUEST if side.d == C2S else HUNT_RESPONSE
        m = pat.search(buf, pos)
        if m is None:
            # keep only the tail that may still become a start line
            last_nl = buf.rfind(b"\n", pos, n)
            keep_from = max(last_nl + 1 if last_nl >= 0 else pos, n - _HUNT_KEEP)
            side.skipped += keep_from - pos
            side.hunt_skipped += keep_from - pos
            return keep_from, _WAIT
        i = m.start()
        side.skipped += i - pos
        side.hunt_skipped += i - pos
        if side.hunt_skipped:
            self._report(
                side,
                "http1.resynchronised",
                f"message start found after skipping {side.hunt_skipped} bytes",
                ts,
                frame,
            )
        side.hunt_skipped = 0
        side.mode = _HEAD
        side.msg_start = None
        return i, _MORE

    def _simple_request(
        self, side: _Side, target: bytes, nbytes: int, ts: int, frame: int, out: list[object]
    ) -> None:
        """An HTTP/0.9 simple request line (``GET /path``): a whole request, counted as tshark
        counts it; its response is the rest of the server direction (no status line)."""
        start = side.msg_start or (ts, frame)
        side.msg_start = None
        side.scan_from = 0
        msg = _Msg(start, (ts, frame), nbytes)
        msg.method = "GET"
        msg.target = target.decode("latin-1")
        msg.version = "0.9"
        self._request_head(side, msg, ts, frame, out)

    def _simple_response(
        self, side: _Side, buf: bytearray, pos: int, n: int, ts: int, frame: int
    ) -> bool | None:
        """The server's next bytes answer an HTTP/0.9 request without a status line: start a
        response body that lasts until the connection closes. True when so, False when these
        bytes are a status line (or no 0.9 request awaits), None when too few bytes to tell."""
        ex = self._awaiting[0]
        req = ex.request
        if req is None or req.version != "0.9" or pos >= n:
            return False
        head = bytes(buf[pos : pos + 5])
        if b"HTTP/".startswith(head):
            return False if len(head) == 5 else None
        self._awaiting.popleft()
        msg = _Msg((ts, frame), (ts, frame), 0)
        msg.version = "0.9"
        msg.until_close = True
        ex.response = msg
        if ex.first_resp is None:
            ex.first_resp = (ts, frame)
        side.msg, side.ex = msg, ex
        side.mode = _BODY_CLOSE
        return True

    def _handoff_rest(self, side: _Side, pos: int, ts: int, frame: int, out: list[object]) -> None:
        """The direction left HTTP/1.x at buffer index ``pos``: pass the rest on."""
        buf = side.buf
        rest = bytes(buf[pos:])
        tcp_off = side.next_offset - len(rest)
        buf.clear()
        side.scan_from = 0
        if side.mode == _SWITCHED:
            side.switch_offset = tcp_off
        if rest:
            self._consume(side, rest, ts, frame, tcp_off, out)

    def _body(
        self,
        side: _Side,
        buf: bytearray,
        pos: int,
        take: int,
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        msg = side.msg
        if msg is None:
            return
        msg.body_bytes += take
        msg.wire_bytes += take
        if msg.body is not None:
            out += msg.body.feed(bytes(buf[pos : pos + take]), ts, frame)

    def _bad(self, side: _Side, detail: str, ts: int, frame: int, out: list[object]) -> None:
        """Report, abandon the message, and search for the next start line in what follows
        (callers inside :meth:`_parse` step past the offending byte)."""
        self._report(side, "http1.bad_message", detail, ts, frame)
        self._lose_sync(side, ts, frame, out, clear=False, lost=False)

    def _start_hunt(self, side: _Side, frame: int = 0, *, lost: bool = True) -> None:
        """Search for the next start line. ``lost``: bytes were never captured (a gap, or the
        capture began mid-connection), so messages may be missing, not just unparsable."""
        if lost:
            self._lost[side.d] = True
            if side.d == S2C:
                self._s2c_loss_frame = frame
            else:
                self._c2s_loss_frame = frame
        side.mode = _HUNT
        side.hunt_skipped = 0
        side.msg_start = None
        side.scan_from = 0

    def _lose_sync(
        self,
        side: _Side,
        ts: int,
        frame: int,
        out: list[object],
        *,
        clear: bool = True,
        lost: bool = True,
    ) -> None:
        """Abandon the message in progress and search for the next start line (``clear``:
        drop the buffered bytes too, they come before a hole; ``lost``: bytes were never
        captured, so whole messages may be missing and responses are paired by position)."""
        msg, ex = side.msg, side.ex
        if msg is not None and ex is not None:
            ex.desynced = True
            if msg.body is not None:
                msg.body.gap(0, ts, frame)
            if side.d == S2C:
                self._try_emit(ex, ts, frame, side.d, out, force=True)
        side.msg = None
        side.ex = None
        if clear:
            side.buf.clear()
        self._start_hunt(side, frame, lost=lost)
        if side.d == C2S:
            self._positions_known = False

    # ------------------------------------------------------------------ messages

    def _head(
        self,
        side: _Side,
        head: bytes,
        start: tuple[int, int] | None,
        now: tuple[int, int],
        out: list[object],
    ) -> None:
        """A complete header section (start line to blank line): the message it starts."""
        ts, frame = now
        lines = head.split(b"\n")
        first = lines[0]
        request = parse_request_line(first) if side.d == C2S else None
        status = parse_status_line(first) if side.d == S2C else None
        if request is None and status is None:
            self._bad(
                side,
                f"not a {'request' if side.d == C2S else 'status'} line: {quote_line(first)}",
                ts,
                frame,
                out,
            )
            return
        msg = _Msg(start or now, now, len(head))
        msg.headers = parse_header_fields(lines[1:])
        if request is not None:
            msg.method, msg.target, msg.version = request
            self._request_head(side, msg, ts, frame, out)
        elif status is not None:
            msg.version, msg.status, msg.reason = status
            self._response_head(side, msg, ts, frame, out)

    def _request_head(self, side: _Side, msg: _Msg, ts: int, frame: int, out: list[object]) -> None:
        self._count += 1
        ex = _Exchange(self._count, self._count if self._positions_known else None)
        ex.request = msg
        up = header_value(msg.headers, "upgrade")
        if msg.method.upper() == "CONNECT":
            ex.upgrade = "connect"
        elif up:
            ex.upgrade = upgrade_token(up)
        self._awaiting.append(ex)
        self._open.append(ex)
        if len(self._awaiting) > _MAX_AWAITING:
            old = self._awaiting.popleft()
            old.unpaired = "evicted"
            self._try_emit(old, ts, frame, None, out, force=True, reason="evicted")
        side.msg, side.ex = msg, ex
        msg.body = open_body(  # None unless a body parser wants requests of this type (DoH)
            msg.headers,
            tcp_stream=self.tcp_stream,
            request_index=ex.index,
            direction=side.d,
            diag=self.diag,
            sse_max_line_bytes=self._sse_max,
            max_decoded_bytes=self._max_decoded,
        )
        framing = body_framing(msg.headers)
        if framing == "chunked":
            msg.chunked = True
            side.mode = _CHUNK_SIZE
        elif framing == "close":
            msg.until_close = True
            side.mode = _BODY_CLOSE
        elif framing is None:
            side.remaining = 0
            self._message_done(side, ts, frame, out)
        elif isinstance(framing, int):
            if framing:
                side.remaining = framing
                side.mode = _BODY_LEN
            else:
                self._message_done(side, ts, frame, out)
        else:
            target = redact_url(msg.target) or ""
            self._bad(side, f"request {msg.method} {target[:60]}: {framing}", ts, frame, out)

    def _response_head(
        self, side: _Side, msg: _Msg, ts: int, frame: int, out: list[object]
    ) -> None:
        status = msg.status
        final = not (100 <= status < 200 and status != 101)
        ex, why = self._match(msg.start_frame, final, ts, frame, out)
        if ex is not None and ex.first_resp is None:
            ex.first_resp = (msg.start_ts, msg.start_frame)
        if not final:
            if ex is not None:
                ex.interim.append(status)
            side.mode = _HEAD
            return
        if ex is None:
            # a response whose request was not seen (or cannot be told)
            ex = self._orphan(msg, why)
        else:
            self._awaiting.popleft()  # _match gave up the requests before it
        ex.response = msg
        side.msg, side.ex = msg, ex
        req = ex.request
        client = self._sides[0]
        if (
            client.mode == _WAIT_UPGRADE
            and client.ex is ex
            and status != 101
            and not (req is not None and req.method.upper() == "CONNECT" and 200 <= status < 300)
        ):
            self._resume(
                client, out
            )  # the upgrade was declined: what the client sent since is HTTP/1.x
        method = req.method.upper() if req is not None else ""
        if status != 101 and status not in (204, 304) and method != "HEAD":
            msg.body = open_body(
                msg.headers,
                tcp_stream=self.tcp_stream,
                request_index=ex.index,
                direction=side.d,
                diag=self.diag,
                sse_max_line_bytes=self._sse_max,
                max_decoded_bytes=self._max_decoded,
            )
        if status == 101 or (method == "CONNECT" and 200 <= status < 300):
            proto = (
                "connect"
                if method == "CONNECT"
                else upgrade_token(header_value(msg.headers, "upgrade") or ex.upgrade or "")
                or "unknown"
            )
            self._switch(side, ex, proto, ts, frame, out)
            return
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._message_done(side, ts, frame, out)
            return
        framing = body_framing(msg.headers)
        if framing == "chunked":
            msg.chunked = True
            side.mode = _CHUNK_SIZE
        elif framing == "close" or framing is None:
            msg.until_close = True
            side.mode = _BODY_CLOSE
        elif isinstance(framing, int):
            if framing:
                side.remaining = framing
                side.mode = _BODY_LEN
            else:
                self._message_done(side, ts, frame, out)
        else:
            self._bad(side, f"response {status}: {framing}", ts, frame, out)

    def _orphan(self, msg: _Msg, why: str | None) -> _Exchange:
        """A new exchange for a response that answers no request seen."""
        self._count += 1
        ex = _Exchange(self._count, None)
        ex.unpaired = why
        ex.first_resp = (msg.start_ts, msg.start_frame)
        self._open.append(ex)
        return ex

    def _match(
        self, start_frame: int, final: bool, ts: int, frame: int, out: list[object]
    ) -> tuple[_Exchange | None, str | None]:
        """The exchange a response whose first byte came in ``start_frame`` answers (None, and
        why, when there is none or it cannot be told). Pairing is by stream position: only
        requests that started before the response are candidates. While nothing was lost the
        oldest candidate is the one (requests are answered in order, RFC 9112 §9.3.2). After
        the server direction lost sync, the number of responses lost is unknown: the newest
        candidate is the one (a keep-alive client sends a request once the previous response
        arrived, so the older candidates' responses were lost; they are given up as
        ``response_not_captured``), unless the client was seen pipelining, where the answer
        is ``ambiguous``. For a ``final`` response the requests before the one chosen are
        emitted unpaired; for an interim one (1xx) nothing changes."""
        aw = self._awaiting
        n = 0
        for cand in aw:
            req = cand.request
            # one packet carries one direction: a request "in the same packet" as the
            # response was released by it from behind a hole, so it came later
            if req is not None and req.start_frame >= start_frame:
                break
            n += 1
        lost_c2s, lost_s2c = self._lost
        if n == 0:
            # (a client gap is often reported only after the response that acknowledged the
            # lost bytes has been parsed, so "nothing was lost" cannot be told apart here)
            why = "ambiguous" if self._ambiguous else "request_not_captured"
            if final:
                # no request outstanding: what comes next is in step again
                self._lost = [False, False]
                self._cut_request = False
            return None, why
        if lost_s2c:
            newest = aw[n - 1].request
            if (
                lost_c2s
                and newest is not None
                and self._c2s_loss_frame is not None
                and newest.start_frame < self._c2s_loss_frame
            ):
                # a request was lost after the newest candidate was sent: this response may
                # answer it (keep-alive: it does, the candidates' responses were lost)
                why = "ambiguous" if self._pipelined else "response_not_captured"
                if final:
                    for _ in range(n):
                        self._give_up(aw[0], why, ts, frame, out)
                    self._lost = [False, False]
                    self._ambiguous = self._pipelined
                return None, "ambiguous" if self._pipelined else "request_not_captured"
            if n > 1 and self._pipelined:
                if final:
                    for _ in range(n):
                        self._give_up(aw[0], "ambiguous", ts, frame, out)
                    self._ambiguous = True
                    self._lost = [False, False]
                return None, "ambiguous"
            if final:
                for _ in range(n - 1):
                    self._give_up(aw[0], "response_not_captured", ts, frame, out)
                self._lost = [False, False]
                self._ambiguous = False
                chosen = aw[0]
                chosen.tentative = True
                self._tentative.append(chosen)
                self._tentative_frame = frame
                return chosen, None
            return aw[n - 1], None
        first = aw[0].request
        after_loss = (
            lost_c2s
            and first is not None
            and self._c2s_loss_frame is not None
            and first.start_frame >= self._c2s_loss_frame
        )
        if after_loss and (self._pipelined or self._cut_request):
            # pipelined requests were lost before this one: the response may answer one
            if final:
                self._give_up(aw[0], "ambiguous", ts, frame, out)
                self._ambiguous = True
            return None, "ambiguous"
        if final:
            if n > 1 and not lost_c2s:
                self._pipelined = True
            if after_loss or not self._pipelined:
                # a keep-alive client sent this request after the previous response: the
                # requests lost before it were answered before it
                self._lost[0] = False
                self._cut_request = False
            self._ambiguous = False
        return aw[0], None

    def _settle(self, out: list[object]) -> None:
        """Tentative pairs stand (no client loss was reported for their packet): emit those
        that were ready."""
        items, self._tentative = self._tentative, []
        for ex in items:
            ex.tentative = False
            if ex.held is not None and not ex.emitted:
                ts, frame, d = ex.held
                self._try_emit(ex, ts, frame, d, out)

    def _unpair_tentative(self, ts: int, frame: int, out: list[object]) -> None:
        """The packet that carried a response paired after a server-side loss also
        acknowledged client bytes never captured: a request lost there was sent before the
        response, so the response may answer it. A keep-alive client sends a request once the
        previous response has arrived: the response answers the lost request, and the
        candidate's own response was lost. Pipelining: which one cannot be told."""
        items, self._tentative = self._tentative, []
        server = self._sides[1]
        for ex in items:
            ex.tentative = False
            if ex.emitted or ex.response is None:
                continue
            msg = ex.response
            o = self._orphan(msg, "ambiguous" if self._pipelined else "request_not_captured")
            o.first_resp, ex.first_resp = ex.first_resp, None
            o.interim, ex.interim = ex.interim, []
            ex.response = None
            if server.ex is ex:
                server.ex = o
            ex.unpaired = "ambiguous" if self._pipelined else "response_not_captured"
            ex.desynced = True
            self._try_emit(ex, ts, frame, None, out, force=True, reason="desynced")
            held, ex.held = ex.held, None
            if held is not None:
                self._try_emit(o, held[0], held[1], held[2], out)

    def _give_up(self, ex: _Exchange, why: str, ts: int, frame: int, out: list[object]) -> None:
        """``ex`` (the oldest awaiting exchange) will get no response: emit it unpaired."""
        self._awaiting.popleft()
        ex.unpaired = why
        ex.desynced = True
        self._try_emit(ex, ts, frame, None, out, force=True, reason="desynced")

    def _message_done(self, side: _Side, ts: int, frame: int, out: list[object]) -> None:
        msg, ex = side.msg, side.ex
        side.msg = None
        side.ex = None
        side.mode = _HEAD
        if msg is None or ex is None:
            return
        msg.complete = True
        msg.end_ts, msg.end_frame = ts, frame
        if msg.body is not None:
            out += msg.body.close(ts, frame)
        if side.d == C2S:
            if ex.switch is not None:
                self._switch_client(ex, out, take_buf=False)
            elif ex.upgrade is not None and ex.response is None:
                side.mode = _WAIT_UPGRADE
                side.ex = ex
        self._try_emit(ex, ts, frame, side.d, out)

    def _try_emit(
        self,
        ex: _Exchange,
        ts: int,
        frame: int,
        d: Direction | None,
        out: list[object],
        *,
        force: bool = False,
        reason: str | None = None,
    ) -> None:
        if ex.emitted:
            return
        req, resp = ex.request, ex.response
        if not force and (
            resp is None or not resp.complete or (req is not None and not req.complete)
        ):
            return
        if ex.tentative:
            if not force:
                ex.held = (ts, frame, d)
                return
            ex.tentative = False
            self._tentative.remove(ex)
        ex.emitted = True
        if ex in self._open:
            self._open.remove(ex)
        if reason is None:
            if ex.desynced:
                reason = "desynced"
            elif resp is not None and resp.complete and (req is None or req.complete):
                reason = "complete"
            else:
                reason = "connection_closed"
        sse = resp.body.sse_count if resp is not None and resp.body is not None else 0
        paired = req is not None and resp is not None
        why: str | None = None
        if not paired:
            why = ex.unpaired
            if why is None:
                if req is None:
                    why = "request_not_captured"
                elif self._s2c_loss_frame is not None and self._s2c_loss_frame >= req.start_frame:
                    why = "response_not_captured"
                else:
                    why = "no_response"
        out.append(
            HttpExchange(
                ts_ns=ts,
                frame=frame,
                direction=d,
                tcp_stream=self.tcp_stream,
                request_index=ex.index,
                position=ex.position,
                request=req.request() if req is not None else None,
                response=resp.response() if resp is not None else None,
                interim_statuses=tuple(ex.interim),
                first_response_ts_ns=ex.first_resp[0] if ex.first_resp else None,
                first_response_frame=ex.first_resp[1] if ex.first_resp else None,
                upgrade=ex.switch,
                sse_events=sse,
                end_reason=reason,
                paired=paired,
                unpaired_reason=why,
            )
        )

    # ------------------------------------------------------------------ protocol switch

    def _switch(
        self, side: _Side, ex: _Exchange, proto: str, ts: int, frame: int, out: list[object]
    ) -> None:
        """A 101 / CONNECT 2xx head was parsed on the server side."""
        msg = side.msg
        ex.switch = proto
        if msg is not None:
            msg.complete = True
            msg.end_ts, msg.end_frame = ts, frame
        side.msg = None
        side.ex = None
        req = ex.request
        inner: StreamObserver | None = None
        make = REGISTRY.upgrade(proto)  # the observer after the switch (registry.UpgradeEntry)
        if make is not None:
            inner = make(UpgradeContext(
                token=proto, tcp_stream=self.tcp_stream, diag=self.diag,
                request=req.request() if req is not None else None,
                response=msg.response() if msg is not None else None,
                websocket_factory=self._ws_factory, sse_max_line_bytes=self._sse_max,
                max_decoded_body_bytes=self._max_decoded,
            ))
        self._inner = inner
        if inner is None:
            self._report(
                side,
                "http1.upgrade_not_followed",
                f"switched to {proto!r} after request {ex.index}; its bytes are only counted",
                ts,
                frame,
            )
        out.append(
            ProtocolSwitched(
                ts_ns=ts,
                frame=frame,
                direction=side.d,
                tcp_stream=self.tcp_stream,
                request_index=ex.index,
                protocol=proto,
                parsed=inner is not None,
            )
        )
        side.mode = _SWITCHED if inner is not None else _TUNNEL
        self._try_emit(ex, ts, frame, side.d, out)
        if req is None or req.complete:
            self._switch_client(ex, out, take_buf=True)
        # else: the client side switches when its request ends (_message_done)

    def _switch_client(self, ex: _Exchange, out: list[object], *, take_buf: bool) -> None:
        """Move the client side to the new protocol. ``take_buf``: its unparsed buffer goes too
        (False when called from inside the client's own parse loop, which hands it over)."""
        client = self._sides[0]
        if client.mode in (_SWITCHED, _TUNNEL):
            return
        items = client.wait_items
        client.wait_items = []
        client.wait_bytes = 0
        rest = bytes(client.buf) if take_buf else b""
        if take_buf:
            client.buf.clear()
        client.mode = _SWITCHED if self._inner is not None else _TUNNEL
        client.msg = None
        client.ex = None
        if rest:
            items.insert(0, (rest, self._last_ts, self._last_frame, client.next_offset - len(rest)))
        if items:
            first = items[0]
            client.switch_offset = first[3]
        else:
            client.switch_offset = client.next_offset
        for data, ts, frame, off in items:
            if isinstance(data, int):
                self._gap(client, data, ts, frame, off, out)
            else:
                self._consume(client, data, ts, frame, off, out)

    def _resume(self, side: _Side, out: list[object]) -> None:
        """The pending upgrade did not happen: parse what was held back as HTTP/1.x."""
        items = side.wait_items
        side.wait_items = []
        side.wait_bytes = 0
        side.mode = _HEAD
        side.ex = None
        for data, ts, frame, off in items:
            if isinstance(data, int):
                self._gap(side, data, ts, frame, off, out)
            else:
                self._consume(side, data, ts, frame, off, out)

    # ------------------------------------------------------------------ end

    def _close_side(
        self, side: _Side, ts: int, frame: int, at_eof: bool, out: list[object]
    ) -> None:
        if side.closed:
            return
        if side.mode == _WAIT_UPGRADE:
            # the connection ended before the upgrade was answered: what was held is HTTP/1.x
            self._resume(side, out)
        side.closed = True
        mode = side.mode
        if mode == _SWITCHED:
            inner = self._inner
            if inner is not None:
                out += inner.close(side.d, ts, frame, at_eof=at_eof)
            return
        msg = side.msg
        if mode == _BODY_CLOSE and msg is not None and not at_eof:
            self._message_done(side, ts, frame, out)
        elif msg is not None and mode in (
            _BODY_LEN,
            _CHUNK_SIZE,
            _CHUNK_DATA,
            _CHUNK_END,
            _TRAILERS,
        ):
            if not at_eof:  # at the end of the capture an unfinished message is no anomaly
                what = "request" if side.d == C2S else "response"
                where = (
                    f"with {side.remaining} body bytes missing"
                    if mode == _BODY_LEN
                    else "inside its chunked body"
                )
                index = side.ex.index if side.ex is not None else "?"
                self._report(
                    side, "http1.truncated_message", f"{what} {index} ended {where}", ts, frame
                )
            if msg.body is not None:
                out += msg.body.close(ts, frame, at_eof=at_eof, complete=False)
        elif msg is not None and msg.body is not None:
            out += msg.body.close(ts, frame, at_eof=at_eof)
        elif mode == _HEAD and side.buf.strip(b"\r\n") and not at_eof:
            what = "request" if side.d == C2S else "response"
            self._report(
                side,
                "http1.truncated_message",
                f"{len(side.buf)} bytes of an unfinished {what} header section",
                ts,
                frame,
            )
        side.buf.clear()

    def _finish(self, ts: int, frame: int, at_eof: bool, out: list[object]) -> None:
        self._finished = True
        self._settle(out)
        for ex in list(self._open):
            reason = (
                "desynced" if ex.desynced else ("open_at_eof" if at_eof else "connection_closed")
            )
            self._try_emit(ex, ts, frame, None, out, force=True, reason=reason)
        self._awaiting.clear()

