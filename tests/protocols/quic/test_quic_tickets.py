"""TLS 1.3 NewSessionTicket in QUIC 1-RTT CRYPTO frames (quic_connections.session_tickets,
ticket_frame, ticket_lifetime_s, ticket_max_early_data, ticket_allows_0rtt), against tshark
4.0.17 with the same key log (``tls.handshake.type`` 4, ``tls.handshake.session_ticket_
lifetime_hint``, ``tls.early_data.max_early_data_size``) and against the recordings' facts
(aioquic's client counts the tickets it got: ``session_tickets_received``).

The shipped h3 captures' aioquic server issues one ticket per connection, lifetime 86400 s,
allowing 0-RTT (max_early_data_size 0xffffffff, RFC 9001 §4.6.1); h3-sse-chat's second
connection resumes with the first one's ticket and sends 0-RTT. The corpus's Chrome /
Cloudflare capture (keys in the pcapng DSB) has Cloudflare's tickets.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

import pcaptools
from pcaptools.protocols.tls.handshake import (
    QUIC_MAX_EARLY_DATA,
    HandshakeParseError,
    parse_new_session_ticket,
)
from tests.conftest import CAPTURES, CORPUS
from tests.oracle import keylog_options, tshark_fields

CASES = {
    "h3-sse-chat.pcapng": (CAPTURES / "h3-sse-chat.pcapng", CAPTURES / "h3-sse-chat.keys"),
    "h3-sse-lossy.pcapng": (CAPTURES / "h3-sse-lossy.pcapng", CAPTURES / "h3-sse-lossy.keys"),
    "h3-sse-lossy-server.pcapng": (CAPTURES / "h3-sse-lossy-server.pcapng",
                                   CAPTURES / "h3-sse-lossy-server.keys"),
    "quic-suites.pcapng": (CAPTURES / "quic-suites.pcapng", CAPTURES / "quic-suites.keys"),
    "chrome-cloudflare-quic-with-secrets.pcapng": (
        CORPUS / "chrome-cloudflare-quic-with-secrets.pcapng", None),
}
_COLS = ["session_tickets", "ticket_frame", "ticket_lifetime_s", "ticket_max_early_data",
         "ticket_allows_0rtt"]

#: aioquic's NewSessionTicket in h3-sse-chat frame 7 (its body, after the 4-byte header)
NST_BODY = bytes.fromhex(
    "00015180774447e8000040be7c2ce7cd8e4d8dfa20eb0115a83e838b457395d1963bddaf8ebaef41cffbec5b"
    "039455e6d10efb086f383f995470897ce160b1d2feabe6f3b807f0c1cd46ff0008002a0004ffffffff")


def _tshark_tickets(path: Path, keys: Path | None) -> list[tuple[int, int, int | None]]:
    """(frame, lifetime, max_early_data or None) of every NewSessionTicket tshark shows in
    a QUIC packet (TLS over TCP left out), in order."""
    rows = tshark_fields(path, ("frame.number", "quic.connection.number", "tls.handshake.type",
                                "tls.handshake.session_ticket_lifetime_hint",
                                "tls.early_data.max_early_data_size"), keylog_options(keys))
    out = []
    for fr, conn, types, life, early in rows:
        n = types.split(",").count("4")
        if not conn or not n:
            continue
        lives = [int(x) for x in life.split(",")]
        earlies = [int(x) for x in early.split(",")] if early else []
        # every ticket of these captures has the early_data extension, or none has: the
        # values line up with the tickets
        assert len(lives) == n and len(earlies) in (0, n)
        out += [(int(fr), lives[i], earlies[i] if earlies else None) for i in range(n)]
    return out


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, pcaptools.Capture,
                                                  list[tuple[int, int, int | None]]]:
    path, keys = CASES[request.param]
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    return request.param, pcaptools.load(path, keylog=keys), _tshark_tickets(path, keys)


def test_tickets_equal_tshark(case: tuple[str, pcaptools.Capture,
                                          list[tuple[int, int, int | None]]]) -> None:
    name, cap, theirs = case
    qc = cap.quic_connections
    assert qc["session_tickets"].notna().all(), name
    pk = cap.quic_packets
    conn_of = dict(zip(pk["frame"].tolist(), pk["quic_connection"].tolist(), strict=False))
    assert int(qc["session_tickets"].sum()) == len(theirs) > 0
    for r in qc.to_dict("records"):
        mine = [t for t in theirs if conn_of[t[0]] == r["quic_connection"]]
        assert int(r["session_tickets"]) == len(mine), (name, r["quic_connection"])
        if not mine:
            assert all(pd.isna(r[c]) for c in _COLS[1:])
            continue
        frame, life, early = mine[0]
        assert (r["ticket_frame"], r["ticket_lifetime_s"]) == (frame, life)
        if early is None:
            assert pd.isna(r["ticket_max_early_data"]) and r["ticket_allows_0rtt"] is False
        else:
            assert r["ticket_max_early_data"] == early == QUIC_MAX_EARLY_DATA
            assert r["ticket_allows_0rtt"] is True


@pytest.mark.parametrize("name", ["h3-sse-chat.pcapng", "h3-sse-lossy.pcapng",
                                  "quic-suites.pcapng"])
def test_tickets_equal_the_clients_count(name: str) -> None:
    path, keys = CASES[name]
    facts = json.loads(Path(f"{path}.facts.json").read_text())
    cap = pcaptools.load(path, keylog=keys)
    got = cap.quic_connections["session_tickets"].astype(int).tolist()
    assert got == [c["quic"]["session_tickets_received"] for c in facts["connections"]]
    assert got == [1] * len(got)
    qc = cap.quic_connections
    assert (qc["ticket_lifetime_s"] == 86400).all() and qc["ticket_allows_0rtt"].all()
    if name == "h3-sse-chat.pcapng":  # the second connection resumed with the first's ticket
        assert qc["resumed"].tolist() == [False, True]
        assert qc["zero_rtt"].astype(object).tolist()[1] == "accepted"


def test_without_keys_the_tickets_are_unknown() -> None:
    path = CAPTURES / "h3-sse-chat.pcapng"
    if not path.exists():
        pytest.skip("h3-sse-chat.pcapng is absent")
    qc = pcaptools.load(path).quic_connections
    assert len(qc) == 2
    for c in _COLS:
        assert qc[c].isna().all(), c


def test_parse_new_session_ticket() -> None:
    t = parse_new_session_ticket(NST_BODY)
    assert (t.lifetime_s, t.age_add, t.nonce_len, t.ticket_len) == (86400, 2000963560, 0, 64)
    assert t.extensions == (42,) and t.max_early_data == 0xFFFFFFFF
    # no extensions: no 0-RTT with this ticket
    plain = NST_BODY[:-10] + b"\x00\x00"
    t2 = parse_new_session_ticket(plain)
    assert t2.extensions == () and t2.max_early_data is None
    for bad in (NST_BODY[:-1], NST_BODY[:8], NST_BODY + b"\x00",
                NST_BODY[:-10] + bytes.fromhex("0006002a0002ffff"),  # early_data of 2 bytes
                NST_BODY[:9] + b"\x00\x00" + b"\x00\x00"):  # an empty ticket
        with pytest.raises(HandshakeParseError):
            parse_new_session_ticket(bad)


def test_parse_new_session_ticket_never_raises_anything_else() -> None:
    rng = random.Random(15)
    for _ in range(3000):
        body = bytearray(NST_BODY[: rng.randrange(len(NST_BODY) + 1)])
        for _ in range(rng.randrange(4)):
            if body:
                body[rng.randrange(len(body))] = rng.randrange(256)
        try:
            t = parse_new_session_ticket(bytes(body))
        except HandshakeParseError:
            continue
        assert t.ticket_len > 0 and 0 <= t.lifetime_s < 2**32
