"""The harnesses: bytes in, nothing out; an exception means a pcaptools bug.

Observer harnesses read their input as a little program (:func:`script`): a control byte
``DOOLLLLL`` (D direction, OO operation, L length code) then, for a feed, the bytes. So the
fuzzer controls segmentation, direction changes, gaps and closes as well as content.
The reader harness writes the bytes to a temporary file and runs ``pcaptools.load()``.
"""

from __future__ import annotations

import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from pcaptools.diagnostics import Diagnostics
from pcaptools.protocols._base import Direction, StreamChunk

#: anomaly codes that mean "pcaptools has a bug", not "the input is bad"
BUG_CODES = ("tls.internal_error", "net.decode_error", "tcp.observer_error")

D = (Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT)
FEED, FEED_LONG, GAP, CLOSE = range(4)


class FoundBug(Exception):
    """Raised by a harness when the code under test reported an internal error."""


def script(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """Decode ``data`` into (op, direction, payload-or-size) steps (see the module doc)."""
    i, n = 0, len(data)
    while i < n:
        ctl = data[i]
        i += 1
        d, op, code = ctl >> 7, (ctl >> 5) & 3, (ctl & 0x1F) + 1
        if op in (FEED, FEED_LONG):
            size = code if op == FEED else code * 37
            yield op, d, data[i : i + size]
            i += size
        elif op == GAP:
            yield op, d, code * 97
        else:
            yield op, d, 0


def encode(conversation: list[tuple[int, bytes]]) -> bytes:
    """A conversation ((direction, bytes), ...) as a script of 32-byte feeds (seed inputs)."""
    out = bytearray()
    for d, data in conversation:
        for j in range(0, len(data), 32):
            piece = data[j : j + 32]
            out.append((d << 7) | (FEED << 5) | (len(piece) - 1))
            out += piece
    return bytes(out)


def _check(diag: Diagnostics) -> None:
    bad = {c: diag.counts[c] for c in BUG_CODES if diag.counts.get(c)}
    if bad:
        details = [r.detail for r in diag.rows if r.code in BUG_CODES][:3]
        raise FoundBug(f"{bad}: {details}")


def _drive(obs: Any, data: bytes, diag: Diagnostics, *, at_eof_close: bool = True) -> None:
    """Feed a script to a TCP-level observer (feed/gap/close/finish)."""
    off = [0, 0]
    closed = [False, False]
    frame = 0
    for op, d, arg in script(data):
        frame += 1
        if closed[d]:
            continue
        if op in (FEED, FEED_LONG):
            assert isinstance(arg, bytes)
            if arg:
                obs.feed(
                    StreamChunk(
                        direction=D[d], data=arg, ts_ns=frame * 1000, frame=frame, offset=off[d]
                    )
                )
                off[d] += len(arg)
        elif op == GAP:
            assert isinstance(arg, int)
            obs.gap(D[d], off[d], arg, frame * 1000, frame)
            off[d] += arg
        else:
            closed[d] = True
            obs.close(D[d], frame * 1000, frame)
    for d in (0, 1):
        if not closed[d] and at_eof_close:
            obs.close(D[d], frame * 1000 + 1, frame + 1, at_eof=True)
    if hasattr(obs, "finish"):
        obs.finish(frame * 1000 + 2, frame + 2)
    _check(diag)


# --------------------------------------------------------------------------- observers


def _keylog() -> Any:
    from pcaptools.protocols.tls import KeyLog

    from .seeds import RFC8448_KEYLOG

    kl = KeyLog()
    kl.add_text(RFC8448_KEYLOG, Diagnostics(), source="fuzz")
    return kl


_KEYS: list[Any] = []


def tls(data: bytes) -> None:
    """TlsObserver with the RFC 8448 keys (so decryption paths run), plaintext handed to the
    HTTP observers its ALPN names."""
    from pcaptools.protocols.detect import tls_inner_factory
    from pcaptools.protocols.tls import TlsObserver

    if not _KEYS:
        _KEYS.append(_keylog())
    diag = Diagnostics()
    obs = TlsObserver(
        tcp_stream=1,
        diag=diag,
        keylog=_KEYS[0],
        inner_factory=tls_inner_factory(tcp_stream=1, diag=diag),
    )
    _drive(obs, data, diag)


def http1(data: bytes) -> None:
    from pcaptools.protocols.http1 import Http1Observer

    diag = Diagnostics()
    try:
        from pcaptools.protocols.websocket import websocket_factory

        ws: Any = websocket_factory(tcp_stream=1, diag=diag)
    except ImportError:  # pragma: no cover - before the WebSocket observer existed
        ws = None
    midstream = bool(data[:1]) and data[0] & 0x40 == 0x40 and data[0] >> 7 == 1
    obs = Http1Observer(
        tcp_stream=1,
        diag=diag,
        websocket_factory=ws,
        midstream=midstream,
        sse_max_line_bytes=4096,
        max_head_bytes=8192,
    )
    _drive(obs, data, diag)


def http2(data: bytes) -> None:
    from pcaptools.protocols.http2 import Http2Observer

    diag = Diagnostics()
    obs = Http2Observer(
        tcp_stream=1,
        diag=diag,
        midstream=len(data) % 7 == 3,
        sse_max_line_bytes=4096,
        hunt_budget=1 << 14,
    )
    _drive(obs, data, diag)


def sse(data: bytes) -> None:
    from pcaptools.protocols.sse import SseParser

    diag = Diagnostics()
    p = SseParser(tcp_stream=1, diag=diag, max_line_bytes=512)
    frame = 0
    for op, _d, arg in script(data):
        frame += 1
        if op in (FEED, FEED_LONG):
            assert isinstance(arg, bytes)
            for e in p.feed(arg, frame, frame):
                if e.data_bytes < 0 or e.index < 0:
                    raise FoundBug(f"negative count in {e}")
        elif op == GAP:
            p.gap(frame, frame)
        else:
            break
    p.close(frame + 1, frame + 1, at_eof=True)
    if len(p._buf) > 512 + 1184:  # the line limit plus one feed
        raise FoundBug(f"SSE buffer grew to {len(p._buf)} bytes")
    _check(diag)


def websocket(data: bytes) -> None:
    from pcaptools.protocols.websocket import WebSocketObserver, handshake_from_headers

    deflate = bool(data[:1]) and data[0] & 1 == 1
    ext = (("sec-websocket-extensions", "permessage-deflate"),) if deflate else ()
    hs = handshake_from_headers(
        (("upgrade", "websocket"), ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="), *ext),
        (("upgrade", "websocket"), ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), *ext),
    )
    diag = Diagnostics()
    obs = WebSocketObserver(
        handshake=hs,
        tcp_stream=1,
        diag=diag,
        max_frame_bytes=1 << 16,
        max_decompressed_bytes=1 << 20,
    )
    _drive(obs, data[1:], diag)


def detect(data: bytes) -> None:
    from pcaptools.protocols.detect import HttpDetector

    diag = Diagnostics()
    det = HttpDetector(tcp_stream=1, diag=diag, midstream=len(data) % 2 == 1, max_probe_bytes=2048)
    _drive(det, data, diag)


def dispatch(data: bytes) -> None:
    from pcaptools.protocols.dispatch import ConnectionObserver

    if not _KEYS:
        _KEYS.append(_keylog())
    diag = Diagnostics()
    obs = ConnectionObserver(tcp_stream=1, diag=diag, keylog=_KEYS[0], midstream=len(data) % 5 == 2)
    _drive(obs, data, diag)


# --------------------------------------------------------------------------- reader + pipeline

_TMP: list[str] = []


def reader(data: bytes) -> None:
    """bytes -> temporary file -> pcaptools.load(): the reader, decoder, TCP analysis,
    reassembly, every observer and every table builder."""
    import pcaptools

    if not _TMP:
        fd, path = tempfile.mkstemp(prefix="pcaptools-fuzz-", suffix=".pcap")
        os.close(fd)
        _TMP.append(path)
    with open(_TMP[0], "wb") as fh:
        fh.write(data)
    try:
        cap = pcaptools.load(_TMP[0], max_decompressed_bytes=4 << 20)
    except pcaptools.CaptureFormatError:
        return
    counts = cap.summary.extra["warning_counts"]
    assert isinstance(counts, dict)
    bad = {c: counts[c] for c in BUG_CODES if counts.get(c)}
    if bad:
        w = cap.warnings
        raise FoundBug(f"{bad}: {w[w['code'].isin(BUG_CODES)]['detail'].tolist()[:3]}")


def pipeline(data: bytes) -> None:
    """The reader harness without the table builders (pandas dominates load() on tiny inputs):
    open_capture -> PacketDecoder -> TcpTracker -> ConnectionObserver, ~20x more executions
    per second. Keep in step with :func:`pcaptools.pipeline.run` (the single pass)."""
    from pcaptools.errors import CaptureFormatError
    from pcaptools.io import open_capture
    from pcaptools.net.decode import PacketDecoder
    from pcaptools.net.packet import TcpSegment
    from pcaptools.protocols.dispatch import ConnectionObserver
    from pcaptools.tcp.tracker import TcpTracker

    if not _TMP:
        reader(b"")  # creates the temporary file
    with open(_TMP[0], "wb") as fh:
        fh.write(data)
    if not _KEYS:
        _KEYS.append(_keylog())
    diag = Diagnostics()
    decoder = PacketDecoder(diag)

    def factory(tcp_stream: int, midstream: bool) -> ConnectionObserver:
        return ConnectionObserver(
            tcp_stream=tcp_stream, diag=diag, keylog=_KEYS[0], midstream=midstream
        )

    tracker = TcpTracker(diag, observer_factory=factory, emit=lambda events: None)
    try:
        reader_cm = open_capture(_TMP[0], diag, max_decompressed_bytes=4 << 20)
    except CaptureFormatError:
        return
    n, last = 0, 0
    with reader_cm as r:
        for raw in r.frames():
            n += 1
            last = raw.ts_ns
            pkt = decoder.decode(raw)
            if type(pkt) is TcpSegment:
                tracker.segment(pkt)
    decoder.finish()
    tracker.finish(last, n)
    _check(diag)


def dns_tcp(data: bytes) -> None:
    """DnsTcpObserver (DNS over TCP: length prefixes, gaps, resynchronisation) into a
    DnsTracker, then, for one input in 16 (chosen by its CRC, so the same input always takes
    the same path), the dns table of what it matched. (Only one in 16: atheris's tracing of
    an instrumented ``==`` on a pandas object keeps ~1.6 KB each time, so building the table
    for every input grew the process ~4 KB an input, to libFuzzer's 2 GB limit after 430,000
    inputs; the same inputs without atheris keep a flat RSS.)"""
    from pcaptools.protocols.dns import DnsTcpObserver, DnsTracker
    from pcaptools.tables.dns_tables import DNS, dns_table

    diag = Diagnostics()
    tracker = DnsTracker(diag)
    obs = DnsTcpObserver(tcp_stream=1, tracker=tracker, diag=diag,
                         addrs=(4, b"\x0a\0\0\x01", 40000, b"\x0a\0\0\x02", 53),
                         midstream=len(data) % 5 == 2)
    _drive(obs, data, diag)
    if zlib.crc32(data) % 16 == 0:
        DNS.check(dns_table(tracker))


HARNESSES: dict[str, Callable[[bytes], None]] = {
    "reader": reader,
    "pipeline": pipeline,
    "tls": tls,
    "http1": http1,
    "http2": http2,
    "sse": sse,
    "websocket": websocket,
    "detect": detect,
    "dispatch": dispatch,
    "dns_tcp": dns_tcp,
}
