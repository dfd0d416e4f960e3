"""The recorded HTTP/3 captures (captures/h3-*.pcapng) against their facts, with tshark 4.0.

scripts/record_captures.py recorded them with aioquic (scripts/servers/h3kit.py) through the
TAP link of scripts/netlab.py; the client wrote the key log and a per-request timeline.  These
tests decrypt the captures with tshark and the shipped key log and check, independently of the
recorder's own tshark parsing, that the capture holds what the timeline says: the QUIC
connections and their request stream ids, each stream's SSE events and tokens (tshark 4.0 has
no HTTP/3 dissector, so the HTTP/3 frames of the decrypted stream data are parsed here), when
the first token crossed the wire, 0-RTT and Retry, and, on the lossy link, exactly the UDP
datagrams the link's drop log says it dropped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import pcaptools
from tests.conftest import CAPTURES
from tests.oracle import keylog_options, tshark_fields

CHAT = CAPTURES / "h3-sse-chat.pcapng"
LOSSY = CAPTURES / "h3-sse-lossy.pcapng"
LOSSY_SERVER = CAPTURES / "h3-sse-lossy-server.pcapng"
H3_CAPTURES = (CHAT, LOSSY, LOSSY_SERVER)
CLIENT, SERVER = "192.0.2.10", "192.0.2.20"
RETRY, ZERO_RTT = "3", "1"  # quic.long.packet_type values (RFC 9000 §17.2)

pytestmark = pytest.mark.skipif(not all(p.is_file() for p in H3_CAPTURES),
                                reason="the h3-* captures are absent")


def _facts(path: Path) -> dict[str, Any]:
    return dict(json.loads(Path(f"{path}.facts.json").read_text()))


def _keys(path: Path) -> Path:
    return path.with_suffix(".keys")


_FIELDS = ("frame.number", "frame.time_epoch", "ip.src", "quic.connection.number",
           "quic.header_form", "quic.long.packet_type", "quic.remaining_payload",
           "quic.stream.stream_id", "quic.stream.off", "quic.stream.offset",
           "quic.stream.len", "quic.stream.length", "quic.stream_data")


def _bit(v: str) -> bool:
    return v in ("1", "True", "true")


def _packets(path: Path, keylog: Path | None) -> list[dict[str, Any]]:
    """Per QUIC datagram: frame, time, source, connection, header forms, long packet types,
    whether tshark left a payload undecrypted, and its STREAM frames (id, offset, data)."""
    rows = tshark_fields(path, _FIELDS, keylog_options(keylog), display_filter="quic")
    out = []
    for r in rows:
        v = {f: (r[i].split(",") if r[i] else []) for i, f in enumerate(_FIELDS)}
        streams = []
        oi = li = di = 0
        for k, sid in enumerate(v["quic.stream.stream_id"]):
            off = 0
            if _bit(v["quic.stream.off"][k]):
                off, oi = int(v["quic.stream.offset"][oi]), oi + 1
            n = None
            if _bit(v["quic.stream.len"][k]):
                n, li = int(v["quic.stream.length"][li]), li + 1
            data = b""
            if n is None or n > 0:  # tshark shows no stream_data for an empty frame
                data, di = bytes.fromhex(v["quic.stream_data"][di].replace(":", "")), di + 1
            streams.append((int(sid), off, data))
        out.append({"frame": int(v["frame.number"][0]), "ts": float(v["frame.time_epoch"][0]),
                    "src": v["ip.src"][0], "conn": int(v["quic.connection.number"][0]),
                    "forms": v["quic.header_form"], "long": v["quic.long.packet_type"],
                    "undecrypted": len(v["quic.remaining_payload"]), "streams": streams})
    return out


def _h3_data(stream: bytes) -> bytes:
    """The payloads of the HTTP/3 DATA frames (type 0) in one request stream (RFC 9114 §7)."""
    def varint(i: int) -> tuple[int, int]:
        n = 1 << (stream[i] >> 6)
        return int.from_bytes(bytes([stream[i] & 0x3F]) + stream[i + 1:i + n], "big"), i + n
    out, i = b"", 0
    while i < len(stream):
        ftype, i = varint(i)
        length, i = varint(i)
        if ftype == 0:
            out += stream[i:i + length]
        i += length
    return out


def _response_streams(pkts: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """Server->client bytes of each request stream, reassembled by offset, with the time and
    frame of the datagram that first carried each byte range."""
    pieces: dict[tuple[int, int], dict[int, tuple[bytes, float, int]]] = {}
    for p in pkts:
        if p["src"] != SERVER:
            continue
        for sid, off, data in p["streams"]:
            if sid % 4 == 0 and data:  # client-initiated bidirectional: requests
                pieces.setdefault((p["conn"], sid), {}).setdefault(off, (data, p["ts"], p["frame"]))
    out = {}
    for key, parts in pieces.items():
        buf = bytearray()
        for off in sorted(parts):
            assert off <= len(buf), f"{key}: a hole in the stream at {len(buf)}"
            buf[off:off + len(parts[off][0])] = parts[off][0]
        body = _h3_data(bytes(buf))
        events = [e for e in body.decode().split("\n\n") if e]
        tokens = []
        for e in events:
            assert e.startswith("data: "), e[:40]
            if e != "data: [DONE]":
                delta = json.loads(e[6:])["choices"][0]["delta"]
                if "content" in delta:
                    tokens.append(delta["content"])
        at = bytes(buf).find(b"data: ")
        first = min((fr, ts) for off, (d, ts, fr) in parts.items() if off <= at < off + len(d))
        out[key] = {"events": events, "tokens": tokens, "first_token_frame": first[0],
                    "first_token_ts": first[1]}
    return out


def _quic_conns(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in facts["connections"] if c.get("transport") == "quic"]


# ----------------------------------------------------------------- facts (no tshark needed)

@pytest.mark.parametrize("path", H3_CAPTURES, ids=lambda p: p.name)
def test_facts_timeline_is_complete(path: Path) -> None:
    facts = _facts(path)
    conns = _quic_conns(facts)
    assert conns and len(conns) == len(facts["connections"])
    for c in conns:
        assert c["quic"]["alpn"] == "h3" and c["quic"]["sni"] == "lab.test"
        ids = [r["quic_stream_id"] for r in c["requests"]]
        assert ids == [4 * i for i in range(len(ids))]  # client bidi streams 0, 4, 8, ...
        for r in c["requests"]:
            n = r["plan"]["tokens"]
            assert r["status"] == 200 and r["end"] == "complete"
            assert r["sse_events_sent"] == r["sse_events_received"] == n + 2
            assert r["tokens"] == r["server_tokens"] and len(r["token_times_ns"]) == n
            assert r["t_start_ns"] <= r["t_sent_ns"] <= r["t_headers_ns"] <= \
                r["t_first_byte_ns"] <= r["token_times_ns"][0] <= r["t_end_ns"]
            assert r["token_times_ns"] == sorted(r["token_times_ns"])
    assert all(c["ok"] for c in facts["checks"])


def test_chat_facts_name_the_resumption_and_0rtt() -> None:
    c1, c2 = _quic_conns(_facts(CHAT))
    assert [r["quic_stream_id"] for r in c1["requests"]] == [0, 4, 8]
    assert [r["quic_stream_id"] for r in c2["requests"]] == [0, 4]
    assert [r["tokens_received"] for r in c1["requests"] + c2["requests"]] == [20, 10, 30, 20, 10]
    assert (c1["quic"]["resumed"], c1["quic"]["early_data_accepted"]) == (False, False)
    assert (c2["quic"]["resumed"], c2["quic"]["early_data_accepted"]) == (True, True)
    assert [r["sent_in_0rtt"] for r in c2["requests"]] == [True, False]
    assert not c1["quic"]["retry"] and not c2["quic"]["retry"]


def test_lossy_drop_log_is_consistent() -> None:
    for path in (LOSSY, LOSSY_SERVER):
        facts = _facts(path)
        link = facts["link"]
        assert link["params"]["loss_udp"] is True
        assert link["params"]["loss_ab"] == link["params"]["loss_ba"] == 0.03
        assert link["params"]["delay_ms"] == 20.0
        total = 0
        for key in ("client_to_server", "server_to_client"):
            d = link[key]
            assert d["udp_lost"] == len(d["dropped_datagrams"])
            assert d["frames_in"] - d["frames_out"] == d["udp_lost"] + d["lost"] + d["queue_drops"]
            total += d["udp_lost"]
            assert sorted(x["payload_sha256_16"] for x in d["dropped_datagrams"]) == \
                facts["truth"]["datagrams_missing_at_receiver"][key]
        assert total >= 1
        (c,) = _quic_conns(facts)
        assert c["quic"]["retry"] is True
        assert [r["quic_stream_id"] for r in c["requests"]] == [0, 4, 8, 12, 16, 20]


# ---------------------------------------------------------------------------- with tshark

@pytest.mark.tshark
@pytest.mark.parametrize("path", H3_CAPTURES, ids=lambda p: p.name)
def test_tshark_decrypts_with_the_key_log(path: Path, tshark: str) -> None:
    pkts = _packets(path, _keys(path))
    short = sum(f == "0" for p in pkts for f in p["forms"])
    assert short > 100
    assert sum(p["undecrypted"] for p in pkts) == 0
    sids = {sid for p in pkts for sid, _, _ in p["streams"]}
    assert {0, 4} <= sids  # request streams seen in decrypted 1-RTT / 0-RTT packets
    # without the key log tshark decrypts only the Initials: no request stream data at all
    bare = _packets(path, None)
    assert sum(p["undecrypted"] for p in bare) >= short
    assert not {sid for p in bare for sid, _, _ in p["streams"]}


@pytest.mark.tshark
@pytest.mark.parametrize("path", H3_CAPTURES, ids=lambda p: p.name)
def test_decrypted_streams_equal_the_timeline(path: Path, tshark: str) -> None:
    facts = _facts(path)
    pkts = _packets(path, _keys(path))
    got = _response_streams(pkts)
    conns = _quic_conns(facts)
    assert len({p["conn"] for p in pkts}) == len(conns)
    want = {(i, r["quic_stream_id"]): r for i, c in enumerate(conns) for r in c["requests"]}
    assert sorted(got) == sorted(want)
    for key, r in want.items():
        s = got[key]
        assert len(s["events"]) == r["sse_events_received"] == r["plan"]["tokens"] + 2
        assert s["tokens"] == r["tokens"]
        assert s["events"][-1] == "data: [DONE]"
        # the first token crossed this capture's interface after the request was sent and
        # after the server's first_ms wait, and (client side) before the client read it
        first_ns = round(s["first_token_ts"] * 1e9)
        assert first_ns - r["t_sent_ns"] >= r["plan"]["first_ms"] * 1e6 - 1e6
        if facts["vantage"] == "client":
            assert 0 <= r["token_times_ns"][0] - first_ns < 50e6


@pytest.mark.tshark
def test_chat_second_connection_sends_its_first_request_in_0rtt(tshark: str) -> None:
    pkts = _packets(CHAT, _keys(CHAT))
    zero = [p for p in pkts if p["conn"] == 1 and p["src"] == CLIENT and ZERO_RTT in p["long"]]
    assert zero, "no 0-RTT packet on the second connection"
    assert 0 in {sid for p in zero for sid, _, _ in p["streams"]}  # chat-4's request stream
    assert not [p for p in pkts if p["conn"] == 0 and ZERO_RTT in p["long"]]
    assert not [p for p in pkts if RETRY in p["long"]]


@pytest.mark.tshark
@pytest.mark.parametrize("path", (LOSSY, LOSSY_SERVER), ids=lambda p: p.name)
def test_lossy_capture_has_a_retry(path: Path, tshark: str) -> None:
    rows = tshark_fields(path, ("ip.src", "quic.long.packet_type", "quic.token_length"),
                         display_filter="quic.long.packet_type")
    retries = [r for r in rows if RETRY in r[1].split(",")]
    assert len(retries) >= 1 and all(r[0] == SERVER for r in retries)
    # the client's Initials after the Retry carry its token
    assert any(r[0] == CLIENT and any(t not in ("", "0") for t in r[2].split(","))
               for r in rows)


def _datagrams(path: Path) -> list[tuple[str, str]]:
    rows = tshark_fields(path, ("ip.src", "udp.payload"), display_filter="udp")
    return [(src, hashlib.sha256(bytes.fromhex(h.replace(":", ""))).hexdigest()[:16])
            for src, h in rows]


@pytest.mark.tshark
def test_drop_log_is_the_difference_between_the_two_vantage_points(tshark: str) -> None:
    link = _facts(LOSSY)["link"]
    at_client, at_server = _datagrams(LOSSY), _datagrams(LOSSY_SERVER)
    for key, src, sender, receiver in (("client_to_server", CLIENT, at_client, at_server),
                                       ("server_to_client", SERVER, at_server, at_client)):
        sent = [h for s, h in sender if s == src]
        got = [h for s, h in receiver if s == src]
        log = link[key]["dropped_datagrams"]
        assert len(sent) - len(got) == len(log) == link[key]["udp_lost"]
        missing = sorted(set(sent) - set(got))
        assert missing == sorted(d["payload_sha256_16"] for d in log)
        assert all(d["flow"].startswith(src) for d in log)


# ------------------------------------------------------- pcaptools with the key log (no tshark)

@pytest.fixture(scope="module")
def loaded() -> dict[str, Any]:
    return {p.name: pcaptools.load(p, keylog=_keys(p)) for p in H3_CAPTURES}


def test_lost_packets_equal_the_drop_log(loaded: dict[str, Any]) -> None:
    """The client capture sees the client's dropped datagram (the server never acknowledges
    it: unacked) and none of the server's (numbers missing); the server capture the reverse.
    Every dropped datagram holds one QUIC packet."""
    for path in (LOSSY, LOSSY_SERVER):
        facts = _facts(path)
        link = facts["link"]
        c2s = len(link["client_to_server"]["dropped_datagrams"])
        s2c = len(link["server_to_client"]["dropped_datagrams"])
        (row,) = loaded[path.name].quic_connections.itertuples()
        if facts["vantage"] == "client":
            assert (row.client_packets_unacked, row.server_packets_missing) == (c2s, s2c)
            assert (row.client_packets_missing, row.server_packets_unacked) == (0, 0)
        else:
            assert (row.server_packets_unacked, row.client_packets_missing) == (s2c, c2s)
            assert (row.server_packets_missing, row.client_packets_unacked) == (0, 0)
    (chat0, chat1) = loaded[CHAT.name].quic_connections.itertuples()
    for r in (chat0, chat1):  # no loss on the chat link
        assert (r.client_packets_unacked, r.client_packets_missing,
                r.server_packets_unacked, r.server_packets_missing) == (0, 0, 0, 0)


@pytest.mark.tshark
def test_the_dropped_client_datagram_is_the_unacked_packet(loaded: dict[str, Any],
                                                           tshark: str) -> None:
    facts = _facts(LOSSY)
    (drop,) = facts["link"]["client_to_server"]["dropped_datagrams"]
    cap = loaded[LOSSY.name]
    frames = [int(f) for f in cap.quic_packets["frame"]]
    # the frame whose UDP payload hash is the drop log's
    rows = tshark_fields(LOSSY, ("frame.number", "udp.payload"), display_filter="udp")
    hit = [int(r[0]) for r in rows
           if hashlib.sha256(bytes.fromhex(r[1].replace(":", ""))).hexdigest()[:16]
           == drop["payload_sha256_16"]]
    (frame,) = hit
    assert frame in frames
    pk = cap.quic_packets[cap.quic_packets["frame"] == frame]
    (pn,) = pk["packet_number"].tolist()
    acked = cap.quic_frames[(cap.quic_frames["frame_type"] == "ACK")
                            & (cap.quic_frames["direction"] == "server_to_client")]
    for ranges in acked["ack_ranges"]:
        for part in str(ranges).split(","):
            lo, _, hi = part.partition("-")
            assert not int(lo) <= pn <= int(hi or lo)


def test_connections_handshake_rtt_and_end(loaded: dict[str, Any]) -> None:
    for path in H3_CAPTURES:
        facts = _facts(path)
        qc = loaded[path.name].quic_connections
        conns = _quic_conns(facts)
        assert len(qc) == len(conns)
        for row, c in zip(qc.itertuples(), conns, strict=True):
            assert row.alpn == "h3" and row.keys_found and not row.needs_keylog
            want = ("retry" if c["quic"]["retry"] else "0rtt"
                    if c["quic"]["early_data_accepted"] else "1rtt")
            assert row.handshake_kind == want
            assert (row.zero_rtt == "accepted") == c["quic"]["early_data_accepted"]
            assert row.resumed == c["quic"]["resumed"]  # (the ServerHello's pre_shared_key)
            assert row.end == "connection_close_application" and row.closed_by == "client"
            assert row.close_error_code == 0  # H3_NO_ERROR
            assert 0 < row.handshake_ms < 1000
            # the link delays 20 ms each way (40 ms RTT): the RTT of the packets sent at this
            # vantage point is at least that; the other side's samples are ack delays
            near = "client" if facts["vantage"] == "client" else "server"
            far = "server" if near == "client" else "client"
            delay = facts["link"]["params"]["delay_ms"]
            assert 2 * delay <= getattr(row, f"{near}_min_rtt_ms") < 2 * delay + 20
            assert getattr(row, f"{far}_min_rtt_ms") < delay
            assert row.key_updates == 0 and row.decrypt_failed == 0
