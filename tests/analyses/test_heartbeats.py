"""analyses.heartbeats: ping/pong matching for WebSocket, HTTP/2 and TCP keep-alives, and the
per-connection summary, on hand-made tables with known answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcaptools
from pcaptools.analyses.heartbeats import (
    HEARTBEAT_SUMMARY,
    HEARTBEATS,
    heartbeat_summary,
    heartbeats,
    http2_heartbeats,
    tcp_keepalive_heartbeats,
    websocket_heartbeats,
)
from pcaptools.tables.foundation import CONNECTIONS, PACKETS, TCP_EVENTS
from pcaptools.tables.http_tables import HTTP2_FRAMES
from pcaptools.tables.schema import TableSchema
from pcaptools.tables.ws_tables import WS_FRAMES

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S
C2S, S2C = "client_to_server", "server_to_client"


def table(schema: TableSchema, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A table of ``schema`` from partial rows (missing ints 0, bools False, others NA)."""
    cols: dict[str, list[Any]] = {}
    for c in schema.columns:
        default: Any = 0 if c.dtype in ("int64", "int32", "int16", "int8") else \
            False if c.dtype == "bool" else None
        cols[c.name] = [r.get(c.name, default) for r in rows]
    return schema.frame(columns=cols)


def ws(
    frame: int,
    t_ms: float,
    direction: str,
    opcode: int,
    payload: str,
    tcp: int = 0,
    complete: bool = True,
) -> dict[str, Any]:
    return {
        "frame": frame,
        "ts": T0 + int(t_ms * MS),
        "tcp_stream": tcp,
        "direction": direction,
        "opcode": opcode,
        "control_payload": payload,
        "complete": complete,
        "fin": True,
    }


def conn(tcp: int, first_ms: float, last_ms: float, end_reason: str) -> dict[str, Any]:
    ended = end_reason in ("fin", "rst")
    return {
        "tcp_stream": tcp,
        "first_ts": T0 + int(first_ms * MS),
        "last_ts": T0 + int(last_ms * MS),
        "end_reason": end_reason,
        "end_ts": T0 + int(last_ms * MS) if ended else None,
        "first_frame": 1,
        "last_frame": 1,
    }


WS_ROWS = [
    ws(1, 0, C2S, 9, "61"),  # answered
    ws(2, 5, S2C, 10, "61"),
    ws(3, 1000, C2S, 9, "62"),  # superseded by "63"
    ws(4, 2000, C2S, 9, "63"),
    ws(5, 2010, S2C, 10, "63"),
    ws(6, 3000, S2C, 10, "7a7a"),  # unsolicited pong: matches nothing
    ws(7, 3500, C2S, 10, "64"),  # a pong before its "ping", same side as the ping: nothing
    ws(8, 4000, C2S, 9, "64"),  # unanswered (connection lived 17 s more)
    ws(9, 20000, C2S, 9, "65"),  # cut off: the connection ended 1 s later (timeout 2 s)
    ws(10, 0, S2C, 9, "", tcp=1),  # equal payloads: the pong goes to the most recent ping
    ws(11, 20000, S2C, 9, "", tcp=1),
    ws(12, 20002, C2S, 10, "", tcp=1),
    ws(13, 20003, C2S, 1, "", tcp=1),  # data frames are ignored
    ws(14, 90000, S2C, 9, "", tcp=1, complete=False),  # cut by the end of the capture
]
CONNS = [
    conn(0, -100, 21000, "fin"),
    conn(1, -100, 95000, "open_at_eof"),
    conn(2, 0, 5000, "rst"),
    conn(3, 0, 100000, "half_closed"),
]


def test_websocket_matching_outcomes() -> None:
    hb = websocket_heartbeats(table(WS_FRAMES, WS_ROWS), connections=table(CONNECTIONS, CONNS))
    HEARTBEATS.check(hb)
    assert hb[
        ["tcp_stream", "sender", "ping_frame", "payload", "pong_frame", "answered", "outcome"]
    ].astype(object).values.tolist() == [
        [0, "client", 1, "61", 2, True, "answered"],
        [0, "client", 3, "62", pd.NA, False, "superseded"],
        [0, "client", 4, "63", 5, True, "answered"],
        [0, "client", 8, "64", pd.NA, False, "unanswered"],
        [0, "client", 9, "65", pd.NA, pd.NA, "cut_off"],
        [1, "server", 10, "", pd.NA, False, "unanswered"],
        [1, "server", 11, "", 12, True, "answered"],
    ]
    assert hb["rtt_ms"].round(3).tolist()[:1] == [5.0]
    assert hb.loc[hb["ping_frame"] == 11, "rtt_ms"].tolist() == [2.0]
    assert hb["interval_ms"].round(3).astype(object).where(
        hb["interval_ms"].notna(), None
    ).tolist() == [None, 1000.0, 1000.0, 2000.0, 16000.0, None, 20000.0]
    assert str(hb["mechanism"].iloc[0]) == "websocket"


def test_without_connections_the_capture_end_bounds_the_wait() -> None:
    # capture end = the latest frame (90 s): ping 9 (20 s) waited 70 s, so it is unanswered
    hb = heartbeats(table(WS_FRAMES, WS_ROWS))
    assert hb.loc[hb["ping_frame"] == 9, "outcome"].tolist() == ["unanswered"]
    hb2 = heartbeats(table(WS_FRAMES, WS_ROWS), capture_end=T0 + 21 * S)
    assert hb2.loc[hb2["ping_frame"] == 9, "outcome"].tolist() == ["cut_off"]
    hb3 = websocket_heartbeats(
        table(WS_FRAMES, WS_ROWS),
        answer_timeout_ms=500,
        capture_end=pd.Timestamp(T0 + 21 * S, tz="UTC"),
    )
    assert hb3.loc[hb3["ping_frame"] == 9, "outcome"].tolist() == ["unanswered"]
    # the later answer (1010 ms after ping 3) is beyond 500 ms: no longer "superseded"
    assert hb3.loc[hb3["ping_frame"] == 3, "outcome"].tolist() == ["unanswered"]


def h2(frame: int, t_ms: float, direction: str, ack: bool, data: str) -> dict[str, Any]:
    return {
        "frame": frame,
        "ts": T0 + int(t_ms * MS),
        "tcp_stream": 2,
        "direction": direction,
        "type": "PING",
        "type_code": 6,
        "ack": ack,
        "ping_data": data,
        "length": 8,
    }


H2_ROWS = [
    h2(30, 0, C2S, False, "0102030405060708"),
    {"frame": 31, "ts": T0 + 10 * MS, "tcp_stream": 2, "direction": S2C, "type": "SETTINGS"},
    h2(32, 30, S2C, True, "0102030405060708"),
    h2(33, 1000, S2C, False, "0000000000000001"),
    h2(34, 1001, C2S, True, "0000000000000001"),
    h2(35, 1500, C2S, True, "ffffffffffffffff"),  # an ACK for a PING never seen
    h2(36, 4000, C2S, False, "0000000000000002"),  # the connection is reset 1 s later
]


def test_http2_ping_and_ack() -> None:
    hb = http2_heartbeats(table(HTTP2_FRAMES, H2_ROWS), connections=table(CONNECTIONS, CONNS))
    assert hb[["mechanism", "sender", "ping_frame", "payload", "pong_frame", "outcome"]].astype(
        object
    ).values.tolist() == [
        ["http2", "client", 30, "0102030405060708", 32, "answered"],
        ["http2", "server", 33, "0000000000000001", 34, "answered"],
        ["http2", "client", 36, "0000000000000002", pd.NA, "cut_off"],
    ]
    assert hb["rtt_ms"].round(3).tolist()[:2] == [30.0, 1.0]
    assert hb["interval_ms"].round(3).tolist()[2] == 4000.0


def ka(frame: int, t_ms: float, direction: str, kind: str, seq: int, ack: int) -> dict[str, Any]:
    return {
        "frame": frame,
        "ts": T0 + int(t_ms * MS),
        "tcp_stream": 3,
        "direction": direction,
        "kind": kind,
        "seq": seq,
        "ack": ack,
        "len": 0,
    }


TCP_ROWS = [
    ka(40, 0, C2S, "keep_alive", 100, 7),
    ka(41, 1, S2C, "keep_alive_ack", 7, 101),
    ka(42, 5, S2C, "duplicate_ack", 7, 101),
    ka(43, 60000, C2S, "keep_alive", 100, 7),  # lost: unanswered
    ka(44, 75000, C2S, "keep_alive", 100, 7),
    ka(45, 75002, S2C, "keep_alive_ack", 7, 101),
    ka(46, 80000, S2C, "keep_alive", 6, 101),  # from the server, never acknowledged
    ka(47, 80001, C2S, "keep_alive_ack", 101, 99),  # acknowledges something else
]


def test_tcp_keepalives() -> None:
    hb = tcp_keepalive_heartbeats(
        table(TCP_EVENTS, TCP_ROWS), connections=table(CONNECTIONS, CONNS)
    )
    assert hb[
        ["mechanism", "sender", "ping_frame", "payload", "pong_frame", "answered", "outcome"]
    ].astype(object).values.tolist() == [
        ["tcp_keepalive", "client", 40, pd.NA, 41, True, "answered"],
        ["tcp_keepalive", "client", 43, pd.NA, pd.NA, False, "unanswered"],
        ["tcp_keepalive", "client", 44, pd.NA, 45, True, "answered"],
        ["tcp_keepalive", "server", 46, pd.NA, pd.NA, False, "unanswered"],
    ]
    assert hb["rtt_ms"].round(3).astype(object).where(hb["rtt_ms"].notna(), None).tolist() == [
        1.0,
        None,
        2.0,
        None,
    ]


def test_all_mechanisms_in_capture_order_and_summary() -> None:
    conns = table(CONNECTIONS, CONNS)
    hb = heartbeats(
        table(WS_FRAMES, WS_ROWS),
        table(HTTP2_FRAMES, H2_ROWS),
        table(TCP_EVENTS, TCP_ROWS),
        connections=conns,
    )
    HEARTBEATS.check(hb)
    assert len(hb) == 7 + 3 + 4
    assert hb["ping_frame"].tolist() == sorted(hb["ping_frame"].tolist())
    assert hb["mechanism"].value_counts().to_dict() == {
        "websocket": 7,
        "tcp_keepalive": 4,
        "http2": 3,
    }
    # packets: client data at 0 and 3 s, server data at 1 s on connection 0 (ends at 25 s)
    pk = table(
        PACKETS,
        [
            {"frame": 1, "ts": T0, "tcp_stream": 0, "direction": C2S, "tcp_len": 10},
            {"frame": 2, "ts": T0 + 1 * S, "tcp_stream": 0, "direction": S2C, "tcp_len": 10},
            {"frame": 3, "ts": T0 + 2 * S, "tcp_stream": 0, "direction": S2C, "tcp_len": 0},
            {"frame": 4, "ts": T0 + 3 * S, "tcp_stream": 0, "direction": C2S, "tcp_len": 5},
        ],
    )
    sm = heartbeat_summary(hb, connections=conns, packets=pk)
    HEARTBEAT_SUMMARY.check(sm)
    assert sm[
        [
            "tcp_stream",
            "mechanism",
            "client_pings",
            "client_answered",
            "client_missed",
            "client_superseded",
            "client_cut_off",
            "server_pings",
            "server_answered",
            "server_missed",
        ]
    ].astype(object).values.tolist() == [
        [0, "websocket", 5, 2, 1, 1, 1, 0, 0, 0],
        [1, "websocket", 0, 0, 0, 0, 0, 2, 1, 1],
        [2, "http2", 2, 1, 0, 0, 1, 1, 1, 0],
        [3, "tcp_keepalive", 3, 2, 1, 0, 0, 1, 0, 1],
    ]
    r0 = sm.iloc[0]
    assert (r0["client_interval_ms"], r0["client_interval_max_ms"]) == (1500.0, 16000.0)
    assert (r0["client_rtt_p50_ms"], r0["client_rtt_max_ms"]) == (7.5, 10.0)
    assert round(r0["client_rtt_p95_ms"], 3) == 9.75
    assert r0["client_last_ping_ts"] == pd.Timestamp(T0 + 20 * S, tz="UTC")
    # client: silent from 3 s to the FIN at 21 s; server: from 1 s to 21 s
    assert (r0["client_longest_silence_ms"], r0["server_longest_silence_ms"]) == (18000.0, 20000.0)
    assert r0["client_silence_start_ts"] == pd.Timestamp(T0 + 3 * S, tz="UTC")
    assert np.isnan(sm.iloc[1]["client_rtt_p50_ms"])
    # connection 1 has no payload packets: silent from its first packet to the capture end
    assert sm.iloc[1]["server_longest_silence_ms"] == 100100.0
    # without packets: NaN silences
    assert sm.drop(columns=[c for c in sm.columns if "silence" in c]).equals(
        heartbeat_summary(hb).drop(columns=[c for c in sm.columns if "silence" in c])
    )
    assert heartbeat_summary(hb)["client_longest_silence_ms"].isna().all()


def test_empty_inputs_keep_the_schema() -> None:
    for hb in (
        heartbeats(),
        heartbeats(WS_FRAMES.frame([]), HTTP2_FRAMES.frame([]), TCP_EVENTS.frame([])),
        websocket_heartbeats(table(WS_FRAMES, [ws(1, 0, C2S, 1, "")])),
    ):
        HEARTBEATS.check(hb)
        assert len(hb) == 0
    HEARTBEAT_SUMMARY.check(heartbeat_summary(HEARTBEATS.frame([])))


@pytest.mark.corpus
def test_corpus_keep_alive_and_ws_pings(corpus: Path) -> None:
    cap = pcaptools.load(corpus / "wireshark-retrans.pcap")
    hb = heartbeats(cap.ws_frames, cap.http2_frames, cap.tcp_events, connections=cap.connections)
    # tshark flags frame 102 tcp.analysis.keep_alive; no keep_alive_ack follows, and the
    # connection closes within a second
    assert hb[["mechanism", "sender", "ping_frame", "outcome"]].astype(object).values.tolist() == [
        ["tcp_keepalive", "server", 102, "cut_off"]
    ]
    cap2 = pcaptools.load(corpus / "two-binary-fragments.pcap")
    hb2 = heartbeats(
        cap2.ws_frames, cap2.http2_frames, cap2.tcp_events, connections=cap2.connections
    )
    pd.testing.assert_frame_equal(hb2, cap2.ws_heartbeats)
    sm = heartbeat_summary(hb2, connections=cap2.connections, packets=cap2.packets)
    assert sm[["tcp_stream", "mechanism", "server_pings", "server_answered"]].astype(
        object
    ).values.tolist() == [[0, "websocket", 1, 1]]
    assert round(sm["server_rtt_p50_ms"].iloc[0], 3) == 0.293
