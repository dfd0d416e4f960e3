"""WebSocketObserver on hand-built frames: fields, messages, anomalies, gaps, limits."""

from __future__ import annotations

import zlib

import pytest

from pcaptools.protocols.websocket import (
    WsFrame,
    accept_for_key,
    handshake_from_headers,
    parse_extensions,
    valid_close_code,
)
from tests.protocols.ws.helpers import (
    C2S,
    MASK,
    S2C,
    Deflater,
    cframe,
    close_payload,
    codes,
    conn_of,
    feed,
    frame,
    frames_of,
    headers,
    messages_of,
    observer,
    request,
    response,
)


def brief(f: WsFrame) -> tuple[object, ...]:
    return (
        f.frame,
        f.direction,
        f.index,
        f.fin,
        f.rsv,
        f.opcode,
        f.masked,
        f.payload_len,
        f.header_bytes,
        f.message_index,
        f.close_code,
        f.close_reason,
        f.control_payload,
    )


def test_text_ping_pong_close_exchange() -> None:
    obs, diag = observer()
    ev = feed(
        obs,
        [
            (C2S, cframe(1, b"hello")),
            (S2C, frame(1, "héllo wörld".encode())),
            (S2C, frame(9, b"hb-1")),
            (C2S, cframe(10, b"hb-1")),
            (C2S, cframe(8, close_payload(1000, "bye"))),
            (S2C, frame(8, close_payload(1000))),
        ],
    )
    assert [brief(f) for f in frames_of(ev)] == [
        (1, C2S, 0, True, 0, 1, True, 5, 6, 0, None, None, None),
        (2, S2C, 0, True, 0, 1, False, 13, 2, 0, None, None, None),
        (3, S2C, 1, True, 0, 9, False, 4, 2, None, None, None, b"hb-1"),
        (4, C2S, 1, True, 0, 10, True, 4, 6, None, None, None, b"hb-1"),
        (5, C2S, 2, True, 0, 8, True, 5, 6, None, 1000, "bye", b"\x03\xe8bye"),
        (6, S2C, 2, True, 0, 8, False, 2, 2, None, 1000, None, b"\x03\xe8"),
    ]
    msgs = messages_of(ev)
    assert [
        (
            m.frame,
            m.direction,
            m.index,
            m.type,
            m.fragments,
            m.wire_bytes,
            m.payload_bytes,
            m.utf8_ok,
            m.preview,
            m.end_reason,
        )
        for m in msgs
    ] == [
        (1, C2S, 0, "text", 1, 11, 5, True, "hello", "fin"),
        (2, S2C, 0, "text", 1, 15, 13, True, "héllo wörld", "fin"),
    ]
    c = conn_of(ev)
    assert (c.client_frames, c.server_frames, c.client_messages, c.server_messages) == (3, 3, 1, 1)
    assert (c.client_pings, c.server_pings, c.client_pongs, c.server_pongs) == (0, 1, 1, 0)
    assert (c.client_wire_bytes, c.server_wire_bytes) == (6 * 3 + 5 + 4 + 5, 2 * 3 + 13 + 4 + 2)
    assert (
        c.close_by,
        c.close_frame,
        c.client_close_code,
        c.client_close_reason,
        c.server_close_code,
        c.end_reason,
    ) == (C2S, 5, 1000, "bye", 1000, "close_handshake")
    assert c.handshake.accept_ok is True and c.handshake.path == "/chat"
    assert diag.rows == []


def test_fragmented_message_with_interleaved_ping() -> None:
    obs, diag = observer()
    ev = feed(
        obs,
        [
            (S2C, frame(1, b"Hel", fin=False) + frame(9, b"")),
            (S2C, frame(0, b"lo, ", fin=False)),
            (S2C, frame(0, b"world")),
            (S2C, frame(2, b"\x00\x01", fin=False) + frame(0, b"\x02")),
        ],
    )
    fr = frames_of(ev)
    assert [(f.frame, f.opcode, f.fin, f.message_index) for f in fr] == [
        (1, 1, False, 0),
        (1, 9, True, None),
        (2, 0, False, 0),
        (3, 0, True, 0),
        (4, 2, False, 1),
        (4, 0, True, 1),
    ]
    msgs = messages_of(ev)
    assert [
        (
            m.index,
            m.type,
            m.fragments,
            m.first_frame,
            m.frame,
            m.payload_bytes,
            m.wire_bytes,
            m.preview,
            m.utf8_ok,
        )
        for m in msgs
    ] == [
        (0, "text", 3, 1, 3, 12, 18, "Hello, world", True),
        (1, "binary", 2, 4, 4, 3, 7, None, None),
    ]
    assert diag.rows == []


def test_frame_split_across_chunks_keeps_start_and_end_frames() -> None:
    obs, _ = observer()
    data = frame(1, b"x" * 300)  # 4-byte header (16-bit length)
    ev = feed(obs, [(S2C, data[:1]), (S2C, data[1:3]), (S2C, data[3:100]), (S2C, data[100:])])
    (f,) = frames_of(ev)
    assert (f.start_frame, f.frame, f.payload_len, f.header_bytes) == (1, 4, 300, 4)
    (m,) = messages_of(ev)
    assert (m.first_frame, m.frame, len(m.preview or ""), m.preview_truncated) == (1, 4, 256, True)


def test_extended_lengths_and_non_minimal_encoding() -> None:
    obs, diag = observer()
    big = b"a" * 70_000
    ev = feed(
        obs,
        [
            (S2C, frame(2, big)),  # 64-bit length
            (S2C, frame(2, b"b" * 200)),  # 16-bit length
            (S2C, frame(2, b"abc", ext=64)),  # non-minimal
            (S2C, frame(2, b"abc", ext=16)),
        ],
    )
    assert [(f.payload_len, f.header_bytes) for f in frames_of(ev)] == [
        (70_000, 10),
        (200, 4),
        (3, 10),
        (3, 4),
    ]
    assert codes(diag) == [("ws.non_minimal_length", 3, "server_to_client")]


def test_masking_expectations_reported_once_per_direction_and_counted() -> None:
    obs, diag = observer()
    ev = feed(
        obs,
        [
            (C2S, frame(1, b"plain") + frame(1, b"again")),
            (S2C, frame(1, b"masked", mask=MASK)),
            (S2C, frame(1, b"ok")),
        ],
    )
    assert [(m.direction, m.preview) for m in messages_of(ev)] == [
        (C2S, "plain"),
        (C2S, "again"),
        (S2C, "masked"),
        (S2C, "ok"),
    ]
    c = conn_of(ev)
    assert (c.client_mask_errors, c.server_mask_errors) == (2, 1)
    assert codes(diag) == [
        ("ws.unmasked_client_frame", 1, "client_to_server"),
        ("ws.masked_server_frame", 2, "server_to_client"),
    ]


def test_protocol_violations_are_reported_and_parsing_continues() -> None:
    obs, diag = observer()
    ev = feed(
        obs,
        [
            (S2C, frame(3, b"xyz")),  # reserved data opcode
            (S2C, frame(0x0B, b"")),  # reserved control opcode
            (S2C, frame(1, b"r", rsv=4)),  # RSV1 without permessage-deflate
            (S2C, frame(9, b"p" * 126)),  # control frame too long
            (S2C, frame(10, b"", fin=False)),  # fragmented control frame
            (S2C, frame(0, b"orphan")),  # continuation without a message
            (S2C, frame(1, b"first", fin=False) + frame(1, b"second")),  # new message before FIN
            (S2C, frame(1, b"\xff\xfe")),  # invalid UTF-8
            (S2C, frame(8, b"\x03")),  # 1-byte close payload
            (S2C, frame(8, close_payload(1005))),  # code that may not be sent
            (S2C, frame(8, b"\x03\xe8\xc3\x28")),  # reason not UTF-8
            (S2C, frame(1, b"late")),  # data after close
        ],
    )
    assert [(f.frame, f.opcode, f.message_index) for f in frames_of(ev)] == [
        (1, 3, None),
        (2, 11, None),
        (3, 1, 0),
        (4, 9, None),
        (5, 10, None),
        (6, 0, 1),
        (7, 1, 2),
        (7, 1, 3),
        (8, 1, 4),
        (9, 8, None),
        (10, 8, None),
        (11, 8, None),
        (12, 1, 5),
    ]
    assert [
        (m.index, m.type, m.end_reason, m.complete, m.utf8_ok, m.preview) for m in messages_of(ev)
    ] == [
        (0, "text", "fin", True, True, "r"),
        (1, "unknown", "fin", True, None, None),
        (2, "text", "interrupted", False, None, "first"),
        (3, "text", "fin", True, True, "second"),
        (4, "text", "fin", True, False, "\ufffd\ufffd"),
        (5, "text", "fin", True, True, "late"),
    ]
    fr = frames_of(ev)
    assert [(f.close_code, f.close_reason) for f in fr[9:12]] == [
        (None, None),
        (1005, None),
        (1000, "\ufffd("),
    ]
    assert codes(diag) == [
        ("ws.bad_opcode", 1, "server_to_client"),
        ("ws.bad_opcode", 2, "server_to_client"),
        ("ws.reserved_bits", 3, "server_to_client"),
        ("ws.control_frame_too_long", 4, "server_to_client"),
        ("ws.fragmented_control_frame", 5, "server_to_client"),
        ("ws.bad_fragmentation", 6, "server_to_client"),
        ("ws.bad_fragmentation", 7, "server_to_client"),
        ("ws.invalid_utf8", 8, "server_to_client"),
        ("ws.bad_close_payload", 9, "server_to_client"),
        ("ws.bad_close_payload", 10, "server_to_client"),
        ("ws.bad_close_payload", 11, "server_to_client"),
        ("ws.frame_after_close", 12, "server_to_client"),
    ]
    c = conn_of(ev)
    assert (c.server_close_code, c.server_close_frame, c.close_by) == (None, 9, S2C)
    assert c.end_reason == "close_unanswered"


def test_huge_lengths_are_counted_and_skipped_without_allocating() -> None:
    obs, diag = observer(max_frame_bytes=1000)
    ev = feed(
        obs,
        [
            (S2C, frame(2, b"y" * 1001)),  # over the limit: skipped, still in step
            (S2C, frame(1, b"after")),
            (S2C, frame(2, b"z" * 10, length=(1 << 63) - 1)),  # swallows the rest of the stream
            (S2C, b"\x81\x05never" * 1000),
        ],
    )
    fr = frames_of(ev)
    assert [(f.frame, f.opcode, f.payload_len, f.lost_bytes, f.complete) for f in fr] == [
        (1, 2, 1001, 0, True),
        (2, 1, 5, 0, True),
        (6, 2, (1 << 63) - 1, 0, False),  # cut off by the FIN (frame 6)
    ]
    msgs = messages_of(ev)
    assert [(m.index, m.end_reason, m.payload_bytes) for m in msgs] == [
        (0, "fin", 1001),
        (1, "fin", 5),
        (2, "connection_closed", 7010),
    ]  # the bytes sent
    end = conn_of(ev)
    assert (end.server_payload_bytes, end.server_wire_bytes) == (1001 + 5 + 7010, 1005 + 7 + 7020)
    assert codes(diag) == [
        ("ws.frame_too_large", 1, "server_to_client"),
        ("ws.frame_too_large", 3, "server_to_client"),
        ("ws.truncated_frame", 6, "server_to_client"),
    ]


def test_top_bit_of_64_bit_length() -> None:
    obs, diag = observer()
    ev = feed(obs, [(S2C, frame(2, b"", length=(1 << 64) - 1))], at_eof=True)
    (f,) = frames_of(ev)
    assert (f.payload_len, f.complete) == ((1 << 64) - 1, False)
    assert codes(diag) == [("ws.frame_too_large", 1, "server_to_client")]  # no truncation at EOF


def test_gap_inside_a_payload_keeps_step() -> None:
    obs, diag = observer()
    first = frame(1, b"0123456789" * 3)
    segs = [(S2C, first[:12]), (S2C, first[22:]), (S2C, frame(1, b"next"))]
    ev = []
    from tests.protocols.ws.helpers import chunks

    cs = chunks(segs)
    ev += obs.feed(cs[0])
    ev += obs.gap(S2C, 12, 10, cs[1].ts_ns, 2)
    # the chunk after the hole carries its real offset
    ev += obs.feed(
        type(cs[1])(direction=S2C, data=cs[1].data, ts_ns=cs[1].ts_ns, frame=2, offset=22)
    )
    ev += obs.feed(
        type(cs[2])(
            direction=S2C, data=cs[2].data, ts_ns=cs[2].ts_ns, frame=3, offset=22 + len(cs[1].data)
        )
    )
    ev += obs.close(S2C, 9, 4, at_eof=True)
    fr = frames_of(ev)
    assert [(f.frame, f.payload_len, f.lost_bytes) for f in fr] == [(2, 30, 10), (3, 4, 0)]
    msgs = messages_of(ev)
    # the preview stops at the first lost byte
    assert [(m.lost_bytes, m.utf8_ok, m.preview, m.preview_truncated) for m in msgs] == [
        (10, None, "0123456789", True),
        (0, True, "next", False),
    ]
    assert diag.rows == []


def test_gap_between_frames_resynchronises() -> None:
    obs, diag = observer()
    a = frame(1, b"one")
    b = frame(1, b"two")
    c = frame(2, bytes(range(40)))
    d = frame(1, b"four")
    ev = obs.feed(_chunk(S2C, a, 1, 0))
    ev += obs.gap(S2C, len(a), len(b) + 3, 2, 2)  # b and the first 3 bytes of c are lost
    # the rest of c, then d: resync happens at d (c's tail is not a plausible frame chain)
    off = len(a) + len(b) + 3
    ev += obs.feed(_chunk(S2C, c[3:] + d, 3, off))
    ev += obs.close(S2C, 4, 4, at_eof=True)
    assert [(f.frame, f.opcode, f.payload_len) for f in frames_of(ev)] == [(1, 1, 3), (3, 1, 4)]
    assert [m.preview for m in messages_of(ev)] == ["one", "four"]
    assert codes(diag) == [("ws.resynchronised", 3, "server_to_client")]
    assert "after skipping 47 bytes" in diag.rows[0].detail  # 8 lost + 39 searched
    c_end = conn_of(ev + obs.close(C2S, 5, 5))
    assert c_end.server_skipped_bytes == len(b) + 3 + len(c) - 3


def test_unrecoverable_direction_desyncs_within_budget() -> None:
    obs, diag = observer()
    ev = obs.feed(_chunk(C2S, cframe(1, b"hi"), 1, 0))
    ev += obs.gap(C2S, 8, 5, 2, 2)
    junk = bytes([0x61]) * (1 << 16)  # 'a': RSV bits set, never a plausible header
    off = 13
    for i in range(20):
        ev += obs.feed(_chunk(C2S, junk, 3 + i, off))
        off += len(junk)
    ev += obs.close(C2S, 99, 99)
    ev += obs.close(S2C, 99, 100)
    c = conn_of(ev)
    assert c.desynced is True and c.end_reason == "desynced"
    assert c.client_skipped_bytes == 5 + 20 * (1 << 16)
    # 1 MiB searched: the 17th chunk of 64 KiB (frame 19) goes over the budget
    assert codes(diag) == [("ws.desynced", 19, "client_to_server")]


def test_truncated_frame_at_close_but_not_at_end_of_capture() -> None:
    obs, diag = observer()
    ev = feed(obs, [(S2C, frame(1, b"abcdef")[:5])])
    assert [(f.complete, f.lost_bytes, f.payload_len) for f in frames_of(ev)] == [(False, 0, 6)]
    assert [(m.end_reason, m.complete, m.utf8_ok) for m in messages_of(ev)] == [
        ("connection_closed", False, None)
    ]
    assert codes(diag) == [("ws.truncated_frame", 3, "server_to_client")]
    assert conn_of(ev).end_reason == "no_close"
    obs2, diag2 = observer()
    ev2 = feed(obs2, [(S2C, frame(1, b"abcdef")[:5]), (C2S, b"\x81")], at_eof=True)
    assert [(m.end_reason) for m in messages_of(ev2)] == ["open_at_eof"]
    assert diag2.rows == []
    assert conn_of(ev2).end_reason == "open_at_eof"
    assert obs2.finish() == [] and obs2.feed(_chunk(S2C, b"\x81\x00", 9, 5)) == []


def test_finish_closes_everything_once() -> None:
    obs, _ = observer()
    ev = obs.feed(_chunk(C2S, cframe(1, b"x", fin=False), 1, 0))
    ev += obs.finish(5, 7)
    assert [(m.end_reason, m.frame) for m in messages_of(ev)] == [("open_at_eof", 7)]
    assert conn_of(ev).frame == 7
    assert obs.finished and obs.finish() == []


# --------------------------------------------------------------------------- deflate


def test_permessage_deflate_with_context_takeover() -> None:
    ext = "permessage-deflate; client_max_window_bits=12"
    obs, diag = observer(extensions=ext, offered="permessage-deflate; client_max_window_bits")
    srv, cli = Deflater(), Deflater(wbits=12)
    texts = [
        '{"type":"response.delta","delta":"Hello"}',
        '{"type":"response.delta","delta":"Hello"}',
        "x" * 5000,
    ]
    segs = [(S2C, frame(1, srv.message(t.encode()), rsv=4)) for t in texts]
    big = cli.message(b"\x00" * 100_000)
    segs.append((C2S, cframe(2, big[:10], rsv=4, fin=False)))  # fragmented, RSV1 on the first
    segs.append((C2S, cframe(0, big[10:])))
    segs.append((S2C, frame(1, b"not compressed")))
    ev = feed(obs, segs)
    assert obs.handshake.permessage_deflate and obs.handshake.client_max_window_bits == 12
    msgs = messages_of(ev)
    assert [
        (
            m.direction,
            m.type,
            m.compressed,
            m.decompress,
            m.decompressed_bytes,
            m.json_type,
            m.utf8_ok,
        )
        for m in msgs
    ] == [
        (S2C, "text", True, "ok", 41, "response.delta", True),
        (S2C, "text", True, "ok", 41, "response.delta", True),
        (S2C, "text", True, "ok", 5000, None, True),
        (C2S, "binary", True, "ok", 100_000, None, None),
        (S2C, "text", False, None, None, None, True),
    ]
    assert msgs[0].preview == texts[0] and msgs[2].preview == "x" * 256
    # the second message is a back-reference into the first: much shorter on the wire
    assert msgs[1].payload_bytes < msgs[0].payload_bytes // 2
    assert [f.rsv for f in frames_of(ev) if f.direction == C2S] == [4, 0]
    assert diag.rows == []


def test_permessage_deflate_without_context_takeover() -> None:
    ext = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
    obs, diag = observer(extensions=ext)
    srv = Deflater(takeover=False)
    segs = [
        (S2C, frame(1, srv.message(b"same text"), rsv=4)),
        (S2C, frame(1, srv.message(b"same text"), rsv=4)),
    ]
    ev = feed(obs, segs)
    assert [(m.decompress, m.preview) for m in messages_of(ev)] == [("ok", "same text")] * 2
    hs = obs.handshake
    assert (hs.client_no_context_takeover, hs.server_no_context_takeover) == (True, True)
    assert diag.rows == []


def test_decompression_bomb_is_capped_and_later_messages_still_inflate() -> None:
    """Past the limit, a shared (context takeover) inflater still runs through the rest of the
    message with its output discarded, so the next message inflates (issue 18: it used to be
    ``skipped``, i.e. the rest of the connection was not inflated)."""
    for takeover in (True, False):
        ext = "permessage-deflate" + ("" if takeover else "; server_no_context_takeover")
        obs, diag = observer(extensions=ext, max_decompressed_bytes=1 << 20)
        srv = Deflater(takeover=takeover)
        bomb = srv.message(b"\x00" * (50 << 20))  # 50 MiB of zeros, ~50 KiB compressed
        assert len(bomb) < 100_000
        # the next messages refer back into the window the bomb left (with takeover)
        ev = feed(
            obs,
            [(S2C, frame(2, bomb, rsv=4)), (S2C, frame(1, srv.message(b"after"), rsv=4)),
             (S2C, frame(1, srv.message(b"\x00" * 40 + b"after"), rsv=4))],
        )
        msgs = messages_of(ev)
        assert [(m.decompress, m.decompressed_bytes, m.preview) for m in msgs] == [
            ("limit", (1 << 20) + 1, None),
            ("ok", 5, "after"),
            ("ok", 45, "\x00" * 40 + "after"),
        ]
        assert codes(diag) == [("ws.decompression_limit", 1, "server_to_client")]


def test_decompression_drain_is_bounded_then_the_context_is_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pcaptools.protocols.websocket.inflate as wsmod

    monkeypatch.setattr(wsmod, "INFLATE_DRAIN_BYTES", 4 << 20)
    obs, diag = observer(extensions="permessage-deflate", max_decompressed_bytes=1 << 20)
    srv = Deflater()
    ev = feed(
        obs,
        [(S2C, frame(2, srv.message(b"\x00" * (50 << 20)), rsv=4)),
         (S2C, frame(1, srv.message(b"after"), rsv=4))],
    )
    assert [(m.decompress, m.decompressed_bytes) for m in messages_of(ev)] == [
        ("limit", (1 << 20) + 1), ("skipped", None)]
    assert codes(diag) == [("ws.decompression_limit", 1, "server_to_client"),
                           ("ws.decompression_limit", 1, "server_to_client")]
    assert "shared context is given up" in diag.rows[1].detail


def test_bad_deflate_data_fails_and_later_messages_are_skipped_with_takeover() -> None:
    obs, diag = observer(extensions="permessage-deflate")
    ev = feed(
        obs,
        [
            (S2C, frame(1, b"\xff\xff\xff\xff garbage", rsv=4)),
            (S2C, frame(1, Deflater().message(b"fine"), rsv=4)),
            (C2S, cframe(1, Deflater().message(b"client side"), rsv=4)),
        ],
    )
    assert [(m.direction, m.decompress, m.preview) for m in messages_of(ev)] == [
        (S2C, "failed", ""),
        (S2C, "skipped", ""),
        (C2S, "ok", "client side"),
    ]
    assert codes(diag) == [("ws.decompress_failed", 1, "server_to_client")]


def test_rsv1_on_a_continuation_or_control_frame_is_reported_with_deflate() -> None:
    obs, diag = observer(extensions="permessage-deflate")
    d = Deflater()
    payload = d.message(b"abc")
    feed(
        obs,
        [
            (S2C, frame(1, payload[:2], rsv=4, fin=False) + frame(0, payload[2:], rsv=4)),
            (S2C, frame(9, b"", rsv=4)),
        ],
    )
    assert codes(diag) == [
        ("ws.reserved_bits", 1, "server_to_client"),
        ("ws.reserved_bits", 2, "server_to_client"),
    ]


# --------------------------------------------------------------------------- handshake


def test_accept_for_the_rfc_example_key() -> None:
    assert accept_for_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def test_handshake_problems_are_reported_at_the_101() -> None:
    req = headers(
        request(
            key="c2hvcnQ=",
            protocols="chat, superchat",
            extensions="permessage-deflate; client_max_window_bits",
        )
    )
    resp = headers(
        response(
            accept="wrong=",
            protocol="other",
            extensions="permessage-deflate; server_max_window_bits=20; foo, x-custom",
        )
    )
    hs = handshake_from_headers(req, resp, response_frame=6, response_ts_ns=60)
    assert hs.accept_ok is False
    assert hs.permessage_deflate and hs.server_max_window_bits is None
    assert hs.other_extensions == ("x-custom",)
    assert [c for c, _ in hs.problems] == [
        "ws.bad_handshake",  # key not 16 bytes
        "ws.accept_mismatch",
        "ws.bad_handshake",  # subprotocol not offered
        "ws.bad_handshake",  # server_max_window_bits=20
        "ws.bad_handshake",  # unknown parameter foo
        "ws.bad_handshake",  # x-custom not offered
    ]
    from pcaptools.diagnostics import Diagnostics
    from pcaptools.protocols.websocket import WebSocketObserver

    diag = Diagnostics()
    obs = WebSocketObserver(handshake=hs, tcp_stream=3, diag=diag)
    assert [(r.code, r.frame, r.tcp_stream) for r in diag.rows][:2] == [
        ("ws.bad_handshake", 6, 3),
        ("ws.accept_mismatch", 6, 3),
    ]
    # an unknown extension may use the RSV bits: not reported
    feed(obs, [(S2C, frame(1, b"x", rsv=2))])
    assert "ws.reserved_bits" not in diag.counts


def test_handshake_without_the_request() -> None:
    hs = handshake_from_headers(None, headers(response(extensions="permessage-deflate")))
    assert hs.accept_ok is None and hs.problems == () and hs.permessage_deflate


def test_parse_extensions_and_close_codes() -> None:
    assert parse_extensions(
        'permessage-deflate; client_max_window_bits; server_max_window_bits="10", '
        "x-webkit-deflate-frame,, foo;a=1"
    ) == [
        (
            "permessage-deflate",
            [("client_max_window_bits", None), ("server_max_window_bits", "10")],
        ),
        ("x-webkit-deflate-frame", []),
        ("foo", [("a", "1")]),
    ]
    assert [
        c
        for c in (999, 1000, 1003, 1004, 1005, 1006, 1007, 1014, 1015, 2999, 3000, 4999, 5000)
        if valid_close_code(c)
    ] == [1000, 1003, 1007, 1014, 3000, 4999]


def _chunk(d: object, data: bytes, n: int, offset: int) -> object:
    from pcaptools.protocols._base import StreamChunk

    return StreamChunk(direction=d, data=data, ts_ns=n, frame=n, offset=offset)  # type: ignore[arg-type]


def test_zlib_reference_agrees_with_our_deflater() -> None:
    d = Deflater()
    z = zlib.decompressobj(-15)
    assert z.decompress(d.message(b"abc") + b"\x00\x00\xff\xff") == b"abc"


def test_resync_expects_the_masking_this_side_actually_uses() -> None:
    obs, diag = observer()
    a = frame(1, b"unmasked client")  # a client that never masks (as in suricata's capture)
    ev = obs.feed(_chunk(C2S, a, 1, 0))
    ev += obs.gap(C2S, len(a), 7, 2, 2)
    # the tail of a lost frame ("abc": not a plausible header), then two unmasked frames
    ev += obs.feed(_chunk(C2S, b"abc" + frame(1, b"next") + frame(9, b""), 3, len(a) + 7))
    ev += obs.close(C2S, 4, 4, at_eof=True)
    assert [(f.frame, f.opcode, f.masked) for f in frames_of(ev)] == [
        (1, 1, False),
        (3, 1, False),
        (3, 9, False),
    ]
    assert codes(diag) == [
        ("ws.unmasked_client_frame", 1, "client_to_server"),
        ("ws.resynchronised", 3, "client_to_server"),
    ]
