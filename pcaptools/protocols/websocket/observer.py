"""The WebSocket observer (RFC 6455) with permessage-deflate (RFC 7692), sans-IO.

:class:`WebSocketObserver` watches both directions of one WebSocket connection, from the
first byte after the handshake, and returns events (:mod:`.events`):

- :class:`WsFrame`: one per frame, on the packet that delivered its last byte (where
  tshark shows ``websocket``); header fields, payload length, close code and reason,
  the payload of control frames;
- :class:`WsMessage`: one per data message (a text/binary frame plus its continuation
  frames), when its last frame ends (or the connection does): fragments, wire and payload
  bytes, decompressed size, UTF-8 validity and a text preview;
- :class:`WsConnectionEnded`: one per connection, when both directions have ended: the
  handshake (:class:`WsHandshake`: subprotocol, extensions, Sec-WebSocket-Accept check)
  and per-direction counters, the close frames and how the connection ended.

:func:`websocket_factory` builds the ``websocket_factory`` that
:class:`~pcaptools.protocols.http1.Http1Observer` calls on ``101 Switching Protocols``.

Bounded work and memory whatever the wire says:

- a frame header is at most 14 bytes; payloads are streamed, never buffered. A payload
  length of up to 2^64 - 1 is counted and skipped; above ``max_frame_bytes`` (default
  :data:`DEFAULT_MAX_FRAME_BYTES`) the frame is reported (``ws.frame_too_large``) and its
  payload is not inspected (no unmasking, preview or decompression);
- control frames keep at most :data:`CONTROL_KEEP_BYTES` of payload (125 is the legal
  maximum);
- a message keeps only counters, the first ``preview_chars`` characters
  (:data:`DEFAULT_PREVIEW_CHARS`), a text message that starts like a JSON object its whole
  text up to ``max_json_bytes`` (:data:`DEFAULT_MAX_JSON_BYTES`; one message per direction
  at a time: realtime event APIs are parsed from it, ``tables.realtime_tables``) and, when
  compressed, a zlib inflater (32 KiB window);
  decompressed output is counted and dropped, and stops at ``max_decompressed_bytes`` per
  message (:data:`DEFAULT_MAX_DECOMPRESSED_BYTES`): a decompression bomb becomes a
  ``ws.decompression_limit`` row, not memory or CPU growth. With context takeover the rest
  of that message is still run through the shared inflater, its output discarded (up to
  :data:`~.inflate.INFLATE_DRAIN_BYTES`), so that the direction's later messages are still
  inflated.

A watcher, not a participant: it never raises on wire data. Frames that break RFC 6455
(wrong masking for the direction, reserved opcodes or bits, long or fragmented control
frames, bad close payloads, continuation without a start...) are reported through the
Diagnostics sink and parsing carries on, because the length field still says where the
next frame starts. Bytes lost inside a payload keep the parser in step; bytes lost
elsewhere make it search for two chained plausible frame headers
(``ws.resynchronised``), or give up on that direction after :data:`HUNT_BUDGET_BYTES`
(``ws.desynced``: bytes still counted, no longer parsed).
"""

from __future__ import annotations

import re
from codecs import utf_8_decode as _utf_8_decode
from collections.abc import Callable
from functools import partial
from typing import Final

from ...diagnostics import Diagnostics
from ...tcp.chunk import StreamChunk
from ...tcp.stream import Direction
from ..http1.events import HttpRequest, HttpResponse
from .events import WsConnectionEnded, WsFrame, WsHandshake, WsMessage, new_event
from .frames import (
    OPCODE_NAMES,
    header_len,
    opcode_name,
    parse_close_payload,
    parse_frame_header,
    plausible_frame,
    unmask,
)
from .handshake import handshake_from_headers, parse_handshake
from .inflate import end_inflate, inflate, start_inflate
from .state import _DESYNCED, _HEADER, _HUNT, _PAYLOAD, _Dir, _Msg

__all__ = [
    "CONTROL_KEEP_BYTES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_JSON_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "HUNT_BUDGET_BYTES",
    "WebSocketObserver",
    "websocket_factory",
]

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT

DEFAULT_MAX_FRAME_BYTES: Final = 64 << 20
"""frames announcing more payload than this are reported (ws.frame_too_large) and skipped"""
DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 64 << 20
"""permessage-deflate output per message beyond this stops decompression (ws.decompression_limit)"""
DEFAULT_PREVIEW_CHARS: Final = 256
"""characters of a text message kept as its preview"""
DEFAULT_MAX_JSON_BYTES: Final = 1 << 20
"""a text message that starts like a JSON object is handed over whole (WsMessage.json_text)
up to this many bytes (decompressed); a longer one only gets its preview"""
CONTROL_KEEP_BYTES: Final = 4096
"""payload bytes of a control frame kept (the legal maximum is 125)"""
HUNT_BUDGET_BYTES: Final = 1 << 20
"""bytes searched for a frame boundary after lost bytes before giving up on a direction"""

_HUNT_WINDOW: Final = 64 << 10
_MESSAGE_TYPES: Final = {1: "text", 2: "binary"}
# WsFrame and WsMessage are built from their field values in this order (one of each per
# frame and message: ``new_event(WsFrame, values)``, one C call); checked at import
_FRAME_FIELDS: Final = (
    "ts_ns", "frame", "direction", "tcp_stream", "stream_id", "index", "start_ts_ns",
    "start_frame", "fin", "rsv", "opcode", "masked", "payload_len", "header_bytes",
    "lost_bytes", "complete", "message_index", "close_code", "close_reason", "control_payload",
)
_MESSAGE_FIELDS: Final = (
    "ts_ns", "frame", "direction", "tcp_stream", "stream_id", "index", "type", "fragments",
    "first_ts_ns", "first_frame", "wire_bytes", "payload_bytes", "lost_bytes", "compressed",
    "decompress", "decompressed_bytes", "complete", "end_reason", "utf8_ok", "preview",
    "preview_truncated", "json_type", "json_text",
)
if WsFrame._fields != _FRAME_FIELDS or WsMessage._fields != _MESSAGE_FIELDS:
    raise TypeError("WsFrame or WsMessage fields changed: update observer.py")  # pragma: no cover
_JSON_TYPE = re.compile(rb'"type"\s*:\s*"([^"\\]{1,100})"')


# --------------------------------------------------------------------------- observer


class WebSocketObserver:
    """Watches both directions of one WebSocket connection. Never raises on wire data.

    ``handshake`` is what the opening handshake negotiated (:func:`~.handshake.parse_handshake`);
    its problems are reported at construction. Implements
    :class:`~pcaptools.tcp.stream.StreamObserver` (``wants_bytes``, ``feed``, ``gap``,
    ``close(..., at_eof=...)``, ``finish``; offsets count from the first byte after the
    handshake); ``close(..., at_eof=True)`` or :meth:`finish` at the end of the capture.
    """

    def __init__(
        self,
        *,
        handshake: WsHandshake | None = None,
        tcp_stream: int = -1,
        stream_id: int | None = None,
        diag: Diagnostics | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
    ) -> None:
        self.tcp_stream = tcp_stream
        self.stream_id = stream_id
        self.diag = diag if diag is not None else Diagnostics()
        self.handshake = handshake if handshake is not None else handshake_from_headers(None, None)
        hs = self.handshake
        self._max_frame = max_frame_bytes
        self._max_out = max_decompressed_bytes
        self._preview_chars = preview_chars
        self._preview_cap = 4 * preview_chars
        self._max_json = max_json_bytes
        self._deflate = hs.permessage_deflate
        self._no_takeover = (hs.client_no_context_takeover, hs.server_no_context_takeover)
        self._rsv_free = bool(hs.other_extensions)
        """an extension pcaptools does not know may use the RSV bits"""
        self._dirs = (_Dir(C2S), _Dir(S2C))
        self._ended = False
        self._first_close: tuple[Direction, int, int] | None = None
        self._last = (hs.response_ts_ns or 0, hs.response_frame or 0)
        for code, detail in hs.problems:
            self.diag.add(
                code, detail, ts_ns=hs.response_ts_ns, frame=hs.response_frame,
                tcp_stream=tcp_stream,
            )

    @property
    def finished(self) -> bool:
        return self._ended

    @property
    def done(self) -> bool:
        """ended: every later call returns nothing (the stream contract's ``done``)"""
        return self._ended

    # ------------------------------------------------------------------ StreamObserver API

    @property
    def wants_bytes(self) -> bool:
        """True until the connection has ended: a desynchronised direction parses no more, but
        its bytes are still counted (``ws_connections.*_skipped_bytes``)."""
        return not self._ended

    def feed(self, chunk: StreamChunk) -> list[object]:
        """Parse the next in-order bytes of one direction; return the events they completed."""
        out: list[object] = []
        st = self._dirs[chunk.direction]
        if self._ended or st.closed:
            return out
        data = chunk.data
        ts, frame = chunk.ts_ns, chunk.frame
        self._last = (ts, frame)
        if chunk.offset != st.next_offset:  # (the first chunk, or bytes missing or repeated)
            hole, data = st.align(chunk.offset, data)
            if hole:
                self._lost(st, st.skip(st.next_offset, hole), ts, frame, out)
        st.next_offset += len(data)
        if data:
            self._consume(st, data, ts, frame, out)
        return out

    def gap(
        self, direction: Direction, offset: int, nbytes: int, ts_ns: int, frame: int
    ) -> list[object]:
        """``nbytes`` of ``direction`` were never captured. Inside a payload the parser stays
        in step; elsewhere it searches for the next frame boundary."""
        out: list[object] = []
        st = self._dirs[direction]
        if nbytes <= 0 or self._ended or st.closed:
            return out
        self._last = (ts_ns, frame)
        lost = st.skip(offset, nbytes)  # (the bytes before the cursor were seen)
        if lost:
            self._lost(st, lost, ts_ns, frame, out)
        return out

    def close(
        self, direction: Direction, ts_ns: int, frame: int, *, at_eof: bool = False
    ) -> list[object]:
        """``direction`` ended (FIN/RST; with ``at_eof`` the capture ended, and both
        directions are closed). A frame or message still open ends here; once both
        directions have ended, :class:`WsConnectionEnded` is returned."""
        out: list[object] = []
        if self._ended:
            return out
        self._last = (ts_ns, frame)
        self._close_dir(self._dirs[direction], ts_ns, frame, at_eof, out)
        if at_eof:
            for st in self._dirs:
                self._close_dir(st, ts_ns, frame, at_eof, out)
        if all(st.closed for st in self._dirs):
            self._end(ts_ns, frame, at_eof, out)
        return out

    def finish(self, ts_ns: int | None = None, frame: int | None = None) -> list[object]:
        """End of capture: close what is still open (``open_at_eof``). Idempotent."""
        if self._ended:
            return []
        return self.close(
            C2S,
            self._last[0] if ts_ns is None else ts_ns,
            self._last[1] if frame is None else frame,
            at_eof=True,
        )

    # ------------------------------------------------------------------ parsing

    def _report(self, st: _Dir, code: str, detail: str, ts: int, frame: int) -> None:
        self.diag.add(
            code, detail, ts_ns=ts, frame=frame, tcp_stream=self.tcp_stream, direction=st.d.label
        )

    def _once(self, st: _Dir, code: str, detail: str, ts: int, frame: int) -> None:
        if code not in st.reported:
            st.reported.add(code)
            self._report(st, code, detail, ts, frame)

    def _report_all(self, st: _Dir, problems: tuple[tuple[str, str], ...]) -> None:
        """(code, detail) found by the permessage-deflate inflater, at the last packet seen."""
        ts, frame = self._last
        for code, detail in problems:
            self._report(st, code, detail, ts, frame)

    def _consume(self, st: _Dir, data: bytes, ts: int, frame: int, out: list[object]) -> None:
        pos = 0
        n = len(data)
        while pos < n:
            mode = st.mode
            if mode == _PAYLOAD:
                take = n - pos
                if take > st.remaining:
                    take = st.remaining
                if not st.skip_payload:
                    self._payload(st, data, pos, take)
                st.pos += take
                pos += take
                st.remaining -= take
                if not st.remaining:
                    self._frame_done(st, ts, frame, out)
            elif mode == _HEADER:
                hb = st.hbuf
                if hb:
                    need = header_len(hb) if len(hb) >= 2 else 0
                    if need == 0:
                        hb.append(data[pos])
                        pos += 1
                        continue
                    take = min(need - len(hb), n - pos)
                    hb += data[pos : pos + take]
                    pos += take
                    if len(hb) < need:
                        continue
                    start = st.hstart or (ts, frame)
                    header = bytes(hb)
                    hb.clear()
                    st.hstart = None
                    self._begin(st, header, 0, start, ts, frame, out)
                else:
                    if n - pos < 2:
                        hb += data[pos:]
                        st.hstart = (ts, frame)
                        break
                    need = header_len(data, pos)
                    if n - pos < need:
                        hb += data[pos:]
                        st.hstart = (ts, frame)
                        break
                    self._begin(st, data, pos, (ts, frame), ts, frame, out)
                    pos += need
            elif mode == _HUNT:
                st.hbuf += data[pos:]
                self._hunt(st, ts, frame, out)
                return
            else:  # _DESYNCED
                st.skipped += n - pos
                return

    def _begin(
        self,
        st: _Dir,
        buf: bytes,
        i: int,
        start: tuple[int, int],
        ts: int,
        frame: int,
        out: list[object],
    ) -> None:
        """A complete frame header at ``buf[i:]``."""
        b0, masked, key, hlen, length, minimal = parse_frame_header(buf, i)
        if masked:
            st.key = key
        st.b0 = b0
        st.masked = masked
        st.hlen = hlen
        st.length = length
        st.remaining = length
        st.pos = 0
        st.lost = 0
        st.start = start
        st.ctrl = None
        st.skip_payload = False
        opcode = b0 & 0x0F
        fin = b0 & 0x80
        rsv = b0 & 0x70
        d = st.d
        # --- checks (reported, never fatal)
        if masked != (d == C2S):
            st.mask_errors += 1
            if d == C2S:
                self._once(st, "ws.unmasked_client_frame",
                           f"client {opcode_name(opcode)} frame without a mask (further ones are "
                           "counted in ws_connections.client_mask_errors)", ts, frame)
            else:
                self._once(st, "ws.masked_server_frame",
                           f"server {opcode_name(opcode)} frame with a mask (further ones are "
                           "counted in ws_connections.server_mask_errors)", ts, frame)
        if opcode not in OPCODE_NAMES:
            self._report(st, "ws.bad_opcode", f"reserved opcode {opcode:#x}", ts, frame)
        if rsv and not self._rsv_free:
            allowed = 0x40 if (self._deflate and opcode in (1, 2)) else 0
            if rsv & ~allowed:
                self._report(
                    st, "ws.reserved_bits",
                    f"RSV bits {rsv >> 4:03b} set on a {opcode_name(opcode)} frame"
                    + ("" if self._deflate else " (no extension negotiated)"), ts, frame,
                )
        if not minimal:
            self._once(st, "ws.non_minimal_length",
                       f"payload length {length} not encoded in the fewest bytes", ts, frame)
        if length > self._max_frame:
            st.skip_payload = True
            self._report(
                st, "ws.frame_too_large",
                f"{opcode_name(opcode)} frame announces {length} payload bytes (limit "
                f"{self._max_frame}); counted and skipped, not inspected", ts, frame,
            )
        if opcode >= 8:
            if length > 125:
                self._report(st, "ws.control_frame_too_long",
                             f"{opcode_name(opcode)} frame with {length} payload bytes (max 125)",
                             ts, frame)
            if not fin:
                self._report(st, "ws.fragmented_control_frame",
                             f"{opcode_name(opcode)} frame without FIN", ts, frame)
            if opcode in (8, 9, 10):
                st.ctrl = bytearray()
        elif opcode <= 2:
            if st.sent_close:
                self._once(st, "ws.frame_after_close",
                           f"{opcode_name(opcode)} frame after this side sent Close", ts, frame)
            m = st.msg
            if opcode == 0:
                if m is None:
                    self._report(st, "ws.bad_fragmentation",
                                 "continuation frame without a message in progress", ts, frame)
                    m = self._new_message(st, 0, start)
            else:
                if m is not None:
                    self._report(
                        st, "ws.bad_fragmentation",
                        f"{opcode_name(opcode)} frame while message {m.index} waits for its "
                        "final fragment", ts, frame,
                    )
                    self._end_message(st, m, ts, frame, "interrupted", out)
                m = self._new_message(st, opcode, start)
                if rsv & 0x40 and self._deflate:
                    start_inflate(st, m, self._no_takeover[st.d])
            m.fragments += 1
            m.wire += st.hlen + length
            m.payload += length
            if st.skip_payload:
                self._taint(st, m)
        if length == 0:
            self._frame_done(st, ts, frame, out)
        else:
            st.mode = _PAYLOAD

    def _new_message(self, st: _Dir, opcode: int, start: tuple[int, int]) -> _Msg:
        m = _Msg(st.messages, opcode, start, self._preview_cap, self._max_json)
        st.messages += 1
        st.msg = m
        return m

    def _taint(self, st: _Dir, m: _Msg) -> None:
        """Part of the message's payload is unknown: no UTF-8 verdict, no decompression."""
        m.uninspected = True
        m.utf8 = None
        m.preview_cap = len(m.preview)  # the preview ends at the first unknown byte
        m.body = None
        if m.compressed and m.z is not None:
            m.z = None
            if m.zdrain < 0:  # (a message past its limit stays "limit")
                m.decompress = "skipped"
            if not self._no_takeover[st.d]:
                st.z = None
                st.z_broken = True

    def _payload(self, st: _Dir, data: bytes, pos: int, take: int) -> None:
        if not take:
            return
        ctrl = st.ctrl
        if ctrl is not None:
            room = CONTROL_KEEP_BYTES - len(ctrl)
            if room > 0:
                piece = data[pos : pos + min(take, room)]
                ctrl += unmask(piece, st.key, st.pos) if st.masked else piece
            return
        m = st.msg
        if m is None or (st.b0 & 0x0F) > 2 or not m.wants_content():
            return
        piece = data[pos : pos + take]
        if st.masked:
            piece = unmask(piece, st.key, st.pos)
        if m.compressed:
            problems = inflate(st, m, piece, self._max_out, self._no_takeover[st.d])
            if problems:
                self._report_all(st, problems)
        else:
            m.add_content(piece)

    def _frame_done(self, st: _Dir, ts: int, frame: int, out: list[object],
                    complete: bool = True) -> None:
        b0 = st.b0
        opcode = b0 & 0x0F
        fin = bool(b0 & 0x80)
        length = st.length
        close_code: int | None = None
        close_reason: str | None = None
        ctrl_payload: bytes | None = None
        msg_index: int | None = None
        ctrl = st.ctrl
        if ctrl is not None:
            p = bytes(ctrl)
            ctrl_payload = p[:125]
            if opcode == 8:
                close_code, close_reason = self._close_payload(st, p, length, ts, frame)
                if not st.sent_close:
                    st.sent_close = True
                    st.close_code, st.close_reason = close_code, close_reason
                    st.close_frame, st.close_ts = frame, ts
                    if self._first_close is None:
                        self._first_close = (st.d, frame, ts)
            elif opcode == 9:
                st.pings += 1
            else:
                st.pongs += 1
        # a frame cut off by the end of the stream counts what was sent (its announced
        # length may be anything up to 2^64 - 1)
        counted = length if complete else st.pos
        m = st.msg
        if opcode <= 2 and m is not None:
            msg_index = m.index
            m.lost += st.lost
            if not complete:
                m.payload -= length - counted
                m.wire -= length - counted
        st.frames += 1
        st.payload_bytes += counted
        st.wire_bytes += st.hlen + counted
        st.lost_bytes += st.lost
        start_ts, start_frame = st.start
        out.append(new_event(WsFrame, (
            ts, frame, st.d, self.tcp_stream, self.stream_id, st.frames - 1, start_ts,
            start_frame, fin, (b0 >> 4) & 7, opcode, st.masked, length, st.hlen, st.lost,
            complete, msg_index, close_code, close_reason, ctrl_payload,
        )))
        st.mode = _HEADER
        st.ctrl = None
        if complete and opcode <= 2 and fin and m is not None:
            self._end_message(st, m, ts, frame, "fin", out)

    def _close_payload(
        self, st: _Dir, p: bytes, length: int, ts: int, frame: int
    ) -> tuple[int | None, str | None]:
        code, reason, problems = parse_close_payload(p, length, st.lost)
        for detail in problems:
            self._report(st, "ws.bad_close_payload", detail, ts, frame)
        return code, reason

    def _end_message(
        self, st: _Dir, m: _Msg, ts: int, frame: int, reason: str, out: list[object]
    ) -> None:
        st.msg = None
        complete = reason == "fin"
        if m.compressed:
            problems = end_inflate(st, m, complete, self._max_out, self._no_takeover[st.d])
            if problems:
                self._report_all(st, problems)
        utf8_ok = m.utf8_ok
        if m.utf8 is not None:
            utf8_ok = m.utf8_final() if complete and not m.lost and not m.uninspected else None
        if utf8_ok is False:
            self._report(st, "ws.invalid_utf8", f"text message {m.index} is not valid UTF-8",
                         ts, frame)
        preview: str | None = None
        truncated = False
        json_type: str | None = None
        if m.opcode == 1:
            raw = bytes(m.preview)
            # (what a fresh incremental decoder's decode(raw, False) returns: an incomplete
            # sequence at the end is left out, not replaced)
            text = _utf_8_decode(raw, "replace", False)[0]
            truncated = (len(text) > self._preview_chars or m.content_bytes > len(raw)
                         or m.uninspected)
            preview = text[: self._preview_chars]
            jm = _JSON_TYPE.search(raw)
            if jm is not None:
                json_type = jm.group(1).decode("utf-8", "replace")
        body = m.body
        json_text = (bytes(body) if body is not None and body and utf8_ok
                     and (not m.compressed or m.decompress == "ok") else None)
        decompressed = m.zout if m.compressed and m.zout else None
        if m.compressed and m.decompress == "ok":
            decompressed = m.zout
        out.append(new_event(WsMessage, (
            ts, frame, st.d, self.tcp_stream, self.stream_id, m.index,
            _MESSAGE_TYPES.get(m.opcode, "unknown"), m.fragments, m.first_ts, m.first_frame,
            m.wire, m.payload, m.lost, m.compressed, m.decompress, decompressed, complete,
            reason, utf8_ok, preview, truncated, json_type, json_text,
        )))

    # ------------------------------------------------------------------ lost bytes

    def _lost(self, st: _Dir, nbytes: int, ts: int, frame: int, out: list[object]) -> None:
        mode = st.mode
        if mode == _DESYNCED:
            st.skipped += nbytes
            return
        if mode == _PAYLOAD:
            m = st.msg
            if m is not None and (st.b0 & 0x0F) <= 2:
                self._taint(st, m)
            if nbytes <= st.remaining:
                st.lost += nbytes
                st.remaining -= nbytes
                st.pos += nbytes
                if not st.remaining:
                    self._frame_done(st, ts, frame, out)
                return
            nbytes -= st.remaining
            st.lost += st.remaining
            st.remaining = 0
            self._frame_done(st, ts, frame, out)
        elif mode == _HEADER and st.hbuf:
            st.skipped += len(st.hbuf)
            st.hbuf.clear()
            st.hstart = None
        elif mode == _HUNT:
            st.skipped += len(st.hbuf)
            st.hunt_skipped += len(st.hbuf)
            st.hunt_total += len(st.hbuf)
            st.hbuf.clear()
            st.scan_from = 0
        # the bytes after the hole start at an unknown frame boundary
        m = st.msg
        if m is not None:
            self._end_message(st, m, ts, frame, "lost_sync", out)
        st.skipped += nbytes
        st.hunt_skipped += nbytes
        st.mode = _HUNT
        st.scan_from = 0

    def _hunt(self, st: _Dir, ts: int, frame: int, out: list[object]) -> None:
        buf = st.hbuf
        n = len(buf)
        i = st.scan_from
        found = -1
        masked = st.d == C2S
        if st.mask_errors * 2 > st.frames:
            masked = not masked  # this side gets masking wrong: expect what it does
        deflate = self._deflate
        while i < n:
            flen = plausible_frame(buf, i, n, masked, deflate)
            if flen == 0:
                i += 1
                continue
            if flen < 0:
                break  # header incomplete: wait for more bytes
            nxt = i + flen
            if nxt == n:
                found = i
                break
            if nxt < n:
                v = plausible_frame(buf, nxt, n, masked, deflate)
                if v != 0:
                    found = i  # the next header is plausible (or starts plausibly)
                    break
                i += 1
                continue
            # the frame extends beyond what is buffered
            if flen > _HUNT_WINDOW:
                found = i
            break
        if found >= 0:
            skipped = found
            st.skipped += skipped
            st.hunt_skipped += skipped
            self._report(
                st, "ws.resynchronised",
                f"frame boundary found after skipping {st.hunt_skipped} bytes", ts, frame,
            )
            st.hunt_skipped = 0
            st.hunt_total = 0
            st.scan_from = 0
            rest = bytes(buf[found:])
            buf.clear()
            st.mode = _HEADER
            if rest:
                self._consume(st, rest, ts, frame, out)
            return
        # drop what can no longer start a frame, keep at most the search window
        keep_from = max(i, n - _HUNT_WINDOW)
        if keep_from > 0:
            st.skipped += keep_from
            st.hunt_skipped += keep_from
            st.hunt_total += keep_from
            del buf[:keep_from]
        st.scan_from = max(0, i - keep_from)
        if st.hunt_total + len(buf) > HUNT_BUDGET_BYTES:
            st.skipped += len(buf)
            buf.clear()
            st.mode = _DESYNCED
            self._report(
                st, "ws.desynced",
                f"no frame boundary found in {HUNT_BUDGET_BYTES} bytes after lost data; "
                "the rest of this direction is only counted", ts, frame,
            )

    # ------------------------------------------------------------------ end

    def _close_dir(self, st: _Dir, ts: int, frame: int, at_eof: bool, out: list[object]) -> None:
        if st.closed:
            return
        st.closed = True
        if st.mode == _PAYLOAD:
            if not at_eof:
                self._report(
                    st, "ws.truncated_frame",
                    f"the stream ended {st.remaining} bytes before the end of a "
                    f"{opcode_name(st.b0 & 0x0F)} frame", ts, frame,
                )
            m = st.msg
            if m is not None and (st.b0 & 0x0F) <= 2:
                self._taint(st, m)
            st.remaining = 0
            self._frame_done(st, ts, frame, out, complete=False)
        elif st.mode == _HEADER and st.hbuf:
            if not at_eof:
                self._report(st, "ws.truncated_frame",
                             f"the stream ended inside a frame header ({len(st.hbuf)} bytes)",
                             ts, frame)
            st.skipped += len(st.hbuf)
            st.hbuf.clear()
        elif st.mode == _HUNT:
            st.skipped += len(st.hbuf)
            st.hbuf.clear()
        m = st.msg
        if m is not None:
            self._end_message(st, m, ts, frame, "open_at_eof" if at_eof else "connection_closed",
                              out)

    def _end(self, ts: int, frame: int, at_eof: bool, out: list[object]) -> None:
        self._ended = True
        c, s = self._dirs
        desynced = c.mode == _DESYNCED or s.mode == _DESYNCED
        if c.sent_close and s.sent_close:
            reason = "close_handshake"
        elif c.sent_close or s.sent_close:
            reason = "close_unanswered"
        elif desynced:
            reason = "desynced"
        elif at_eof:
            reason = "open_at_eof"
        else:
            reason = "no_close"
        fc = self._first_close
        out.append(
            WsConnectionEnded(
                ts_ns=ts,
                frame=frame,
                tcp_stream=self.tcp_stream,
                stream_id=self.stream_id,
                handshake=self.handshake,
                client_frames=c.frames,
                server_frames=s.frames,
                client_messages=c.messages,
                server_messages=s.messages,
                client_payload_bytes=c.payload_bytes,
                server_payload_bytes=s.payload_bytes,
                client_wire_bytes=c.wire_bytes,
                server_wire_bytes=s.wire_bytes,
                client_pings=c.pings,
                server_pings=s.pings,
                client_pongs=c.pongs,
                server_pongs=s.pongs,
                client_mask_errors=c.mask_errors,
                server_mask_errors=s.mask_errors,
                client_lost_bytes=c.lost_bytes,
                server_lost_bytes=s.lost_bytes,
                client_skipped_bytes=c.skipped,
                server_skipped_bytes=s.skipped,
                close_by=fc[0] if fc else None,
                close_frame=fc[1] if fc else None,
                close_ts_ns=fc[2] if fc else None,
                client_close_code=c.close_code,
                client_close_reason=c.close_reason,
                server_close_code=s.close_code,
                server_close_reason=s.close_reason,
                client_close_frame=c.close_frame,
                server_close_frame=s.close_frame,
                end_reason=reason,
                desynced=desynced,
            )
        )


# --------------------------------------------------------------------------- wiring


def websocket_factory(
    *,
    tcp_stream: int,
    diag: Diagnostics,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
) -> Callable[[HttpRequest | None, HttpResponse], WebSocketObserver]:
    """The ``websocket_factory`` of :class:`~pcaptools.protocols.http1.Http1Observer`: on a
    ``101`` to ``Upgrade: websocket`` it checks the handshake and returns the observer of
    the rest of the connection. (A partial of a module function, not a closure: a closure
    cannot be packed, :mod:`pcaptools.tcp.packing`.)"""
    return partial(_upgrade, tcp_stream=tcp_stream, diag=diag, max_frame_bytes=max_frame_bytes,
                   max_decompressed_bytes=max_decompressed_bytes, preview_chars=preview_chars,
                   max_json_bytes=max_json_bytes)


def _upgrade(request: HttpRequest | None, response: HttpResponse, *, tcp_stream: int,
             diag: Diagnostics, max_frame_bytes: int, max_decompressed_bytes: int,
             preview_chars: int, max_json_bytes: int) -> WebSocketObserver:
    return WebSocketObserver(
        handshake=parse_handshake(request, response),
        tcp_stream=tcp_stream,
        diag=diag,
        max_frame_bytes=max_frame_bytes,
        max_decompressed_bytes=max_decompressed_bytes,
        preview_chars=preview_chars,
        max_json_bytes=max_json_bytes,
    )
