"""Builders for WebSocket tests: frames, handshakes, permessage-deflate payloads, feeding an
observer, and one-connection pcaps (to run through ``pcaptools.load`` and tshark)."""

from __future__ import annotations

import base64
import random
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk
from pcaptools.protocols.websocket import (
    WebSocketObserver,
    WsConnectionEnded,
    WsFrame,
    WsMessage,
    accept_for_key,
    handshake_from_headers,
)

C2S = Direction.CLIENT_TO_SERVER
S2C = Direction.SERVER_TO_CLIENT
KEY = "dGhlIHNhbXBsZSBub25jZQ=="
MASK = b"\x37\xfa\x21\x3d"

Segments = Sequence[tuple[Direction, bytes]]


def frame(
    opcode: int,
    payload: bytes = b"",
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bytes | None = None,
    length: int | None = None,
    ext: int | None = None,
) -> bytes:
    """One frame. ``rsv``: 3 bits (RSV1 = 4). ``length`` overrides the announced length (the
    payload given is still appended); ``ext`` forces the length encoding (0, 16 or 64)."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (rsv & 7) << 4 | (opcode & 0x0F)
    mbit = 0x80 if mask is not None else 0
    if ext is None:
        ext = 0 if n < 126 else 16 if n <= 0xFFFF else 64
    if ext == 0:
        head = bytes([b0, mbit | n])
    elif ext == 16:
        head = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    if mask is not None:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


def cframe(opcode: int, payload: bytes = b"", **kw: Any) -> bytes:
    """A client frame (masked with :data:`MASK` unless ``mask`` is given)."""
    kw.setdefault("mask", MASK)
    return frame(opcode, payload, **kw)


def close_payload(code: int, reason: str = "") -> bytes:
    return struct.pack(">H", code) + reason.encode()


def request(
    *,
    key: str = KEY,
    protocols: str | None = None,
    extensions: str | None = None,
    path: str = "/chat",
) -> bytes:
    lines = [
        f"GET {path} HTTP/1.1",
        "Host: example.test",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    if protocols:
        lines.append(f"Sec-WebSocket-Protocol: {protocols}")
    if extensions:
        lines.append(f"Sec-WebSocket-Extensions: {extensions}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def response(
    *,
    key: str = KEY,
    accept: str | None = None,
    protocol: str | None = None,
    extensions: str | None = None,
) -> bytes:
    lines = [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Accept: {accept if accept is not None else accept_for_key(key)}",
    ]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    if extensions:
        lines.append(f"Sec-WebSocket-Extensions: {extensions}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def headers(raw: bytes) -> tuple[tuple[str, str], ...]:
    out = []
    for line in raw.decode().split("\r\n")[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            out.append((k.strip().lower(), v.strip()))
    return tuple(out)


def observer(
    *, extensions: str | None = None, offered: str | None = None, **kw: Any
) -> tuple[WebSocketObserver, Diagnostics]:
    """An observer after a consistent handshake (``extensions`` accepted by the server)."""
    diag = Diagnostics()
    hs = handshake_from_headers(
        headers(request(extensions=offered if offered is not None else extensions)),
        headers(response(extensions=extensions)),
        path="/chat",
        request_frame=4,
        request_ts_ns=4,
        response_frame=6,
        response_ts_ns=6,
    )
    return WebSocketObserver(handshake=hs, tcp_stream=0, diag=diag, **kw), diag


def chunks(
    segments: Segments, *, t0: int = 1_000_000_000, step: int = 1_000_000
) -> list[StreamChunk]:
    """One StreamChunk per segment: frame = index + 1, ts = t0 + index * step."""
    off = [0, 0]
    out = []
    for i, (d, data) in enumerate(segments):
        out.append(
            StreamChunk(direction=d, data=data, ts_ns=t0 + i * step, frame=i + 1, offset=off[d])
        )
        off[d] += len(data)
    return out


def feed(
    obs: WebSocketObserver, segments: Segments, *, close: bool = True, at_eof: bool = False
) -> list[object]:
    """Feed the segments, then end both directions (FINs after the last segment, or the end
    of the capture with ``at_eof``)."""
    ev: list[object] = []
    cs = chunks(segments)
    for c in cs:
        ev += obs.feed(c)
    if close:
        n = len(cs)
        t = 1_000_000_000 + n * 1_000_000
        if at_eof:
            ev += obs.close(C2S, t, n, at_eof=True)
        else:
            ev += obs.close(C2S, t, n + 1)
            ev += obs.close(S2C, t + 1, n + 2)
    return ev


def frames_of(ev: Iterable[object]) -> list[WsFrame]:
    return [e for e in ev if isinstance(e, WsFrame)]


def messages_of(ev: Iterable[object]) -> list[WsMessage]:
    return [e for e in ev if isinstance(e, WsMessage)]


def conn_of(ev: Iterable[object]) -> WsConnectionEnded:
    (c,) = [e for e in ev if isinstance(e, WsConnectionEnded)]
    return c


def codes(diag: Diagnostics) -> list[tuple[str, int | None, str | None]]:
    return [(r.code, r.frame, r.direction) for r in diag.rows]


def resegment(segments: Segments, cuts: Iterable[int]) -> list[tuple[Direction, bytes]]:
    """Split the segments at byte positions of their concatenation (directions kept)."""
    out: list[tuple[Direction, bytes]] = []
    total = 0
    bounds = sorted(set(cuts))
    for d, data in segments:
        start = 0
        for b in bounds:
            if total < b < total + len(data) and b - total > start:
                out.append((d, data[start : b - total]))
                start = b - total
        if start < len(data):
            out.append((d, data[start:]))
        total += len(data)
    return out


# --------------------------------------------------------------------------- deflate


class Deflater:
    """A permessage-deflate sender: one raw deflate stream (context takeover) or a fresh
    one per message (``takeover=False``); returns the message payload without the tail."""

    def __init__(self, *, takeover: bool = True, wbits: int = 15) -> None:
        self.takeover = takeover
        self.wbits = wbits
        self.z = zlib.compressobj(9, zlib.DEFLATED, -wbits)

    def message(self, data: bytes) -> bytes:
        if not self.takeover:
            self.z = zlib.compressobj(9, zlib.DEFLATED, -self.wbits)
        out = self.z.compress(data) + self.z.flush(zlib.Z_SYNC_FLUSH)
        assert out.endswith(b"\x00\x00\xff\xff")
        return out[:-4]


# --------------------------------------------------------------------------- pcaps


def session_pcap(
    segments: Segments,
    *,
    t0: int = 1_700_000_000_000_000_000,
    step: int = 10_000_000,
    sport: int = 50000,
    dport: int = 8080,
    fin: bool = True,
    mss: int = 1460,
) -> tuple[bytes, dict[int, int]]:
    """An Ethernet/IPv4 pcap of one TCP connection: handshake, each segment in packets of at
    most ``mss`` bytes acknowledged by the peer, then FINs. Returns the file and segment
    index -> frame number of the packet carrying its last byte."""
    from tests.helpers import eth_tcp4, pcap_file

    cli, srv = "10.0.0.1", "10.0.0.2"
    seq = {C2S: 1000, S2C: 5000}
    pkts: list[tuple[int, bytes]] = []
    frames: dict[int, int] = {}
    t = t0

    def send(d: Direction, flags: int, payload: bytes = b"") -> None:
        nonlocal t
        src, dst, sp, dp = (cli, srv, sport, dport) if d == C2S else (srv, cli, dport, sport)
        ack = 0 if flags == 0x02 else seq[S2C if d == C2S else C2S] & 0xFFFFFFFF
        pkts.append(
            (
                t,
                eth_tcp4(
                    payload,
                    sport=sp,
                    dport=dp,
                    seq=seq[d] & 0xFFFFFFFF,
                    ack=ack,
                    flags=flags,
                    src=src,
                    dst=dst,
                ),
            )
        )
        t += step
        seq[d] += len(payload) + (1 if flags & 0x03 else 0)

    send(C2S, 0x02)
    send(S2C, 0x12)
    send(C2S, 0x10)
    for i, (d, data) in enumerate(segments):
        for j in range(0, len(data), mss):
            send(d, 0x18, data[j : j + mss])
        frames[i] = len(pkts)
        send(S2C if d == C2S else C2S, 0x10)
    if fin:
        send(C2S, 0x11)
        send(S2C, 0x11)
        send(C2S, 0x10)
    return pcap_file(pkts), frames


def b64key(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# --------------------------------------------------------------------------- python websockets

TEXTS = [
    '{"type":"session.update","voice":"alloy"}',
    '{"type":"session.updated"}',
    '{"type":"session.updated"}',
    "chunk-" * 50,
]


def websockets_conversation(
    *, deflate: bool = True, takeover: bool = True
) -> list[tuple[Direction, bytes]]:
    """A whole session written by the ``websockets`` library's sans-IO protocols (its own
    masking, fragmentation and permessage-deflate): handshake with subprotocol ``v1``, JSON
    text both ways (:data:`TEXTS`), a message in three fragments, pings both ways answered by
    the library, a 70 kB binary message, and a close handshake (1000 "bye")."""
    from websockets.client import ClientProtocol
    from websockets.extensions.permessage_deflate import (
        ClientPerMessageDeflateFactory,
        ServerPerMessageDeflateFactory,
    )
    from websockets.server import ServerProtocol
    from websockets.uri import parse_uri

    cext = (
        [
            ClientPerMessageDeflateFactory(
                client_max_window_bits=True,
                server_no_context_takeover=not takeover,
                client_no_context_takeover=not takeover,
            )
        ]
        if deflate
        else None
    )
    sext = [ServerPerMessageDeflateFactory()] if deflate else None
    c = ClientProtocol(parse_uri("ws://example.test/chat"), extensions=cext, subprotocols=["v1"])
    s = ServerProtocol(extensions=sext, subprotocols=["v1"])
    segs: list[tuple[Direction, bytes]] = []

    def pump(src: Any, dst: Any, d: Direction) -> list[Any]:
        data = b"".join(src.data_to_send())
        if data:
            segs.append((d, data))
            dst.receive_data(data)
        return list(dst.events_received())

    c.send_request(c.connect())
    (req,) = pump(c, s, C2S)
    s.send_response(s.accept(req))
    pump(s, c, S2C)
    c.send_text(TEXTS[0].encode())
    pump(c, s, C2S)
    s.send_text(TEXTS[1].encode())
    pump(s, c, S2C)
    s.send_text(TEXTS[2].encode())
    pump(s, c, S2C)
    s.send_text(TEXTS[3][:100].encode(), fin=False)
    s.send_continuation(TEXTS[3][100:200].encode(), fin=False)
    s.send_continuation(TEXTS[3][200:].encode(), fin=True)
    pump(s, c, S2C)
    c.send_ping(b"client-ping-1")
    pump(c, s, C2S)
    pump(s, c, S2C)  # the library's pong
    s.send_ping(b"server-ping-1")
    pump(s, c, S2C)
    pump(c, s, C2S)
    c.send_binary(random.Random(1).randbytes(70_000))  # incompressible: ~50 packets
    pump(c, s, C2S)
    c.send_close(1000, "bye")
    pump(c, s, C2S)
    pump(s, c, S2C)
    return segs
