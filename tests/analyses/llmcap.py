"""Hand-built captures of streamed chat completions (DNS, TCP, HTTP/1.1 or h2c, SSE) whose
every time is known, for the latency, comparison and report tests.

``Wire`` collects Ethernet frames with their times; ``Conn`` writes one TCP connection into it
(handshake, data with correct sequence numbers, FIN). ``sse_chunk(text)`` is one OpenAI-style
``data: {...}`` event. Times are milliseconds since ``T0``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hpack import Encoder
from hyperframe.frame import DataFrame, Frame, HeadersFrame, SettingsFrame

from tests import helpers as h
from tests.protocols.dns.dnsbuild import AAAA, PTR_QNAME, A, a, message, rr

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
CLIENT = "10.0.0.5"
RESOLVER = "10.0.0.1"
SERVER = "192.0.2.10"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@dataclass
class Wire:
    frames: list[tuple[int, bytes]] = field(default_factory=list)

    def add(self, t_ms: float, frame: bytes) -> int:
        """Add a frame; returns its frame number (1-based, in time order once written)."""
        self.frames.append((T0 + round(t_ms * MS), frame))
        return len(self.frames)

    def dns(
        self,
        t_query: float,
        t_resp: float,
        name: str,
        ident: int,
        *,
        qtype: int = A,
        addr: str | None = SERVER,
        port: int = 53001,
    ) -> None:
        q = message(ident, name, qtype)
        ans = [rr(PTR_QNAME, qtype, a(addr))] if addr else []
        r = message(ident, name, qtype, response=True, answers=ans)
        self.add(t_query, h.ethernet(h.ipv4(h.udp(port, 53, q), CLIENT, RESOLVER, proto=17)))
        self.add(t_resp, h.ethernet(h.ipv4(h.udp(53, port, r), RESOLVER, CLIENT, proto=17)))

    def write(self, path: Path) -> Path:
        ordered = sorted(self.frames, key=lambda f: f[0])
        return h.write(path, h.pcap_file(ordered, nsec=True))


@dataclass
class Conn:
    wire: Wire
    cport: int
    sport: int = 80
    cseq: int = 1000
    sseq: int = 5000

    def _frame(self, t_ms: float, from_client: bool, flags: int, payload: bytes = b"") -> None:
        if from_client:
            seg = h.tcp(
                self.cport, self.sport, self.cseq, self.sseq, flags, payload, src=CLIENT, dst=SERVER
            )
            self.wire.add(t_ms, h.ethernet(h.ipv4(seg, CLIENT, SERVER)))
        else:
            seg = h.tcp(
                self.sport, self.cport, self.sseq, self.cseq, flags, payload, src=SERVER, dst=CLIENT
            )
            self.wire.add(t_ms, h.ethernet(h.ipv4(seg, SERVER, CLIENT)))

    def handshake(self, t_syn: float, t_synack: float, t_ack: float) -> None:
        self._frame(t_syn, True, 0x02)
        self.cseq += 1
        self._frame(t_synack, False, 0x12)
        self.sseq += 1
        self._frame(t_ack, True, 0x10)

    def send(self, t_ms: float, from_client: bool, payload: bytes) -> None:
        self._frame(t_ms, from_client, 0x18, payload)
        if from_client:
            self.cseq += len(payload)
        else:
            self.sseq += len(payload)

    def ack(self, t_ms: float, from_client: bool) -> None:
        self._frame(t_ms, from_client, 0x10)

    def close(self, t_ms: float) -> None:
        self._frame(t_ms, True, 0x11)
        self.cseq += 1
        self._frame(t_ms + 1, False, 0x11)
        self.sseq += 1
        self._frame(t_ms + 2, True, 0x10)


def sse_chunk(text: str | None = None, *, finish: str | None = None) -> bytes:
    if text is None and finish is None:
        return b"data: [DONE]\n\n"
    delta = {} if text is None else {"content": text}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def h1_chat_request(host: str, body: bytes = b'{"stream":true}') -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: "
        + host.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def h2_frames(*frames: Frame) -> bytes:
    return b"".join(f.serialize() for f in frames)


def h2_headers(enc: Encoder, stream_id: int, headers: list[tuple[str, str]], *, end: bool) -> Frame:
    f = HeadersFrame(stream_id, enc.encode(headers))
    f.flags.add("END_HEADERS")
    if end:
        f.flags.add("END_STREAM")
    return f


def h2_data(stream_id: int, data: bytes, *, end: bool = False) -> Frame:
    f = DataFrame(stream_id, data)
    if end:
        f.flags.add("END_STREAM")
    return f


def settings(ack: bool = False) -> Frame:
    f = SettingsFrame(0)
    if ack:
        f.flags.add("ACK")
    return f


TOKENS = ["Hel", "lo", ",", " world", "!"]


def chat_h1(path: Path) -> Path:
    """One HTTP/1.1 connection (tcp.stream 0) to llm.test, after a DNS lookup (A and AAAA):

    - DNS: A query 0 ms, AAAA query 0.5 ms, A answer 8 ms, AAAA answer 20 ms
    - TCP: SYN 21, SYN-ACK 31, ACK 31.5 (connect 10.5 ms)
    - request 1: POST at 32 (frame 6); response head 232; SSE tokens at 250, 290, 330, 330
      (two events in one packet), 400; finish event 401; [DONE] + last chunk 402 (ends the body)
    - request 2 (reused): GET /health at 500; answer (Content-Length) at 510
    - FIN 600
    """
    w = Wire()
    w.dns(0, 8, "llm.test", 0x0101)
    w.dns(0.5, 20, "llm.test", 0x0102, qtype=AAAA, addr="2001:db8::10")
    c = Conn(w, 50000)
    c.handshake(21, 31, 31.5)
    c.send(32, True, h1_chat_request("llm.test"))
    c.send(232, False, SSE_HEAD)
    c.send(250, False, chunked(sse_chunk(TOKENS[0])))
    c.send(290, False, chunked(sse_chunk(TOKENS[1])))
    c.send(330, False, chunked(sse_chunk(TOKENS[2])) + chunked(sse_chunk(TOKENS[3])))
    c.send(400, False, chunked(sse_chunk(TOKENS[4])))
    c.send(401, False, chunked(sse_chunk(finish="stop")))
    c.send(402, False, chunked(sse_chunk()) + b"0\r\n\r\n")
    c.ack(403, True)
    c.send(500, True, b"GET /health HTTP/1.1\r\nHost: llm.test\r\n\r\n")
    c.send(
        510, False, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
    )
    c.close(600)
    return w.write(path)


def chat_h2(path: Path) -> Path:
    """One h2c connection (prior knowledge, tcp.stream 0) to llm.test, no DNS lookup captured
    for it... except the one at 0 ms (A only, answer 5 ms):

    - TCP: SYN 10, SYN-ACK 20, ACK 20.2
    - client preface + SETTINGS + HEADERS stream 1 (POST, END_STREAM) at 21
    - server SETTINGS + SETTINGS ACK at 30; client SETTINGS ACK at 31
    - stream 1: response HEADERS at 221, DATA events at 240 ("Hel"), 280 ("lo"), 300 (","),
      360 (" world"), 365 ("!"), DATA "[DONE]" with END_STREAM at 370
    - stream 3 (reused): GET /health HEADERS END_STREAM at 100; response HEADERS + DATA
      END_STREAM at 110
    - FIN 500
    """
    w = Wire()
    w.dns(0, 5, "llm.test", 0x0201)
    c = Conn(w, 50100)
    c.handshake(10, 20, 20.2)
    ce, se = Encoder(), Encoder()
    req = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "llm.test"),
        (":path", "/v1/chat/completions"),
        ("content-type", "application/json"),
    ]
    c.send(21, True, H2_PREFACE + h2_frames(settings(), h2_headers(ce, 1, req, end=True)))
    c.send(30, False, h2_frames(settings(), settings(ack=True)))
    c.send(31, True, h2_frames(settings(ack=True)))
    get = [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "llm.test"),
        (":path", "/health"),
    ]
    c.send(100, True, h2_frames(h2_headers(ce, 3, get, end=True)))
    c.send(
        110,
        False,
        h2_frames(
            h2_headers(se, 3, [(":status", "200"), ("content-type", "text/plain")], end=False),
            h2_data(3, b"ok", end=True),
        ),
    )
    c.send(
        221,
        False,
        h2_frames(
            h2_headers(
                se, 1, [(":status", "200"), ("content-type", "text/event-stream")], end=False
            )
        ),
    )
    for t, tok in zip((240, 280, 300, 360, 365), TOKENS, strict=True):
        c.send(t, False, h2_frames(h2_data(1, sse_chunk(tok))))
    c.send(370, False, h2_frames(h2_data(1, sse_chunk(), end=True)))
    c.ack(371, True)
    c.close(500)
    return w.write(path)


def many_h1(path: Path, n: int = 3, *, retransmit: bool = False) -> Path:
    """``n`` HTTP/1.1 GETs, each on its own new connection (tcp.stream i), no DNS:
    connection i starts at 100*i ms: SYN +0, SYN-ACK +10, ACK +10, request +11, response
    (200, 1000-byte body) +31, FIN +40. ``retransmit``: connection 0's response is sent twice."""
    w = Wire()
    for i in range(n):
        t = 100.0 * i
        c = Conn(w, 51000 + i)
        c.handshake(t, t + 10, t + 10)
        c.send(
            t + 11, True, b"GET /asset/" + str(i).encode() + b" HTTP/1.1\r\nHost: llm.test\r\n\r\n"
        )
        body = b"x" * 1000
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body
        if retransmit and i == 0:
            seq = c.sseq
            c.send(t + 31, False, resp)
            c.sseq = seq
            c.send(t + 35, False, resp)
        else:
            c.send(t + 31, False, resp)
        c.close(t + 40)
    return w.write(path)


def many_h2(path: Path, n: int = 3) -> Path:
    """The same ``n`` GETs over one h2c connection (tcp.stream 0): SYN 0, SYN-ACK 10, ACK 10,
    preface + request i at 11 + 100*i (stream 2i+1), response +20 (1000-byte DATA, END_STREAM)."""
    w = Wire()
    c = Conn(w, 52000)
    c.handshake(0, 10, 10)
    ce, se = Encoder(), Encoder()
    for i in range(n):
        t = 11.0 + 100 * i
        sid = 2 * i + 1
        req = [
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "llm.test"),
            (":path", f"/asset/{i}"),
        ]
        pre = H2_PREFACE + h2_frames(settings()) if i == 0 else b""
        c.send(t, True, pre + h2_frames(h2_headers(ce, sid, req, end=True)))
        resp = h2_frames(
            h2_headers(se, sid, [(":status", "200")], end=False),
            h2_data(sid, b"x" * 1000, end=True),
        )
        if i == 0:
            resp = h2_frames(settings()) + resp
        c.send(t + 20, False, resp)
    c.close(40 + 100 * (n - 1))
    return w.write(path)


def keys_for(capture: Path) -> Path | None:
    """The key log recorded next to a capture in captures/: ``<capture>.keys`` (or
    ``<stem>.keys``); None when there is none."""
    for k in (capture.with_name(capture.name + ".keys"), capture.with_suffix(".keys")):
        if k.is_file():
            return k
    return None
