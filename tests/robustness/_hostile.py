"""A hostile capture for the security tests and the fuzz seeds: every string a report or
table may show (SNI, ALPN, HTTP/1.1 and HTTP/2 paths and header values, SSE data, WebSocket
path, origin, messages and close reason, the file name) is markup, and credentials travel in
Cookie / Authorization / Set-Cookie headers.

Also :func:`tiny_record_bomb`: the amplification case of ``docs/robustness.md`` (a small
gzip file that is millions of zero-length pcap records)."""

from __future__ import annotations

import gzip

from pcaptools.protocols._base import Direction
from tests.protocols.http.helpers import PREFACE, FrameFactory
from tests.protocols.tls._tls_build import alpn_ext, client_hello, record, server_hello, sni_ext
from tests.robustness._build import C2S, S2C, Conv, good_conv, later, pcap

XSS1 = "<script>alert(1)</script>"
XSS2 = '"><img src=x onerror=alert(1)>'
COOKIE = "session=s3cr3t-cookie-value"
BEARER = "Bearer sk-live-0123456789abcdef"
SET_COOKIE = "sid=server-set-s3cr3t; HttpOnly"


def _ws_frame(payload: bytes, opcode: int = 1, mask: bytes | None = None) -> bytes:
    head = bytes([0x80 | opcode, (0x80 if mask else 0) | len(payload)])
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


def hostile_capture_bytes() -> bytes:
    x1, x2 = XSS1.encode(), XSS2.encode()
    # TLS: SNI and ALPN
    tls = Conv(sport=41100, dport=443, t0=later(1)).handshake()
    tls.send(C2S, record(22, client_hello(b"r" * 32, [0x1301], [sni_ext(XSS1), alpn_ext(XSS2)])))
    tls.send(S2C, record(22, server_hello(b"s" * 32, 0x1301, []))).close()
    # HTTP/1.1: path, header values, credentials, an SSE body, a bad reason phrase
    h1 = Conv(sport=41101, dport=8080, t0=later(2)).handshake()
    h1.send(
        C2S,
        b"GET /"
        + x1
        + b"?q=%22%3E HTTP/1.1\r\nHost: "
        + x2
        + b"\r\nUser-Agent: "
        + x1
        + b"\r\nCookie: "
        + COOKIE.encode()
        + b"\r\nAuthorization: "
        + BEARER.encode()
        + b"\r\n\r\n",
    )
    h1.send(
        S2C,
        b"HTTP/1.1 200 "
        + x1
        + b"\r\nContent-Type: text/event-stream\r\nX-Note: "
        + x2
        + b"\r\nSet-Cookie: "
        + SET_COOKIE.encode()
        + b"\r\n\r\nevent: "
        + x1
        + b"\ndata: "
        + x2
        + b"\n\n",
    ).close()
    # HTTP/2 (prior knowledge): pseudo-headers and values
    ff = FrameFactory()
    h2 = Conv(sport=41102, dport=8080, t0=later(3)).handshake()
    h2.send(
        C2S,
        PREFACE
        + ff.settings({})
        + ff.headers(
            1,
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", XSS2),
                (":path", "/" + XSS1),
                ("authorization", BEARER),
                ("x-title", XSS1),
            ],
            flags=("END_HEADERS", "END_STREAM"),
        ),
    )
    h2.send(
        S2C,
        ff.settings({})
        + ff.headers(
            1, [(":status", "200"), ("content-type", XSS2)], direction=Direction.SERVER_TO_CLIENT
        )
        + ff.data(1, b"data: " + x1 + b"\n\n", end_stream=True)
        + ff.goaway(1, 0, x1),
    ).close()
    # WebSocket: path, origin, subprotocol, a text message and a close reason
    ws = Conv(sport=41103, dport=8080, t0=later(4)).handshake()
    ws.send(
        C2S,
        b"GET /" + x1 + b" HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: "
        b"Upgrade\r\nOrigin: "
        + x2
        + b"\r\nSec-WebSocket-Protocol: "
        + x1.replace(b" ", b"")
        + b"\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    ws.send(
        S2C,
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade"
        b"\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
    )
    ws.send(C2S, _ws_frame(x2, mask=b"abcd"))
    ws.send(S2C, _ws_frame(x1) + _ws_frame(b"\x03\xe8" + x2, opcode=8)).close()
    # a malformed HTTP/1.1 message whose start line may be quoted in a warning
    bad = Conv(sport=41104, dport=80, t0=later(5)).handshake()
    bad.send(C2S, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    bad.send(S2C, b"HTTP/1.1 200 OK\r\nContent-Length: " + x1 + b"\r\n\r\n").close()
    return pcap(good_conv(), tls, h1, h2, ws, bad)


#: bytes of zeros in one gzip member of :func:`tiny_record_bomb` (4,194,304 records of 16 bytes)
BOMB_ZEROS = 64 << 20


def tiny_record_bomb(zeros: int = BOMB_ZEROS, after: bytes = b"") -> bytes:
    """A gzip'd pcap: the good connection (18 frames), then ``zeros`` bytes of zeros, which a
    pcap reader sees as ``zeros // 16`` zero-length records (16 bytes of record header each),
    then the pcap records ``after`` (no file header). With the defaults, a 66 KB file of
    4,194,322 frames: the amplification case of docs/robustness.md. Deterministic (mtime 0)."""
    prefix = pcap(good_conv())
    bomb = gzip.compress(prefix, mtime=0) + gzip.compress(b"\0" * zeros, compresslevel=9, mtime=0)
    return bomb + (gzip.compress(after, mtime=0) if after else b"")


if __name__ == "__main__":  # python -m tests.robustness._hostile OUT.pcap.gz: the 66 KB bomb
    import sys

    with open(sys.argv[1], "wb") as fh:
        fh.write(tiny_record_bomb())
