"""WebSocket tables through ``pcaptools.load()``: corpus captures and pcaps written from the
``websockets`` library's own bytes, compared with tshark 4.0's ``websocket.*`` fields frame
by frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcaptools
from pcaptools.protocols.http1 import Http1Observer, ProtocolSwitched
from pcaptools.protocols.websocket import WsConnectionEnded, websocket_factory
from pcaptools.tables.ws_tables import HEARTBEATS, WS_CONNECTIONS, WS_FRAMES, WS_MESSAGES
from tests.conftest import CAPTURES
from tests.oracle import tshark_fields
from tests.protocols.ws.helpers import (
    C2S,
    S2C,
    TEXTS,
    chunks,
    frames_of,
    messages_of,
    session_pcap,
    websockets_conversation,
)

_FIELDS = (
    "frame.number", "websocket.fin", "websocket.rsv", "websocket.opcode", "websocket.mask",
    "websocket.payload_length", "websocket.payload_length_ext_16",
    "websocket.payload_length_ext_64", "websocket.payload.close.status_code",
    "websocket.payload.close.reason", "websocket.payload.ping", "websocket.payload.pong",
    "websocket.pmc",
)  # fmt: skip


def tshark_ws(path: Path, options: tuple[str, ...] = ()) -> dict[int, tuple[str, ...]]:
    """frame number -> tshark's websocket fields (multi-frame packets ','-joined)."""
    rows = tshark_fields(str(path), _FIELDS, options, "websocket")
    return {int(r[0]): tuple(r[1:]) for r in rows}


def ours_ws(cap: pcaptools.Capture) -> dict[int, tuple[str, ...]]:
    """The same fields computed from cap.ws_frames (complete frames only)."""
    f = cap.ws_frames
    f = f[f["complete"]].sort_values(["frame", "index"], kind="stable")
    pmd = {int(r.tcp_stream) for r in cap.ws_connections.itertuples() if r.permessage_deflate}
    out: dict[int, tuple[str, ...]] = {}
    for frame, g in f.groupby("frame", sort=True):
        cols: list[list[str]] = [[] for _ in _FIELDS[1:]]
        for r in g.itertuples():
            length = int(r.payload_len)
            hb = int(r.header_bytes) - (4 if r.masked else 0)
            rsv = (4 if r.rsv1 else 0) | (2 if r.rsv2 else 0) | (1 if r.rsv3 else 0)
            cols[0].append(str(int(r.fin)))
            cols[1].append(f"0x{rsv:02x}")
            cols[2].append(str(int(r.opcode)))
            cols[3].append(str(int(r.masked)))
            cols[4].append(str({2: length, 4: 126, 10: 127}[hb]))
            if hb == 4:
                cols[5].append(str(length))
            if hb == 10:
                cols[6].append(str(length))
            if r.close_code is not pd.NA:
                cols[7].append(str(int(r.close_code)))
            if isinstance(r.close_reason, str):
                cols[8].append(r.close_reason)
            if r.opcode in (9, 10) and isinstance(r.control_payload, str) and r.control_payload:
                cols[9 if r.opcode == 9 else 10].append(r.control_payload)
            if int(r.tcp_stream) in pmd:
                cols[11].append(str(int(r.rsv1)))
        out[int(frame)] = tuple(",".join(c) for c in cols)
    return out


CORPUS_WS = {
    # capture: (frames, messages, connection facts, anomaly codes with frames)
    "wsapp.pcap": 8,
    "suricata-websocket-ping-input.pcap": 3,
    "two-binary-fragments.pcap": 7,
    "oversized-close-frame.pcapng": 1,
}


@pytest.mark.corpus
@pytest.mark.tshark
@pytest.mark.parametrize("name", sorted(CORPUS_WS))
def test_corpus_frames_equal_tshark(corpus: Path, tshark: str, name: str) -> None:
    cap = pcaptools.load(corpus / name)
    WS_FRAMES.check(cap.ws_frames)
    assert len(cap.ws_frames) == CORPUS_WS[name]
    ours = ours_ws(cap)
    theirs = tshark_ws(corpus / name)
    assert sorted(ours) == sorted(theirs)
    for frame, fields in theirs.items():
        assert ours[frame] == fields, f"{name} frame {frame}"


@pytest.mark.corpus
def test_wsapp_tables(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "wsapp.pcap")
    c = cap.ws_connections
    WS_CONNECTIONS.check(c)
    assert c[
        [
            "tcp_stream",
            "request_frame",
            "handshake_frame",
            "path",
            "accept_ok",
            "offered_extensions",
            "permessage_deflate",
            "client_frames",
            "server_frames",
            "client_messages",
            "server_messages",
            "close_by",
            "close_frame",
            "client_close_code",
            "server_close_code",
            "end_reason",
            "end_frame",
        ]
    ].astype(object).values.tolist() == [
        [
            1,
            13,
            15,
            "/time",
            True,
            "permessage-deflate",
            False,
            4,
            4,
            3,
            3,
            "client",
            26,
            1001,
            pd.NA,
            "close_handshake",
            30,
        ]
    ]
    m = cap.ws_messages
    WS_MESSAGES.check(m)
    assert m[
        [
            "frame",
            "direction",
            "index",
            "type",
            "payload_bytes",
            "wire_bytes",
            "preview",
            "utf8_ok",
            "json_type",
        ]
    ].astype(object).values.tolist() == [
        [17, "client_to_server", 0, "text", 8, 14, "get-time", True, pd.NA],
        [18, "server_to_client", 0, "text", 20, 22, '{"time": "09:43:38"}', True, pd.NA],
        [20, "client_to_server", 1, "text", 8, 14, "get-time", True, pd.NA],
        [21, "server_to_client", 1, "text", 20, 22, '{"time": "09:43:48"}', True, pd.NA],
        [23, "client_to_server", 2, "text", 8, 14, "get-time", True, pd.NA],
        [24, "server_to_client", 2, "text", 20, 22, '{"time": "09:43:58"}', True, pd.NA],
    ]
    assert (cap.warnings["layer"].astype(str) == "ws").sum() == 0
    assert len(cap.ws_heartbeats) == 0


@pytest.mark.corpus
@pytest.mark.tshark
def test_corpus_text_equals_tshark(corpus: Path, tshark: str) -> None:
    for name in ("wsapp.pcap", "suricata-websocket-ping-input.pcap"):
        cap = pcaptools.load(corpus / name)
        rows = tshark_fields(
            str(corpus / name),
            ("frame.number", "websocket.payload.text"),
            (),
            "websocket.payload.text",
        )
        m = cap.ws_messages
        assert [(int(f), t) for f, t in rows] == [
            (int(r.frame), r.preview) for r in m[m["type"] == "text"].itertuples()
        ]


@pytest.mark.corpus
def test_suricata_ping_on_sll(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "suricata-websocket-ping-input.pcap")
    assert cap.ws_frames[["frame", "direction", "opcode_name", "masked"]].astype(
        object
    ).values.tolist() == [
        [8, "client_to_server", "ping", False],
        [9, "server_to_client", "text", False],
        [11, "server_to_client", "pong", False],
    ]
    w = cap.warnings[cap.warnings["layer"].astype(str) == "ws"]
    assert w[["frame", "code"]].astype(object).values.tolist() == [[8, "ws.unmasked_client_frame"]]
    c = cap.ws_connections.iloc[0]
    assert (c["client_mask_errors"], c["end_reason"], c["origin"]) == (
        1,
        "no_close",
        "http://www.websocket.org",
    )
    hb = cap.ws_heartbeats
    HEARTBEATS.check(hb)
    assert hb[
        [
            "mechanism",
            "tcp_stream",
            "sender",
            "ping_frame",
            "payload",
            "pong_frame",
            "answered",
            "outcome",
        ]
    ].astype(object).values.tolist() == [["websocket", 0, "client", 8, "", 11, True, "answered"]]
    assert hb["rtt_ms"].round(3).tolist() == [2.683]


@pytest.mark.corpus
def test_two_binary_fragments(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "two-binary-fragments.pcap")
    c = cap.ws_connections.iloc[0]
    assert (
        c["protocol"],
        c["offered_protocols"],
        c["permessage_deflate"],
        c["end_reason"],
        c["close_by"],
    ) == ("v1", "v1", False, "close_handshake", "client")
    m = cap.ws_messages
    assert m[
        ["frame", "direction", "type", "fragments", "first_frame", "payload_bytes", "wire_bytes"]
    ].astype(object).values.tolist() == [
        [11, "client_to_server", "binary", 1, 11, 11, 17],
        [13, "server_to_client", "binary", 2, 13, 12, 16],
    ]
    f = cap.ws_frames
    assert f.loc[f["frame"] == 13, ["index", "fin", "opcode_name", "message_index"]].astype(
        object
    ).values.tolist() == [[1, False, "binary", 0], [2, True, "continuation", 0]]
    hb = cap.ws_heartbeats
    assert hb[["sender", "ping_frame", "payload", "pong_frame", "outcome"]].astype(
        object
    ).values.tolist() == [["server", 8, "5a65656b", 10, "answered"]]


@pytest.mark.corpus
def test_oversized_close_frame(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "oversized-close-frame.pcapng")
    (r,) = cap.ws_frames.itertuples()
    assert (r.frame, r.opcode_name, r.payload_len, r.header_bytes, r.close_code) == (
        6,
        "close",
        258,
        10,
        1000,
    )
    assert r.close_reason == "C" * 256
    assert r.control_payload == "03e8" + "43" * 123
    w = cap.warnings[cap.warnings["layer"].astype(str) == "ws"]
    assert w[["frame", "code"]].astype(object).values.tolist() == [
        [6, "ws.non_minimal_length"],
        [6, "ws.control_frame_too_long"],
    ]
    c = cap.ws_connections.iloc[0]
    assert (c["accept_ok"], c["server_close_code"], c["end_reason"]) == (
        True,
        1000,
        "close_unanswered",
    )


# --------------------------------------------------------------------------- python websockets


@pytest.fixture(scope="module")
def conversation_pcap(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, int]]:
    data, frames = session_pcap(websockets_conversation())
    path = tmp_path_factory.mktemp("ws") / "websockets-deflate.pcap"
    path.write_bytes(data)
    return path, frames


@pytest.mark.tshark
def test_websockets_library_session_equals_tshark(
    conversation_pcap: tuple[Path, dict[int, int]], tshark: str
) -> None:
    path, _ = conversation_pcap
    cap = pcaptools.load(path)
    theirs = tshark_ws(path)
    ours = ours_ws(cap)
    assert ours == theirs
    assert len(ours) == 11 and sum(v[0].count(",") + 1 for v in ours.values()) == 13
    # decompressed text: tshark 4.0 decodes unfragmented compressed messages (its text of a
    # fragmented compressed message is the raw compressed bytes, a tshark limitation)
    rows = tshark_fields(
        str(path), ("frame.number", "websocket.payload.text"), (), "websocket.payload.text"
    )
    m = cap.ws_messages
    texts = {
        int(r.frame): r.preview
        for r in m[(m["type"] == "text") & (m["fragments"] == 1)].itertuples()
    }
    assert {int(f): t for f, t in rows if int(f) in texts} == texts
    assert list(texts.values()) == TEXTS[:3]


def test_websockets_library_session_tables(conversation_pcap: tuple[Path, dict[int, int]]) -> None:
    path, frames = conversation_pcap
    cap = pcaptools.load(path)
    c = cap.ws_connections.iloc[0]
    assert (
        c["protocol"],
        c["offered_extensions"],
        c["extensions"],
        c["permessage_deflate"],
        c["client_max_window_bits"],
        c["client_no_context_takeover"],
        c["accept_ok"],
        c["end_reason"],
    ) == (
        "v1",
        "permessage-deflate; client_max_window_bits",
        "permessage-deflate",
        True,
        pd.NA,
        False,
        True,
        "close_handshake",
    )
    m = cap.ws_messages
    assert m[
        [
            "frame",
            "direction",
            "type",
            "fragments",
            "compressed",
            "decompress",
            "decompressed_bytes",
            "json_type",
        ]
    ].astype(object).values.tolist() == [
        [frames[2], "client_to_server", "text", 1, True, "ok", 41, "session.update"],
        [frames[3], "server_to_client", "text", 1, True, "ok", 26, "session.updated"],
        [frames[4], "server_to_client", "text", 1, True, "ok", 26, "session.updated"],
        [frames[5], "server_to_client", "text", 3, True, "ok", 300, pd.NA],
        [frames[10], "client_to_server", "binary", 1, True, "ok", 70_000, pd.NA],
    ]
    assert m["preview"].iloc[3] == TEXTS[3][:256] and bool(m["preview_truncated"].iloc[3])
    # the big binary message spans many packets: first and last packet differ
    assert int(m["first_frame"].iloc[4]) < int(m["frame"].iloc[4]) - 40
    hb = cap.ws_heartbeats
    assert hb[["sender", "ping_frame", "payload", "pong_frame", "answered"]].astype(
        object
    ).values.tolist() == [
        ["client", frames[6], b"client-ping-1".hex(), frames[7], True],
        ["server", frames[8], b"server-ping-1".hex(), frames[9], True],
    ]
    assert hb["rtt_ms"].tolist() == [10.0 * (frames[7] - frames[6]), 10.0 * (frames[9] - frames[8])]
    assert (cap.warnings["layer"].astype(str) == "ws").sum() == 0


def test_without_context_takeover() -> None:
    segs = websockets_conversation(takeover=False)
    obs = Http1Observer(
        tcp_stream=0, websocket_factory=websocket_factory(tcp_stream=0, diag=_diag())
    )
    ev: list[Any] = []
    for ch in chunks(segs):
        ev += obs.feed(ch)
    ev += obs.close(C2S, 10**9, 99, at_eof=False)
    ev += obs.close(S2C, 10**9, 100, at_eof=False)
    assert [(s.protocol, s.parsed) for s in ev if isinstance(s, ProtocolSwitched)] == [
        ("websocket", True)
    ]
    (end,) = [e for e in ev if isinstance(e, WsConnectionEnded)]
    hs = end.handshake
    assert (hs.server_no_context_takeover, hs.client_no_context_takeover) == (True, True)
    assert [(m.decompress, m.decompressed_bytes) for m in messages_of(ev)] == [
        ("ok", 41),
        ("ok", 26),
        ("ok", 26),
        ("ok", 300),
        ("ok", 70_000),
    ]
    assert len(frames_of(ev)) == 13
    assert (end.client_frames, end.server_frames, end.end_reason) == (5, 8, "close_handshake")
    assert S2C != C2S


def _diag() -> Any:
    from pcaptools.diagnostics import Diagnostics

    return Diagnostics()


@pytest.mark.parametrize("length", [(1 << 63) - 1, (1 << 64) - 1])
def test_huge_announced_length_through_load(tmp_path: Path, length: int) -> None:
    from tests.protocols.ws.helpers import MASK, frame, request, response

    segs = [
        (C2S, request()),
        (S2C, response()),
        (S2C, frame(1, b"first") + frame(2, b"x" * 3000, length=length)),
        (C2S, frame(1, b"still parsed", mask=MASK)),
    ]
    data, frames = session_pcap(segs)
    path = tmp_path / "huge.pcap"
    path.write_bytes(data)
    cap = pcaptools.load(path)
    f = cap.ws_frames
    assert f[["frame", "direction", "payload_len", "complete", "lost_bytes"]].astype(
        object
    ).values.tolist() == [
        [frames[1] + 2, "server_to_client", 5, True, 0],  # first of the segment's 3 packets
        [frames[3], "client_to_server", 12, True, 0],
        # cut off by the server's FIN: the last packet of the capture
        [frames[3] + 3, "server_to_client", length if length < 1 << 63 else pd.NA, False, 0],
    ]
    c = cap.ws_connections.iloc[0]
    assert (c["server_frames"], c["server_payload_bytes"], c["server_wire_bytes"]) == (
        2,
        5 + 3000,
        7 + 10 + 3000,
    )
    w = cap.warnings[cap.warnings["layer"].astype(str) == "ws"]
    assert w["code"].astype(str).tolist() == ["ws.frame_too_large", "ws.truncated_frame"]


def test_text_columns_the_same_whatever_the_block_size_and_string_storage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ws_messages' preview and JSON type and every text column of realtime_events are moved
    into Arrow blocks while the capture is read (``_columns.TextColumns``): the tables are the
    same with blocks of 3 rows (a real voice session: many blocks, the last one partial) and
    with Python lists (pandas without Arrow strings) as with the default blocks."""
    from pcaptools import _columns

    cap_path = CAPTURES / "voice-realtime.pcapng"
    keys = CAPTURES / "voice-realtime.keys"
    names = ("ws_messages", "realtime_events")
    ref = pcaptools.load(cap_path, keylog=keys)
    assert len(ref.ws_messages) > 100 and len(ref.realtime_events) > 50
    assert ref.ws_messages["preview"].notna().sum() > 100
    assert ref.realtime_events["type"].notna().all()
    for patch in ({"TEXT_BLOCK_ROWS": 3}, {"_ARROW_STRINGS": False}):
        with monkeypatch.context() as m:
            for attr, value in patch.items():
                m.setattr(_columns, attr, value)
            cap = pcaptools.load(cap_path, keylog=keys)
        for name in names:
            pd.testing.assert_frame_equal(cap.tables[name], ref.tables[name], check_exact=True)
