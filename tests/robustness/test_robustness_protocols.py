"""Bad-input catalogue, protocol level, through the whole pipeline (pcap -> load()): TLS
records with absurd lengths, a handshake message split across 1,000 records, key logs full
of garbage, HTTP/2 frames announcing 16 MB, HPACK bombs, WebSocket frames announcing 2^63
bytes and deflate bombs, SSE lines that never end.

Each case is one bad connection beside the good one (tcp.stream 0): the bad one gives the
expected warning codes, the good one's rows do not change, and memory stays bounded."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.capture import Capture
from pcaptools.protocols._base import Direction
from tests.protocols.http.helpers import PREFACE, FrameFactory
from tests.protocols.tls._tls_build import (
    alpn_ext,
    client_hello,
    ext,
    record,
    server_hello,
    sni_ext,
)
from tests.robustness._build import (
    C2S,
    S2C,
    Conv,
    assert_good_unchanged,
    bounded,
    codes,
    good_conv,
    later,
    load_bytes,
    pcap,
)


def _run(tmp_path: Path, bad: Conv, **kw: object) -> tuple[Capture, int]:
    """load() the good connection plus ``bad`` under the memory bound; check the good rows."""
    cap, peak = bounded(lambda: load_bytes(tmp_path, pcap(good_conv(), bad), **kw))  # type: ignore[arg-type]
    ref = load_bytes(tmp_path, pcap(good_conv()), "ref.pcap")
    assert_good_unchanged(cap, ref)
    return cap, peak


# --------------------------------------------------------------------------- TLS

HELLO = client_hello(b"r" * 32, [0x1301, 0x1302], [sni_ext("ok.example"), alpn_ext("h2")])


def test_tls_records_with_absurd_lengths(tmp_path: Path) -> None:
    bad = Conv(sport=41001, dport=443, t0=later(1)).handshake()
    bad.send(C2S, record(22, HELLO))
    bad.send(C2S, b"\x17\x03\x03\xff\xff" + b"A" * 3000)  # 65535 > 2^14 + 2048
    # a legal-size record whose handshake message announces 16 MB, cut by the FIN
    bad.send(S2C, record(22, server_hello(b"s" * 32, 0x1301, [])))
    bad.send(S2C, b"\x16\x03\x03\x48\x00" + b"\x01\xff\xff\xff" + b"z" * 100).close()
    cap, _ = _run(tmp_path, bad)
    assert codes(cap) == ["tls.record_overflow", "tls.truncated_record"]
    assert "65535" in cap.warnings["detail"].iloc[0]
    (hs,) = cap.tls_handshakes.itertuples()
    assert (hs.tcp_stream, hs.sni, hs.alpn_offered) == (1, "ok.example", "h2")


def test_tls_handshake_message_split_across_1000_records(tmp_path: Path) -> None:
    hello = client_hello(b"r" * 32, [0x1301], [sni_ext("split.example"), ext(21, b"\0" * 3900)])
    records = b"".join(record(22, hello[i : i + 4]) for i in range(0, len(hello), 4))
    assert records.count(b"\x16\x03\x03\x00") >= 990
    bad = Conv(sport=41002, dport=443, t0=later(1)).handshake().send(C2S, records).close()
    cap, _ = _run(tmp_path, bad)
    assert codes(cap) == []
    assert cap.tls_handshakes["sni"].tolist() == ["split.example"]
    assert len(cap.tls_records) == len(hello) // 4 + 1


def test_tls_handshake_messages_of_one_byte_records_in_both_directions(tmp_path: Path) -> None:
    """Every record one byte long, every segment one record: the worst fragmentation."""
    shello = server_hello(b"s" * 32, 0x1301, [])
    bad = Conv(sport=41003, dport=443, t0=later(1)).handshake()
    for d, msg in ((C2S, HELLO), (S2C, shello)):
        for i in range(len(msg)):
            bad.send(d, record(22, msg[i : i + 1]), acks=False)
    cap, _ = _run(tmp_path, bad.close())
    assert codes(cap) == []
    (hs,) = cap.tls_handshakes.itertuples()
    assert (hs.sni, hs.cipher_suite) == ("ok.example", "TLS_AES_128_GCM_SHA256")


def test_key_log_with_garbage_lines(tmp_path: Path) -> None:
    secret = "ab" * 48
    lines = [
        b"# a comment",
        b"CLIENT_RANDOM " + b"11" * 32 + b" " + secret.encode(),  # valid
        b"CLIENT_RANDOM " + b"zz" * 32 + b" " + secret.encode(),  # bad hex
        b"CLIENT_RANDOM " + b"11" * 31,  # too few fields
        b"\x00\xff\xfe binary \x80",
        b"SERVER_TRAFFIC_SECRET_0 " + b"22" * 32 + b" " + b"3" * 10_001,  # odd-length hex
        "CLIENT_RANDOM ünïcödé".encode(),
    ]
    keylog = tmp_path / "keys.txt"
    keylog.write_bytes((b"\n".join(lines) + b"\n") * 200 + b"x" * (4 << 20))  # + a 4 MiB line
    bad = Conv(sport=41004, dport=443, t0=later(1)).handshake().send(C2S, record(22, HELLO)).close()
    cap, _ = _run(tmp_path, bad, keylog=keylog)
    counts = cap.summary.extra["warning_counts"]
    assert counts == {"tls.keylog_bad_line": 5 * 200 + 1}
    w = cap.warnings[cap.warnings["code"] == "tls.keylog_bad_line"]
    assert w["detail"].str.contains("line 3").any()  # the line number, never the content
    for detail in cap.warnings["detail"]:
        assert secret not in detail and "zz" * 32 not in detail and "xxxx" not in detail
        assert "ünïcödé" not in detail and "binary" not in detail


# --------------------------------------------------------------------------- HTTP/2

REQ = [(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/")]
END = ("END_HEADERS", "END_STREAM")


def _h2(sport: int, client: bytes, server: bytes = b"", *, acks: bool = True) -> Conv:
    ff = FrameFactory()
    c = Conv(sport=sport, dport=8080, t0=later(1)).handshake()
    c.send(C2S, PREFACE + ff.settings({}) + client, acks=acks)
    c.send(S2C, ff.settings({}) + ff.settings(ack=True) + server, acks=acks)
    return c.close()


def _frame_header(length: int, ftype: int, flags: int, sid: int) -> bytes:
    return length.to_bytes(3, "big") + bytes([ftype, flags]) + struct.pack(">I", sid)


def _header_frames(sid: int, block: bytes, end_stream: bool = True) -> bytes:
    """A header block as HEADERS + CONTINUATION frames of at most 16000 bytes."""
    parts = [block[i : i + 16000] for i in range(0, len(block), 16000)]
    out = []
    for i, p in enumerate(parts):
        flags = (0x4 if i == len(parts) - 1 else 0) | (0x1 if i == 0 and end_stream else 0)
        out.append(_frame_header(len(p), 1 if i == 0 else 9, flags, sid) + p)
    return b"".join(out)


def test_http2_data_frame_of_16_mib(tmp_path: Path) -> None:
    """A DATA frame of 2^24 - 1 bytes (over the 16 KiB max frame size) really sent, then a
    normal frame: the body is counted, not buffered, and frame alignment is kept."""
    ff = FrameFactory()
    big = (1 << 24) - 1
    server = (
        ff.headers(
            1,
            [(":status", "200"), ("content-type", "text/plain")],
            direction=Direction.SERVER_TO_CLIENT,
        )
        + _frame_header(big, 0, 0, 1)
        + bytes(big)
        + ff.data(1, b"tail", end_stream=True)
    )
    bad = _h2(41010, ff.headers(1, REQ, flags=END), server, acks=False)
    cap, peak = _run(tmp_path, bad)
    # 11,600 segments never acknowledged: the TCP analysis' own bound is hit as well
    assert codes(cap) == ["http2.frame_too_large", "tcp.unacked_limit"]
    assert "16777215" in cap.warnings["detail"].iloc[0]
    data = cap.http2_frames[cap.http2_frames["type"].astype(str) == "DATA"]
    assert data["length"].tolist() == [big, 4]
    (st,) = cap.http2_streams.itertuples()
    assert (st.status, str(st.end_reason)) == (200, "end_stream")
    assert peak < 100 << 20  # the 17 MB pcap itself is part of this


def test_http2_frame_announcing_16_mib_then_the_connection_ends(tmp_path: Path) -> None:
    ff = FrameFactory()
    client = ff.headers(1, REQ, flags=END) + _frame_header((1 << 24) - 1, 0, 0, 1) + b"x" * 5000
    cap, _ = _run(tmp_path, _h2(41011, client))
    assert codes(cap) == ["http2.frame_too_large", "http2.truncated_frame"]


def test_hpack_table_size_update_to_4_gib(tmp_path: Path) -> None:
    """A dynamic table size update far above SETTINGS_HEADER_TABLE_SIZE: that block fails,
    the decoder restarts, the next stream (encoded by a fresh encoder) decodes."""
    block = b"\x3f\xe1\xff\xff\xff\x0f" + FrameFactory().headers_block(REQ)
    next_stream = FrameFactory().headers(3, REQ, flags=END)
    cap, _ = _run(tmp_path, _h2(41012, _header_frames(1, block) + next_stream))
    assert codes(cap) == ["http2.hpack_decode_failed"]
    assert "InvalidTableSizeError" in cap.warnings["detail"].iloc[0]
    streams = cap.http2_streams.set_index("stream_id")
    assert streams.loc[1, "path"] is pd_na() and streams.loc[3, "path"] == "/"


def pd_na() -> object:
    import pandas as pd

    return pd.NA


def test_hpack_100k_small_headers(tmp_path: Path) -> None:
    """100,000 one-byte indexed headers (`:method: GET`): decoded, bounded by the header list
    size limit (16 MiB of RFC 7541 size), not by a count."""
    block = b"\x82" * 100_000
    cap, _ = _run(tmp_path, _h2(41013, _header_frames(1, block)))
    assert codes(cap) == []
    headers = cap.http2_frames["headers"].dropna().tolist()
    assert [len(h) for h in headers] == [100_000]
    assert cap.http2_streams["method"].tolist() == ["GET"]


def test_hpack_reference_bomb(tmp_path: Path) -> None:
    """One 4 KB header put in the dynamic table, then referenced 30,000 times by a one-byte
    index: 120 MB of headers from 34 KB. Refused at the header list size limit."""
    # literal with incremental indexing, name "x", a 4000-byte value: 4033 bytes of the
    # 4096-byte default table (RFC 7541 4.1 counts 32 bytes of overhead per entry)
    literal = b"\x40\x01x\x7f\xa1\x1e" + b"v" * 4000
    block = literal + b"\xbe" * 30_000  # index 62: the entry just added
    cap, peak = _run(tmp_path, _h2(41014, _header_frames(1, block)))
    assert codes(cap) == ["http2.hpack_decode_failed"]
    assert "OversizedHeaderListError" in cap.warnings["detail"].iloc[0]
    assert peak < 100 << 20


def test_http2_header_block_that_never_ends(tmp_path: Path) -> None:
    """CONTINUATION frames without END_HEADERS, 2 MiB in all: the block is dropped at the
    header block limit with one row, and the connection is still read to its end."""
    ff = FrameFactory()
    client = _frame_header(1, 1, 0x1, 1) + b"\x82"
    client += b"".join(_frame_header(16000, 9, 0, 1) + b"\x82" * 16000 for _ in range(130))
    cap, _ = _run(tmp_path, _h2(41015, client + ff.ping(b"12345678")))
    assert codes(cap)[0] == "http2.bad_frame"
    assert "PING" in cap.http2_frames["type"].astype(str).tolist()


# --------------------------------------------------------------------------- SSE


def test_sse_line_that_never_ends(tmp_path: Path) -> None:
    body = b"data: hello\n\n" + b"data: " + b"x" * (8 << 20) + b"\n\ndata: after\n\n"
    bad = Conv(sport=41020, dport=8080, t0=later(1)).handshake()
    bad.send(C2S, b"GET /stream HTTP/1.1\r\nHost: h\r\n\r\n")
    bad.send(S2C, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body, acks=False)
    cap, peak = _run(tmp_path, bad.close())
    assert codes(cap) == ["sse.unterminated_event"]
    assert cap.sse_events["data"].tolist() == ["hello", "after"]
    assert cap.http_requests["sse_events"].tolist() == [0, 2]
    assert peak < 100 << 20


def test_sse_without_line_ends_until_the_capture_ends(tmp_path: Path) -> None:
    bad = Conv(sport=41021, dport=8080, t0=later(1)).handshake()
    bad.send(C2S, b"GET /stream HTTP/1.1\r\nHost: h\r\n\r\n")
    bad.send(
        S2C, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: " + b"y" * (3 << 20)
    )
    cap, _ = _run(tmp_path, bad)  # no FIN: open at the end of the capture
    assert codes(cap) == ["sse.unterminated_event"]
    assert len(cap.sse_events) == 0


# --------------------------------------------------------------------------- WebSocket

UPGRADE = (
    b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)
SWITCHED = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)


def ws_frame(
    payload: bytes,
    opcode: int = 1,
    *,
    rsv1: bool = False,
    fin: bool = True,
    mask: bytes | None = None,
    length: int | None = None,
) -> bytes:
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload) if length is None else length
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 1 << 16:
        head = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


def _ws(sport: int, server_frames: bytes, client_frames: bytes = b"") -> Conv:
    c = Conv(sport=sport, dport=8080, t0=later(1)).handshake()
    c.send(C2S, UPGRADE).send(S2C, SWITCHED)
    if client_frames:
        c.send(C2S, client_frames, acks=False)
    return c.send(S2C, server_frames, acks=False)


def _ws_codes_only(cap: Capture) -> None:
    assert all(c.startswith("ws.") or c == "http1.upgrade_not_followed" for c in codes(cap)), codes(
        cap
    )


@pytest.mark.parametrize("length", [2**63 - 1, 2**64 - 1], ids=["2^63-1", "2^64-1"])
def test_websocket_frame_announcing_2_to_the_63_bytes(tmp_path: Path, length: int) -> None:
    frames = ws_frame(b"hello") + ws_frame(b"", opcode=2, length=length) + b"A" * 5000
    cap, _ = _run(tmp_path, _ws(41030, frames, ws_frame(b"hi", mask=b"abcd")).close())
    _ws_codes_only(cap)
    assert len(cap.http_requests) == 2  # the good GET and the Upgrade
    if "ws_frames" in cap.tables:
        assert len(cap.tables["ws_frames"]) >= 2


def test_websocket_deflate_bomb(tmp_path: Path) -> None:
    """One permessage-deflate message that inflates to 1 GiB (1 MB on the wire)."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = z.compress(b"\0" * (64 << 20))
    bomb = chunk * 16 + z.flush(zlib.Z_SYNC_FLUSH)[:-4]  # deflate tolerates the repetition
    frames = ws_frame(b"before") + ws_frame(bomb, opcode=2, rsv1=True) + ws_frame(b"after")
    cap, peak = _run(tmp_path, _ws(41031, frames).close())
    _ws_codes_only(cap)
    assert peak < 200 << 20


def test_websocket_many_tiny_fragments(tmp_path: Path) -> None:
    """A text message in 20,000 one-byte continuation fragments."""
    frames = ws_frame(b"a", fin=False) + ws_frame(b"b", opcode=0, fin=False) * 20_000
    frames += ws_frame(b"c", opcode=0)
    cap, _ = _run(tmp_path, _ws(41032, frames).close())
    _ws_codes_only(cap)


def test_keylog_is_never_echoed(tmp_path: Path) -> None:
    """A real key log line with a pcapng Decryption Secrets Block too: no secret in any table."""
    from tests.helpers import dsb, epb, idb, shb

    secret = "c0ffee" * 16
    text = f"CLIENT_RANDOM {'11' * 32} {secret}\nbogus {secret}\n".encode()
    conv = good_conv()
    data = shb() + idb(1, tsresol=9) + dsb(0x544C534B, text)
    data += b"".join(epb(0, ts, f) for ts, f in conv.packets)
    p = tmp_path / "k.pcapng"
    p.write_bytes(data)
    cap = pcaptools.load(p)
    assert codes(cap) == ["tls.keylog_bad_line"]
    for name, df in cap.tables.items():
        assert secret not in df.to_csv(), name


# --------------------------------------------------------------------------- TCP reassembly


def test_out_of_order_flood_behind_a_hole(tmp_path: Path) -> None:
    """The first response segment is never captured and 6 MB follow it: the reassembly
    buffer (4 MiB per direction) gives the hole up as a gap instead of growing."""
    bad = Conv(sport=41040, dport=8080, t0=later(1)).handshake()
    bad.send(C2S, b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
    first = len(bad.packets)
    bad.send(
        S2C, b"HTTP/1.1 200 OK\r\nContent-Length: 6000000\r\n\r\n" + b"z" * 6_000_000, acks=False
    )
    del bad.packets[first]  # lost before the capture point
    cap, peak = _run(tmp_path, bad.close())
    assert codes(cap) == ["tcp.reassembly_gap", "tcp.reassembly_limit"]
    assert "1448 bytes at stream offset 0" in cap.warnings["detail"].iloc[0]
    # the exchange is still a row: its response head was in the lost segment
    assert cap.http_requests["path"].tolist() == ["/v1/models", "/big"]
    assert peak < 100 << 20


# --------------------------------------------------------------------------- observer boundary


def test_an_observer_bug_costs_one_connection_not_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in an observer (simulated: Http1Observer raises on one connection's bytes) is a
    tcp.observer_error row; that connection stops being parsed, every other one is analysed."""
    from pcaptools.protocols.http1 import Http1Observer

    real_feed = Http1Observer.feed

    def buggy_feed(self: Http1Observer, chunk: object) -> list[object]:
        if b"BOOM" in chunk.data:  # type: ignore[attr-defined]
            raise ZeroDivisionError("simulated observer bug")
        return real_feed(self, chunk)  # type: ignore[arg-type]

    monkeypatch.setattr(Http1Observer, "feed", buggy_feed)
    bad = Conv(sport=41050, dport=8080, t0=later(1)).handshake()
    bad.send(C2S, b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n").send(S2C, b"HTTP/1.1 204 OK\r\n\r\n")
    bad.send(C2S, b"GET /BOOM HTTP/1.1\r\nHost: h\r\n\r\n").send(S2C, b"x" * 5000).close()
    cap, _ = _run(tmp_path, bad)
    assert codes(cap) == ["tcp.observer_error"]
    row = cap.warnings.iloc[0]
    assert (
        row["tcp_stream"] == 1 and "ZeroDivisionError in ConnectionObserver.feed" in row["detail"]
    )
    assert len(cap.connections) == 2
    assert cap.connections["server_bytes"].iloc[1] == 19 + 5000  # TCP counters unaffected


def test_tls13_server_hello_naming_a_tls12_suite(tmp_path: Path) -> None:
    """Found by fuzzing: supported_versions says TLS 1.3 but the cipher suite is
    TLS_RSA_WITH_NULL_MD5, and the key log has TLS 1.3 secrets for the session. Was: ValueError
    inside the TLS observer (tls.internal_error); now: tls.unsupported_cipher."""
    cr = b"r" * 32
    hello = client_hello(cr, [0x1301, 0x0001], [sni_ext("n.example"), ext(43, b"\x02\x03\x04")])
    shello = server_hello(b"s" * 32, 0x0001, [ext(43, b"\x03\x04")])
    keylog = tmp_path / "keys.txt"
    keylog.write_text(
        "".join(
            f"{label} {cr.hex()} {'ab' * 32}\n"
            for label in (
                "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                "CLIENT_TRAFFIC_SECRET_0",
                "SERVER_TRAFFIC_SECRET_0",
            )
        )
    )
    bad = Conv(sport=41060, dport=443, t0=later(1)).handshake()
    bad.send(C2S, record(22, hello)).send(S2C, record(22, shello) + record(23, b"\0" * 40))
    cap, _ = _run(tmp_path, bad.close(), keylog=keylog)
    assert codes(cap) == ["tls.unsupported_cipher"]
    assert "TLS_RSA_WITH_NULL_MD5" in cap.warnings["detail"].iloc[0]


def test_sse_retry_longer_than_int64(tmp_path: Path) -> None:
    """An SSE ``retry:`` of 26 digits reached the sse_events builder's int64 column, which
    raised OverflowError outside the observer guard and ended the load; it is now a warning
    row and an NA, and the events around it are kept."""
    body = b"retry: 99999999999999999999999999\ndata: x\n\nretry: 1500\ndata: y\n\n"
    bad = Conv(sport=41090, dport=8080, t0=later(1)).handshake()
    bad.send(C2S, b"GET /stream HTTP/1.1\r\nHost: h\r\n\r\n")
    bad.send(S2C, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             b"Content-Length: %d\r\n\r\n" % len(body) + body).close()
    cap, _ = _run(tmp_path, bad)
    assert codes(cap) == ["sse.bad_retry"]
    ev = cap.sse_events[cap.sse_events["tcp_stream"] == 1]
    assert ev["data"].tolist() == ["x", "y"]
    assert ev["retry_ms"].tolist() == [pd.NA, 1500]
