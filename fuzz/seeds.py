"""Seed inputs of every harness, built with the test suite's builders (run from the repo root).

``write_seeds(directory)`` writes ``directory/<harness>/seed-N``; the runner does it before
the first run so libFuzzer starts from realistic inputs (a whole capture, a TLS 1.3
conversation with its keys, HTTP/1.1 + SSE + WebSocket, HTTP/2 + SSE) and mutates from there.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from tests.protocols.http.helpers import PREFACE, FrameFactory
from tests.protocols.tls import _rfc8448 as rfc

from .harnesses import encode

RFC8448_KEYLOG: str = rfc.KEYLOG

C, S = 0, 1
_REQ = [
    (":method", "POST"),
    (":scheme", "https"),
    (":authority", "api.example"),
    (":path", "/v1/chat/completions"),
    ("content-type", "application/json"),
]
SSE_BODY = (
    b": keep-alive\n\nevent: message\nid: 1\nretry: 3000\n"
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}\r\n\r\n'
    b"data: [DONE]\n\n"
)


def _h2_conversation() -> list[tuple[int, bytes]]:
    ff = FrameFactory()
    from tests.protocols.http.helpers import C2S, S2C

    return [
        (
            C,
            PREFACE
            + ff.settings({1: 4096, 4: 65535})
            + ff.window_update(0, 1 << 20)
            + ff.headers(1, _REQ)
            + ff.data(1, b'{"stream": true}', end_stream=True),
        ),
        (
            S,
            ff.settings({3: 100})
            + ff.settings(ack=True)
            + ff.headers(
                1, [(":status", "200"), ("content-type", "text/event-stream")], direction=S2C
            ),
        ),
        (S, ff.data(1, SSE_BODY[:40]) + ff.data(1, SSE_BODY[40:], end_stream=True, padding=3)),
        (
            C,
            ff.settings(ack=True)
            + ff.ping(b"12345678")
            + ff.headers(3, _REQ, direction=C2S)
            + ff.rst(3, 8),
        ),
        (S, ff.ping(b"12345678", ack=True) + ff.goaway(3, 0, b"bye")),
    ]


def _ws_frame(
    payload: bytes,
    opcode: int = 1,
    *,
    mask: bytes | None = None,
    rsv1: bool = False,
    fin: bool = True,
) -> bytes:
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    head = bytes([b0, m | n]) if n < 126 else bytes([b0, m | 126]) + n.to_bytes(2, "big")
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


def _deflate(data: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    return (z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH))[:-4]


def _ws_frames() -> list[tuple[int, bytes]]:
    return [
        (C, _ws_frame(b'{"type":"session.update"}', mask=b"\x01\x02\x03\x04")),
        (S, _ws_frame(b'{"type":"response.delta","delta":"hi"}')),
        (S, _ws_frame(_deflate(b'{"type":"response.delta","delta":"compressed"}'), rsv1=True)),
        (S, _ws_frame(b"frag", fin=False) + _ws_frame(b"ment", opcode=0)),
        (C, _ws_frame(b"ping", opcode=9, mask=b"abcd")),
        (S, _ws_frame(b"ping", opcode=10)),
        (S, _ws_frame(b"\x03\xe8done", opcode=8)),
    ]


UPGRADE = (
    b"GET /v1/realtime HTTP/1.1\r\nHost: api.example\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)
SWITCHED = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)


def _h1_conversations() -> list[list[tuple[int, bytes]]]:
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (SSE_BODY[:50], SSE_BODY[50:]))
    return [
        [
            (
                C,
                b"POST /v1/chat HTTP/1.1\r\nHost: api.example\r\nContent-Length: 16\r\n\r\n"
                b'{"stream": true}',
            ),
            (
                S,
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n",
            ),
            (C, b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n"),
            (
                S,
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 3"
                b"\r\nContent-Length: 2\r\n\r\nno",
            ),
        ],
        [(C, UPGRADE), (S, SWITCHED), *_ws_frames()],
    ]


def _tls12_hello() -> list[tuple[int, bytes]]:
    from tests.protocols.tls._tls_build import (
        alpn_ext,
        client_hello,
        record,
        server_hello,
        sni_ext,
    )

    return [
        (
            C,
            record(
                22,
                client_hello(
                    b"r" * 32,
                    [0xC02F, 0x1301],
                    [sni_ext("api.example"), alpn_ext("h2", "http/1.1")],
                ),
            ),
        ),
        (
            S,
            record(22, server_hello(b"s" * 32, 0xC02F, [alpn_ext("h2")]))
            + record(20, b"\x01")
            + record(22, b"\x00" * 40),
        ),
        (C, record(23, b"\x00" * 64) + record(21, b"\x01\x00")),
    ]


def observer_seeds() -> dict[str, list[bytes]]:
    h1 = _h1_conversations()
    h2 = _h2_conversation()
    tls13 = [(d, data) for d, data in rfc.CONVERSATION]
    return {
        "tls": [encode(tls13), encode(_tls12_hello())],
        "http1": [encode(c) for c in h1],
        "http2": [encode(h2)],
        "sse": [encode([(S, SSE_BODY)]), encode([(S, b"\xef\xbb\xbfdata: a\rdata: b\r\r")])],
        "websocket": [b"\x01" + encode(_ws_frames()), b"\x00" + encode(_ws_frames()[:2])],
        "detect": [encode(h1[0]), encode(h2), encode(h1[1])],
        "dispatch": [encode(tls13), encode(h1[0]), encode(h2), encode(h1[1])],
        "dns_tcp": [encode(_dns_tcp_conversation())],
    }


def _dns_tcp_conversation() -> list[tuple[int, bytes]]:
    """Two pipelined DNS over TCP queries and their answers (length-prefixed)."""
    from tests.protocols.dns.dnsbuild import PTR_QNAME, A, a, message, rr

    def framed(*msgs: bytes) -> bytes:
        return b"".join(len(m).to_bytes(2, "big") + m for m in msgs)

    ans = [rr(PTR_QNAME, A, a("192.0.2.1"))]
    return [(C, framed(message(1, "a.test", A), message(2, "b.test", A))),
            (S, framed(message(1, "a.test", A, response=True, answers=ans),
                       message(2, "b.test", A, response=True, rcode=3)))]


def reader_seeds() -> list[bytes]:
    from tests.helpers import dsb, epb, idb, shb
    from tests.robustness._build import good_conv, pcap
    from tests.robustness._hostile import hostile_capture_bytes

    conv = good_conv()
    small = pcap(conv)
    ng = shb() + idb(1, tsresol=9) + dsb(0x544C534B, RFC8448_KEYLOG.encode())
    ng += b"".join(epb(0, ts, f) for ts, f in conv.packets[:8])
    return [small, ng, gzip.compress(small, mtime=0), hostile_capture_bytes()]


def all_seeds() -> dict[str, list[bytes]]:
    out = observer_seeds()
    out["reader"] = out["pipeline"] = reader_seeds()
    return out


def write_seeds(directory: str | Path) -> dict[str, Path]:
    """Write every harness's seeds under ``directory/<name>/``; returns name -> folder."""
    root = Path(directory)
    out = {}
    for name, seeds in all_seeds().items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        for i, s in enumerate(seeds):
            (d / f"seed-{i}").write_bytes(s)
        out[name] = d
    return out
