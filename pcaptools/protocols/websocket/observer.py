"""WebSocket observer (RFC 6455) with permessage-deflate (RFC 7692), sans-IO.

:class:`WebSocketObserver` watches both directions of one WebSocket connection, from the
first byte after the handshake, and returns events:

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
  (:data:`DEFAULT_PREVIEW_CHARS`) and, when compressed, a zlib inflater (32 KiB window);
  decompressed output is counted and dropped, and stops at ``max_decompressed_bytes`` per
  message (:data:`DEFAULT_MAX_DECOMPRESSED_BYTES`): a decompression bomb becomes a
  ``ws.decompression_limit`` row, not memory or CPU growth. With context takeover the rest
  of that message is still run through the shared inflater, its output discarded (up to
  :data:`INFLATE_DRAIN_BYTES`), so that the direction's later messages are still inflated.

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

import base64
import binascii
import codecs
import hashlib
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ...diagnostics import Diagnostics
from ...redaction import redact_subprotocols
from .._base import Direction, StreamChunk
from ..http1 import HttpRequest, HttpResponse

__all__ = [
    "CONTROL_KEEP_BYTES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "HUNT_BUDGET_BYTES",
    "OPCODE_NAMES",
    "WebSocketObserver",
    "WsConnectionEnded",
    "WsFrame",
    "WsHandshake",
    "WsMessage",
    "accept_for_key",
    "handshake_from_headers",
    "opcode_name",
    "parse_extensions",
    "parse_handshake",
    "valid_close_code",
    "websocket_factory",
]

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT

Headers = tuple[tuple[str, str], ...]

#: frame opcode -> name (others are ``reserved``)
OPCODE_NAMES: Final = {
    0: "continuation",
    1: "text",
    2: "binary",
    8: "close",
    9: "ping",
    10: "pong",
}

DEFAULT_MAX_FRAME_BYTES: Final = 64 << 20
"""frames announcing more payload than this are reported (ws.frame_too_large) and skipped"""
DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 64 << 20
"""permessage-deflate output per message beyond this stops decompression (ws.decompression_limit)"""
DEFAULT_PREVIEW_CHARS: Final = 256
"""characters of a text message kept as its preview"""
CONTROL_KEEP_BYTES: Final = 4096
"""payload bytes of a control frame kept (the legal maximum is 125)"""
INFLATE_DRAIN_BYTES: Final = 256 << 20
"""with context takeover, output of a message past its decompression limit that is still
inflated (and discarded) to keep the shared context for the later messages; beyond it the
context is given up (the later compressed messages of that direction are ``skipped``)"""
HUNT_BUDGET_BYTES: Final = 1 << 20
"""bytes searched for a frame boundary after lost bytes before giving up on a direction"""

_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_TAIL: Final = b"\x00\x00\xff\xff"
_HUNT_WINDOW: Final = 64 << 10
_HUNT_MAX_FRAME: Final = 16 << 20
_INFLATE_STEP: Final = 1 << 16
_INT64_MAX: Final = (1 << 63) - 1
_JSON_TYPE = re.compile(rb'"type"\s*:\s*"([^"\\]{1,100})"')
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")

# parser modes of one direction
_HEADER, _PAYLOAD, _HUNT, _DESYNCED = range(4)


def opcode_name(opcode: int) -> str:
    """``text``, ``binary``, ``continuation``, ``close``, ``ping``, ``pong`` or ``reserved``."""
    return OPCODE_NAMES.get(opcode, "reserved")


def accept_for_key(key: str) -> str:
    """The Sec-WebSocket-Accept value a server must answer to ``key`` (RFC 6455 §4.2.2)."""
    digest = hashlib.sha1(key.strip().encode("latin-1", "replace") + _GUID).digest()
    return base64.b64encode(digest).decode("ascii")


def valid_close_code(code: int) -> bool:
    """A status code an endpoint may send in a Close frame (RFC 6455 §7.4, IANA registry:
    1000-1003, 1007-1014, 3000-4999)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


def parse_extensions(value: str | None) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """``Sec-WebSocket-Extensions`` -> ``[(name, [(param, value or None), ...]), ...]``
    (names and parameter names lower-cased, quoted values unquoted). Never raises; empty
    elements are skipped."""
    out: list[tuple[str, list[tuple[str, str | None]]]] = []
    if not value:
        return out
    for ext in _split_outside_quotes(value, ","):
        parts = [p.strip() for p in _split_outside_quotes(ext, ";")]
        if not parts or not parts[0]:
            continue
        params: list[tuple[str, str | None]] = []
        for p in parts[1:]:
            if not p:
                continue
            name, eq, v = p.partition("=")
            val: str | None = v.strip() if eq else None
            if val is not None and len(val) >= 2 and val[0] == val[-1] == '"':
                val = val[1:-1]
            params.append((name.strip().lower(), val))
        out.append((parts[0].lower(), params))
    return out


def _split_outside_quotes(s: str, sep: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in s:
        if ch == '"':
            quoted = not quoted
        if ch == sep and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _unmask(data: bytes, key: bytes, pos: int) -> bytes:
    """``data`` XOR the masking key, ``data`` starting ``pos`` bytes into the payload."""
    n = len(data)
    if not n:
        return b""
    r = pos & 3
    if r:
        key = key[r:] + key[:r]
    k = (key * ((n >> 2) + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


# --------------------------------------------------------------------------- handshake


@dataclass(frozen=True, slots=True, kw_only=True)
class WsHandshake:
    """What the opening handshake negotiated, and whether it was consistent."""

    request_frame: int | None
    """packet that completed the Upgrade request (None: request not captured)"""
    request_ts_ns: int | None
    response_frame: int | None
    """packet that completed the ``101`` response (HTTP/2: the 200 HEADERS)"""
    response_ts_ns: int | None
    http_version: str
    """``1.1`` (Upgrade + 101) or ``2`` (RFC 8441 extended CONNECT)"""
    path: str | None
    host: str | None
    origin: str | None
    version: str | None
    """Sec-WebSocket-Version of the request (13)"""
    key: str | None
    accept: str | None
    accept_ok: bool | None
    """Sec-WebSocket-Accept matches the key; None when there is nothing to check"""
    offered_protocols: str | None
    """Sec-WebSocket-Protocol of the request, as sent"""
    protocol: str | None
    """subprotocol the server selected"""
    offered_extensions: str | None
    """Sec-WebSocket-Extensions of the request, as sent"""
    extensions: str | None
    """Sec-WebSocket-Extensions of the response, as sent (what is in effect)"""
    permessage_deflate: bool
    client_no_context_takeover: bool
    """the client resets its compressor after each message"""
    server_no_context_takeover: bool
    client_max_window_bits: int | None
    server_max_window_bits: int | None
    other_extensions: tuple[str, ...]
    """accepted extensions pcaptools does not decode (their RSV bits are not reported)"""
    problems: tuple[tuple[str, str], ...]
    """(anomaly code, detail) found in the handshake"""


def _joined(headers: Headers | None, name: str) -> str | None:
    if headers is None:
        return None
    vals = [v for k, v in headers if k == name]
    return ", ".join(vals) if vals else None


def _tokens(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def handshake_from_headers(
    request_headers: Headers | None,
    response_headers: Headers | None,
    *,
    path: str | None = None,
    http_version: str = "1.1",
    request_frame: int | None = None,
    request_ts_ns: int | None = None,
    response_frame: int | None = None,
    response_ts_ns: int | None = None,
) -> WsHandshake:
    """The handshake facts from lower-cased header lists (either may be missing). Never
    raises; inconsistencies are listed in ``problems``. Over HTTP/2 (``http_version="2"``)
    there is no key/accept pair (RFC 8441 §5)."""
    problems: list[tuple[str, str]] = []

    def bad(detail: str) -> None:
        problems.append(("ws.bad_handshake", detail))

    req, resp = request_headers, response_headers
    key = _joined(req, "sec-websocket-key")
    accept = _joined(resp, "sec-websocket-accept")
    version = _joined(req, "sec-websocket-version")
    accept_ok: bool | None = None
    if http_version != "2":
        if req is not None:
            if key is None:
                bad("the request has no Sec-WebSocket-Key")
            else:
                try:
                    raw = base64.b64decode(key.strip(), validate=True)
                except (binascii.Error, ValueError):
                    raw = b""
                if len(raw) != 16:
                    bad(f"Sec-WebSocket-Key {key[:40]!r} is not 16 bytes in base64")
        if key is not None and resp is not None:
            expected = accept_for_key(key)
            accept_ok = accept is not None and accept.strip() == expected
            if not accept_ok:
                problems.append(
                    (
                        "ws.accept_mismatch",
                        f"Sec-WebSocket-Accept {accept!r} for key {key!r}; expected {expected!r}",
                    )
                )
    if req is not None and version is not None and version.strip() != "13":
        bad(f"Sec-WebSocket-Version {version[:20]!r} (not 13)")
    offered_protocols = _joined(req, "sec-websocket-protocol")
    protocol = _joined(resp, "sec-websocket-protocol")
    if protocol is not None and req is not None and protocol.strip() not in _tokens(
        offered_protocols
    ):
        # (a warning never quotes a credential: some APIs send tokens as subprotocols)
        shown = redact_subprotocols(protocol) or ""
        bad(f"the server selected subprotocol {shown[:40]!r}, not offered")
    offered_ext = _joined(req, "sec-websocket-extensions")
    ext = _joined(resp, "sec-websocket-extensions")
    offered_names = {name for name, _ in parse_extensions(offered_ext)}
    pmd = False
    cnct = snct = False
    cmwb: int | None = None
    smwb: int | None = None
    others: list[str] = []
    for name, params in parse_extensions(ext):
        if req is not None and name not in offered_names:
            bad(f"the server accepted extension {name!r}, not offered")
        if name != "permessage-deflate":
            others.append(name)
            continue
        if pmd:
            bad("permessage-deflate accepted twice")
            continue
        pmd = True
        seen: set[str] = set()
        for pname, pval in params:
            if pname in seen:
                bad(f"permessage-deflate parameter {pname} repeated")
            seen.add(pname)
            if pname == "client_no_context_takeover" and pval is None:
                cnct = True
            elif pname == "server_no_context_takeover" and pval is None:
                snct = True
            elif pname in ("client_max_window_bits", "server_max_window_bits"):
                bits = int(pval) if pval is not None and pval.isascii() and pval.isdigit() else None
                if bits is None or not 8 <= bits <= 15:
                    bad(f"permessage-deflate {pname}={pval!r} (must be 8..15)")
                elif pname == "client_max_window_bits":
                    cmwb = bits
                else:
                    smwb = bits
            else:
                bad(f"unknown permessage-deflate parameter {pname!r}")
    return WsHandshake(
        request_frame=request_frame,
        request_ts_ns=request_ts_ns,
        response_frame=response_frame,
        response_ts_ns=response_ts_ns,
        http_version=http_version,
        path=path,
        host=_joined(req, "host") if http_version != "2" else _joined(req, ":authority"),
        origin=_joined(req, "origin"),
        version=version,
        key=key,
        accept=accept,
        accept_ok=accept_ok,
        offered_protocols=offered_protocols,
        protocol=protocol,
        offered_extensions=offered_ext,
        extensions=ext,
        permessage_deflate=pmd,
        client_no_context_takeover=cnct,
        server_no_context_takeover=snct,
        client_max_window_bits=cmwb,
        server_max_window_bits=smwb,
        other_extensions=tuple(others),
        problems=tuple(problems),
    )


def parse_handshake(request: HttpRequest | None, response: HttpResponse | None) -> WsHandshake:
    """:func:`handshake_from_headers` for an HTTP/1.1 Upgrade request and its 101."""
    resp_frame = resp_ts = None
    if response is not None:
        resp_frame = response.end_frame if response.end_frame is not None else response.head_frame
        resp_ts = response.end_ts_ns if response.end_ts_ns is not None else response.head_ts_ns
    return handshake_from_headers(
        request.headers if request is not None else None,
        response.headers if response is not None else None,
        path=request.target if request is not None else None,
        http_version="1.1",
        request_frame=request.end_frame if request is not None else None,
        request_ts_ns=request.end_ts_ns if request is not None else None,
        response_frame=resp_frame,
        response_ts_ns=resp_ts,
    )


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True, kw_only=True)
class WsFrame:
    """One WebSocket frame."""

    ts_ns: int
    frame: int
    """packet that delivered the frame's last byte (tshark shows the frame there)"""
    direction: Direction
    tcp_stream: int
    stream_id: int | None
    """HTTP/2 stream (RFC 8441); None over HTTP/1.1"""
    index: int
    """0-based number of the frame in its direction"""
    start_ts_ns: int
    start_frame: int
    """packet that delivered the frame's first byte"""
    fin: bool
    rsv: int
    """the three reserved bits, RSV1 = 4, RSV2 = 2, RSV3 = 1 (tshark's websocket.rsv)"""
    opcode: int
    masked: bool
    payload_len: int
    """announced payload length (may exceed what was captured; up to 2^64 - 1)"""
    header_bytes: int
    """2 + extended length (0, 2 or 8) + masking key (0 or 4)"""
    lost_bytes: int
    """payload bytes never captured (gaps inside the frame)"""
    complete: bool
    """False when the connection (or capture) ended inside the frame"""
    message_index: int | None
    """the data message this frame belongs to (WsMessage.index); None for control frames"""
    close_code: int | None
    close_reason: str | None
    """Close reason, UTF-8 (invalid bytes replaced)"""
    control_payload: bytes | None
    """unmasked payload of a control frame (first 125 bytes)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class WsMessage:
    """One data message: a text or binary frame and its continuation frames."""

    ts_ns: int
    frame: int
    """packet that completed the message (its last frame)"""
    direction: Direction
    tcp_stream: int
    stream_id: int | None
    index: int
    """0-based number of the message in its direction"""
    type: str
    """text, binary, or unknown (continuation frames whose start was not seen)"""
    fragments: int
    first_ts_ns: int
    first_frame: int
    """packet that delivered the first byte of the first frame"""
    wire_bytes: int
    """frame headers + payloads"""
    payload_bytes: int
    """payload bytes (compressed size for compressed messages); a frame cut off by the end of
    the connection counts the bytes that were sent, not its announced length"""
    lost_bytes: int
    compressed: bool
    """RSV1 on the first frame with permessage-deflate negotiated"""
    decompress: str | None
    """None (not compressed), ok, failed, limit (stopped at the cap), skipped (bytes lost or
    not inspected, or an earlier failure broke the shared compression context),
    incomplete (the message never ended)"""
    decompressed_bytes: int | None
    """bytes inflated (for ``limit``: the cap plus one; None when nothing was inflated)"""
    complete: bool
    end_reason: str
    """fin, interrupted (a new message started before FIN), connection_closed,
    open_at_eof, lost_sync (bytes lost between frames)"""
    utf8_ok: bool | None
    """text messages: valid UTF-8; None when not text or not fully seen"""
    preview: str | None
    """text messages: the first characters (invalid UTF-8 replaced)"""
    preview_truncated: bool
    json_type: str | None
    """value of the first ``"type": "..."`` in the preview (realtime APIs name events so)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class WsConnectionEnded:
    """A WebSocket connection is over (both directions ended, or the capture did)."""

    ts_ns: int
    frame: int
    tcp_stream: int
    stream_id: int | None
    handshake: WsHandshake
    client_frames: int
    server_frames: int
    client_messages: int
    server_messages: int
    client_payload_bytes: int
    server_payload_bytes: int
    client_wire_bytes: int
    server_wire_bytes: int
    client_pings: int
    server_pings: int
    client_pongs: int
    server_pongs: int
    client_mask_errors: int
    """client frames without a mask (RFC 6455 §5.1: the client MUST mask)"""
    server_mask_errors: int
    """server frames with a mask"""
    client_lost_bytes: int
    server_lost_bytes: int
    client_skipped_bytes: int
    """bytes not parsed (searched for a frame boundary, or after the direction desynced)"""
    server_skipped_bytes: int
    close_by: Direction | None
    """who sent the first Close frame"""
    close_frame: int | None
    close_ts_ns: int | None
    client_close_code: int | None
    client_close_reason: str | None
    server_close_code: int | None
    server_close_reason: str | None
    client_close_frame: int | None
    server_close_frame: int | None
    end_reason: str
    """close_handshake (both sent Close), close_unanswered (one side only), no_close
    (the TCP connection ended without Close frames), open_at_eof, desynced"""
    desynced: bool


# --------------------------------------------------------------------------- state


class _Msg:
    __slots__ = (
        "compressed",
        "content_bytes",
        "decompress",
        "first_frame",
        "first_ts",
        "fragments",
        "index",
        "lost",
        "opcode",
        "payload",
        "preview",
        "preview_cap",
        "uninspected",
        "utf8",
        "utf8_ok",
        "wire",
        "z",
        "zdrain",
        "zout",
    )

    def __init__(self, index: int, opcode: int, first: tuple[int, int], preview_cap: int) -> None:
        self.index = index
        self.opcode = opcode
        self.first_ts, self.first_frame = first
        self.fragments = 0
        self.wire = 0
        self.payload = 0
        self.lost = 0
        self.compressed = False
        self.decompress: str | None = None
        self.z: zlib._Decompress | None = None
        self.zout = 0
        self.zdrain = -1
        """past the decompression limit with a shared context: output inflated and discarded
        (-1: not draining)"""
        self.content_bytes = 0
        self.uninspected = False
        self.preview = bytearray()
        self.preview_cap = preview_cap if opcode == 1 else 0
        self.utf8: codecs.IncrementalDecoder | None = _Utf8Decoder() if opcode == 1 else None
        self.utf8_ok: bool | None = None

    def wants_content(self) -> bool:
        if self.compressed:
            return self.z is not None
        return self.utf8 is not None or len(self.preview) < self.preview_cap


class _Dir:
    __slots__ = (
        "b0",
        "close_code",
        "close_frame",
        "close_reason",
        "close_ts",
        "closed",
        "ctrl",
        "d",
        "frames",
        "hbuf",
        "hlen",
        "hstart",
        "hunt_skipped",
        "hunt_total",
        "key",
        "length",
        "lost",
        "lost_bytes",
        "mask_errors",
        "masked",
        "messages",
        "mode",
        "msg",
        "next_offset",
        "payload_bytes",
        "pings",
        "pongs",
        "pos",
        "remaining",
        "reported",
        "scan_from",
        "sent_close",
        "skip",
        "skipped",
        "start",
        "started",
        "wire_bytes",
        "z",
        "z_broken",
    )

    def __init__(self, d: Direction) -> None:
        self.d = d
        self.mode = _HEADER
        self.hbuf = bytearray()
        self.hstart: tuple[int, int] | None = None
        self.started = False
        self.closed = False
        self.next_offset = 0
        # current frame
        self.b0 = 0
        self.masked = False
        self.key = b""
        self.length = 0
        self.hlen = 0
        self.remaining = 0
        self.pos = 0
        self.lost = 0
        self.skip = False
        self.start = (0, 0)
        self.ctrl: bytearray | None = None
        self.msg: _Msg | None = None
        # counters
        self.frames = 0
        self.messages = 0
        self.payload_bytes = 0
        self.wire_bytes = 0
        self.pings = 0
        self.pongs = 0
        self.mask_errors = 0
        self.lost_bytes = 0
        self.skipped = 0
        self.reported: set[str] = set()
        """anomaly codes reported once per direction"""
        # close
        self.sent_close = False
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.close_frame: int | None = None
        self.close_ts: int | None = None
        # permessage-deflate context (context takeover)
        self.z: zlib._Decompress | None = None
        self.z_broken = False
        # hunting
        self.scan_from = 0
        self.hunt_skipped = 0
        self.hunt_total = 0


# --------------------------------------------------------------------------- observer


class WebSocketObserver:
    """Watches both directions of one WebSocket connection. Never raises on wire data.

    ``handshake`` is what the opening handshake negotiated (:func:`parse_handshake`); its
    problems are reported at construction. ``feed``/``gap``/``close`` follow
    :class:`~pcaptools.protocols._base.Observer` (offsets count from the first byte after
    the handshake); ``close(..., at_eof=True)`` or :meth:`finish` at the end of the capture.
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
        if not st.started:
            st.started = True
            st.next_offset = chunk.offset
        if chunk.offset != st.next_offset:
            if chunk.offset > st.next_offset:
                self._lost(st, chunk.offset - st.next_offset, ts, frame, out)
                st.next_offset = chunk.offset
            else:
                overlap = st.next_offset - chunk.offset
                if overlap >= len(data):
                    return out
                data = data[overlap:]
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
        if not st.started:
            st.started = True
            st.next_offset = offset
        start = max(st.next_offset, offset)
        end = offset + nbytes
        if end <= start:
            return out
        st.next_offset = end
        self._lost(st, end - start, ts_ns, frame, out)
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

    def _consume(self, st: _Dir, data: bytes, ts: int, frame: int, out: list[object]) -> None:
        pos = 0
        n = len(data)
        while pos < n:
            mode = st.mode
            if mode == _PAYLOAD:
                take = n - pos
                if take > st.remaining:
                    take = st.remaining
                if not st.skip:
                    self._payload(st, data, pos, take)
                st.pos += take
                pos += take
                st.remaining -= take
                if not st.remaining:
                    self._frame_done(st, ts, frame, out)
            elif mode == _HEADER:
                hb = st.hbuf
                if hb:
                    need = _header_len(hb) if len(hb) >= 2 else 0
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
                    need = _header_len(data, pos)
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
        b0 = buf[i]
        b1 = buf[i + 1]
        l7 = b1 & 0x7F
        j = i + 2
        if l7 == 126:
            length = (buf[j] << 8) | buf[j + 1]
            j += 2
            minimal = length >= 126
        elif l7 == 127:
            (length,) = struct.unpack_from(">Q", buf, j)
            j += 8
            minimal = length > 0xFFFF
        else:
            length = l7
            minimal = True
        masked = bool(b1 & 0x80)
        if masked:
            st.key = bytes(buf[j : j + 4])
            j += 4
        st.b0 = b0
        st.masked = masked
        st.hlen = j - i
        st.length = length
        st.remaining = length
        st.pos = 0
        st.lost = 0
        st.start = start
        st.ctrl = None
        st.skip = False
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
            st.skip = True
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
                    self._start_inflate(st, m)
            m.fragments += 1
            m.wire += st.hlen + length
            m.payload += length
            if st.skip:
                self._taint(st, m)
        if length == 0:
            self._frame_done(st, ts, frame, out)
        else:
            st.mode = _PAYLOAD

    def _new_message(self, st: _Dir, opcode: int, start: tuple[int, int]) -> _Msg:
        m = _Msg(st.messages, opcode, start, self._preview_cap)
        st.messages += 1
        st.msg = m
        return m

    def _start_inflate(self, st: _Dir, m: _Msg) -> None:
        m.compressed = True
        if self._no_takeover[st.d]:
            m.z = zlib.decompressobj(-15)
        elif st.z_broken:
            m.decompress = "skipped"
        else:
            if st.z is None:
                st.z = zlib.decompressobj(-15)
            m.z = st.z

    def _taint(self, st: _Dir, m: _Msg) -> None:
        """Part of the message's payload is unknown: no UTF-8 verdict, no decompression."""
        m.uninspected = True
        m.utf8 = None
        m.preview_cap = len(m.preview)  # the preview ends at the first unknown byte
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
                ctrl += _unmask(piece, st.key, st.pos) if st.masked else piece
            return
        m = st.msg
        if m is None or (st.b0 & 0x0F) > 2 or not m.wants_content():
            return
        piece = data[pos : pos + take]
        if st.masked:
            piece = _unmask(piece, st.key, st.pos)
        if m.compressed:
            self._inflate(st, m, piece)
        else:
            self._content(m, piece)

    def _content(self, m: _Msg, data: bytes) -> None:
        m.content_bytes += len(data)
        room = m.preview_cap - len(m.preview)
        if room > 0:
            m.preview += data[:room]
        dec = m.utf8
        if dec is not None:
            try:
                dec.decode(data)
            except UnicodeDecodeError:
                m.utf8 = None
                m.utf8_ok = False

    def _stop_inflating(self, st: _Dir, m: _Msg, status: str) -> None:
        """Message ``m`` is not decompressed further (``status``: limit / failed); with context
        takeover the direction's shared context is lost too, so later compressed messages of
        that direction are not decompressed either. A message already past its limit stays
        ``limit``."""
        m.decompress = status if m.zdrain < 0 else "limit"
        m.z = None
        if not self._no_takeover[st.d]:
            st.z = None
            st.z_broken = True

    def _drain(self, st: _Dir, m: _Msg, z: zlib._Decompress, data: bytes) -> None:
        """Message ``m`` is past its decompression limit: inflate ``data`` through the shared
        context and discard the output (bounded memory: 64 KiB steps), so the context stays
        right for the direction's next message; past :data:`INFLATE_DRAIN_BYTES` of output
        the context is given up."""
        buf = data
        try:
            while buf or not z.eof:
                got = z.decompress(buf, _INFLATE_STEP)
                m.zdrain += len(got)
                if m.zdrain > INFLATE_DRAIN_BYTES:
                    self._stop_inflating(st, m, "limit")
                    ts, frame = self._last
                    self._report(
                        st, "ws.decompression_limit",
                        f"message {m.index} inflates beyond {self._max_out + INFLATE_DRAIN_BYTES}"
                        " bytes; the shared context is given up: later compressed messages of "
                        "this direction are not decompressed", ts, frame,
                    )
                    return
                buf = z.unconsumed_tail
                if z.eof:
                    if z is st.z:
                        st.z = None
                    return
                if len(got) < _INFLATE_STEP and not buf:
                    return
                if not got and buf:
                    return  # no progress possible (should not happen)
        except zlib.error:
            self._stop_inflating(st, m, "limit")  # (the message's status stays limit)
            ts, frame = self._last
            self._report(
                st, "ws.decompress_failed",
                f"message {m.index} (past its decompression limit) does not inflate; later "
                "compressed messages of this direction are not decompressed", ts, frame,
            )

    def _inflate(self, st: _Dir, m: _Msg, data: bytes) -> None:
        z = m.z
        if z is None:
            return
        if m.zdrain >= 0:
            self._drain(st, m, z, data)
            return
        buf = data
        try:
            while True:
                budget = self._max_out + 1 - m.zout
                step = min(budget, _INFLATE_STEP)
                got = z.decompress(buf, step)
                if got:
                    m.zout += len(got)
                    self._content(m, got)
                if m.zout > self._max_out:
                    shared = not self._no_takeover[st.d]
                    ts, frame = self._last
                    self._report(
                        st, "ws.decompression_limit",
                        f"message {m.index} inflates beyond {self._max_out} bytes "
                        f"({m.payload} compressed bytes so far); decompression stopped"
                        + ("; the rest still runs through the shared context (output "
                           "discarded) so later messages are inflated" if shared else ""),
                        ts, frame,
                    )
                    if not shared:
                        self._stop_inflating(st, m, "limit")
                        return
                    m.decompress = "limit"
                    m.zdrain = 0
                    self._drain(st, m, z, z.unconsumed_tail)
                    return
                buf = z.unconsumed_tail
                if z.eof:
                    # a final deflate block (BFINAL): the next message needs a new context
                    if z is st.z:
                        st.z = None
                    return
                if len(got) < step and not buf:
                    return
                if not got and buf:
                    return  # no progress possible (should not happen)
        except zlib.error as exc:
            self._stop_inflating(st, m, "failed")
            ts, frame = self._last
            self._report(
                st, "ws.decompress_failed",
                f"message {m.index} does not inflate: {exc}"
                + ("" if self._no_takeover[st.d] else
                   "; later compressed messages of this direction are not decompressed"),
                ts, frame,
            )

    def _frame_done(self, st: _Dir, ts: int, frame: int, out: list[object], *,
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
        out.append(
            WsFrame(
                ts_ns=ts,
                frame=frame,
                direction=st.d,
                tcp_stream=self.tcp_stream,
                stream_id=self.stream_id,
                index=st.frames - 1,
                start_ts_ns=start_ts,
                start_frame=start_frame,
                fin=fin,
                rsv=(b0 >> 4) & 7,
                opcode=opcode,
                masked=st.masked,
                payload_len=length,
                header_bytes=st.hlen,
                lost_bytes=st.lost,
                complete=complete,
                message_index=msg_index,
                close_code=close_code,
                close_reason=close_reason,
                control_payload=ctrl_payload,
            )
        )
        st.mode = _HEADER
        st.ctrl = None
        if complete and opcode <= 2 and fin and m is not None:
            self._end_message(st, m, ts, frame, "fin", out)

    def _close_payload(
        self, st: _Dir, p: bytes, length: int, ts: int, frame: int
    ) -> tuple[int | None, str | None]:
        if length == 0:
            return None, None
        if length == 1:
            self._report(st, "ws.bad_close_payload", "Close payload of 1 byte (a status code "
                         "needs 2)", ts, frame)
            return None, None
        if len(p) < 2:
            return None, None  # lost
        code = (p[0] << 8) | p[1]
        raw = p[2:]
        reason = raw.decode("utf-8", "replace") if length > 2 else None
        if not valid_close_code(code):
            self._report(st, "ws.bad_close_payload", f"Close status code {code} may not be "
                         "sent (RFC 6455 §7.4)", ts, frame)
        if raw and len(p) == length and st.lost == 0:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                self._report(st, "ws.bad_close_payload", "Close reason is not valid UTF-8",
                             ts, frame)
        return code, reason

    def _end_message(
        self, st: _Dir, m: _Msg, ts: int, frame: int, reason: str, out: list[object]
    ) -> None:
        st.msg = None
        complete = reason == "fin"
        if m.compressed:
            if m.z is not None:
                if complete:
                    self._inflate(st, m, _TAIL)
                    if m.decompress is None:
                        m.decompress = "ok"
                else:
                    self._stop_inflating(st, m, "incomplete")
            m.z = None
        utf8_ok = m.utf8_ok
        dec = m.utf8
        if dec is not None:
            if complete and not m.lost and not m.uninspected:
                try:
                    dec.decode(b"", True)
                    utf8_ok = True
                except UnicodeDecodeError:
                    utf8_ok = False
            else:
                utf8_ok = None
        if utf8_ok is False:
            self._report(st, "ws.invalid_utf8", f"text message {m.index} is not valid UTF-8",
                         ts, frame)
        preview: str | None = None
        truncated = False
        json_type: str | None = None
        if m.opcode == 1:
            raw = bytes(m.preview)
            text = _Utf8Decoder("replace").decode(raw, False)
            truncated = (len(text) > self._preview_chars or m.content_bytes > len(raw)
                         or m.uninspected)
            preview = text[: self._preview_chars]
            jm = _JSON_TYPE.search(raw)
            if jm is not None:
                json_type = jm.group(1).decode("utf-8", "replace")
        decompressed = m.zout if m.compressed and m.zout else None
        if m.compressed and m.decompress == "ok":
            decompressed = m.zout
        out.append(
            WsMessage(
                ts_ns=ts,
                frame=frame,
                direction=st.d,
                tcp_stream=self.tcp_stream,
                stream_id=self.stream_id,
                index=m.index,
                type={1: "text", 2: "binary"}.get(m.opcode, "unknown"),
                fragments=m.fragments,
                first_ts_ns=m.first_ts,
                first_frame=m.first_frame,
                wire_bytes=m.wire,
                payload_bytes=m.payload,
                lost_bytes=m.lost,
                compressed=m.compressed,
                decompress=m.decompress,
                decompressed_bytes=decompressed,
                complete=complete,
                end_reason=reason,
                utf8_ok=utf8_ok,
                preview=preview,
                preview_truncated=truncated,
                json_type=json_type,
            )
        )

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

    def _plausible(self, st: _Dir, buf: bytearray, i: int, n: int) -> int:
        """Length of a plausible frame starting at ``buf[i]`` (header included), 0 if not
        plausible, -1 if the header is incomplete."""
        if n - i < 2:
            return -1
        b0 = buf[i]
        b1 = buf[i + 1]
        op = b0 & 0x0F
        if op not in OPCODE_NAMES:
            return 0
        rsv = b0 & 0x70
        if rsv and not (rsv == 0x40 and self._deflate and op in (1, 2)):
            return 0
        masked = st.d == C2S
        if st.mask_errors * 2 > st.frames:
            masked = not masked  # this side gets masking wrong: expect what it does
        if bool(b1 & 0x80) != masked:
            return 0
        need = _header_len(buf, i)
        if n - i < need:
            return -1
        l7 = b1 & 0x7F
        if l7 == 126:
            length = (buf[i + 2] << 8) | buf[i + 3]
            if length < 126:
                return 0
        elif l7 == 127:
            (length,) = struct.unpack_from(">Q", buf, i + 2)
            if length <= 0xFFFF or length > _HUNT_MAX_FRAME:
                return 0
        else:
            length = l7
        if op >= 8 and (length > 125 or not b0 & 0x80):
            return 0
        return need + length

    def _hunt(self, st: _Dir, ts: int, frame: int, out: list[object]) -> None:
        buf = st.hbuf
        n = len(buf)
        i = st.scan_from
        found = -1
        while i < n:
            flen = self._plausible(st, buf, i, n)
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
                v = self._plausible(st, buf, nxt, n)
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


def _header_len(buf: bytes | bytearray, i: int = 0) -> int:
    """Header length given at least two header bytes at ``buf[i:]``."""
    b1 = buf[i + 1]
    l7 = b1 & 0x7F
    return 2 + (2 if l7 == 126 else 8 if l7 == 127 else 0) + (4 if b1 & 0x80 else 0)


# --------------------------------------------------------------------------- wiring


def websocket_factory(
    *,
    tcp_stream: int,
    diag: Diagnostics,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
) -> Callable[[HttpRequest | None, HttpResponse], WebSocketObserver]:
    """The ``websocket_factory`` of :class:`~pcaptools.protocols.http1.Http1Observer`: on a
    ``101`` to ``Upgrade: websocket`` it checks the handshake and returns the observer of
    the rest of the connection."""

    def make(request: HttpRequest | None, response: HttpResponse) -> WebSocketObserver:
        return WebSocketObserver(
            handshake=parse_handshake(request, response),
            tcp_stream=tcp_stream,
            diag=diag,
            max_frame_bytes=max_frame_bytes,
            max_decompressed_bytes=max_decompressed_bytes,
            preview_chars=preview_chars,
        )

    return make
